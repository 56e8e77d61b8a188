"""Secrets never reach memory: every kind of issue 4 point 5 is recognized and removed."""

from __future__ import annotations

import pytest

from layered_memory.safety.redaction import REDACTION_KINDS, redact

# Secrets are assembled at run time so that secret scanners never flag this file.
_PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + "\n" + "AmZvb2Jhcg" * 6
SECRETS: dict[str, tuple[str, str]] = {
    # kind: (text containing the secret, the secret itself)
    "openai_api_key": ("key " + "sk-" + "proj-" + "A1b2" * 8, "sk-" + "proj-" + "A1b2" * 8),
    "openai_legacy_key": ("key " + "sk-" + "Z9y8" * 12, "sk-" + "Z9y8" * 12),
    "anthropic_api_key": (
        "use " + "sk-" + "ant-api03-" + "Qw_e" * 10 + " now",
        "sk-" + "ant-api03-" + "Qw_e" * 10,
    ),
    "aws_access_key_id": ("id=" + "AKIA" + "IOSFODNN7EXAMPLE", "AKIA" + "IOSFODNN7EXAMPLE"),
    "aws_session_key_id": ("id " + "ASIA" + "Y34FZKBOKMUTVV7A", "ASIA" + "Y34FZKBOKMUTVV7A"),
    "aws_secret_access_key": (
        "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    ),
    "github_token": ("token " + "ghp_" + "a1B2c3D4" * 5, "ghp_" + "a1B2c3D4" * 5),
    "github_oauth_token": ("gho_" + "Zz09" * 9, "gho_" + "Zz09" * 9),
    "github_pat": (
        "pat: " + "github_pat_" + "11ABCDEFG0" + "_abcXYZ123" * 6,
        "github_pat_" + "11ABCDEFG0" + "_abcXYZ123" * 6,
    ),
    "slack_bot_token": (
        "slack " + "xoxb-" + "1234567890-0987654321-" + "AbCdEfGh" * 3,
        "xoxb-" + "1234567890-0987654321-" + "AbCdEfGh" * 3,
    ),
    "slack_user_token": (
        "xoxp-" + "11112222-3333" + "x" * 12,
        "xoxp-" + "11112222-3333" + "x" * 12,
    ),
    "jwt": (
        "auth eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N",
        "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N",
    ),
    "private_key": (
        "key:\n-----BEGIN RSA PRIVATE KEY-----\n"
        + _PEM_BODY
        + "\n-----END RSA PRIVATE KEY-----\nafter",
        _PEM_BODY,
    ),
    "openssh_private_key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _PEM_BODY + "\n-----END OPENSSH PRIVATE KEY-----",
        _PEM_BODY,
    ),
    "truncated_private_key": ("-----BEGIN PRIVATE KEY-----\n" + _PEM_BODY, _PEM_BODY),
    "password": ("login with password=" + "hunter2!x", "hunter2!x"),
    "quoted_password": ('passwd: "' + "correct horse battery" + '"', "correct horse battery"),
    "secret_assignment": ("client_secret=" + "s3cr3tV4lu3", "s3cr3tV4lu3"),
    "api_key_assignment": ("API_KEY: " + "abc123def456", "abc123def456"),
    "bearer_token": (
        "Authorization: Bearer " + "abcdefghijklmnop1234.qrs",
        "abcdefghijklmnop1234.qrs",
    ),
    "url_credentials": (
        "db at postgresql://app:" + "Pa55word" + "@db.internal:5432/x",
        "Pa55word",
    ),
    "google_api_key": ("maps " + "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIza" + "SyA1"),
}


@pytest.mark.parametrize("case", sorted(SECRETS))
def test_each_secret_kind_is_removed(case: str) -> None:
    text, secret = SECRETS[case]
    redacted, kinds = redact(text)
    assert secret not in redacted
    assert kinds, "a redaction must be reported"
    assert all(kind in REDACTION_KINDS for kind in kinds)
    assert "[REDACTED:" in redacted


def test_every_issue_kind_is_reported_under_its_name() -> None:
    expected = {
        "openai_api_key": "openai_api_key",
        "anthropic_api_key": "anthropic_api_key",
        "aws_access_key_id": "aws_access_key_id",
        "github_token": "github_token",
        "github_pat": "github_token",
        "slack_bot_token": "slack_token",
        "jwt": "jwt",
        "private_key": "private_key",
        "password": "password",
    }
    for case, kind in expected.items():
        assert redact(SECRETS[case][0])[1] == [kind], case


def test_all_secrets_in_one_text_none_survives() -> None:
    # A PEM block without its END line swallows the rest of the text, so it goes last.
    cases = sorted(SECRETS, key=lambda case: case == "truncated_private_key")
    text = "\n".join(SECRETS[case][0] for case in cases)
    redacted, kinds = redact(text)
    for case, (_, secret) in SECRETS.items():
        assert secret not in redacted, case
    assert set(kinds) >= {
        "openai_api_key",
        "anthropic_api_key",
        "aws_access_key_id",
        "github_token",
        "slack_token",
        "jwt",
        "private_key",
        "password",
    }
    assert len(kinds) == len(set(kinds))


def test_surrounding_text_and_names_are_kept() -> None:
    redacted, kinds = redact("connect with password=" + "hunter2x" + " then retry")
    assert redacted == "connect with password=[REDACTED:password] then retry"
    assert kinds == ["password"]
    text, secret = SECRETS["private_key"]
    redacted, _ = redact(text)
    assert redacted.startswith("key:\n[REDACTED:private_key]")
    assert redacted.endswith("\nafter")
    assert secret not in redacted


def test_clean_text_is_unchanged() -> None:
    text = "Acme prefers weekly reports; the token budget is 4000; skip the password reset flow."
    assert redact(text) == (text, [])


def test_a_token_in_an_assignment_is_reported_once_under_its_precise_kind() -> None:
    key = "sk-" + "proj-" + "Q" * 30
    redacted, kinds = redact(f"api_key={key}")
    assert redacted == "api_key=[REDACTED:openai_api_key]"
    assert kinds == ["openai_api_key"]
