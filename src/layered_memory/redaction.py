"""Secret redaction: credentials are cut out of text before it can reach a memory file.

Memory files are read back into every later prompt and often committed to version control, so a
key that slips into one leaks for good. `redact` replaces each recognized secret with a
`[REDACTED:<kind>]` marker and reports the kinds it found, so callers can log *that* something
was redacted without logging the secret itself.

Recognized kinds:

- `private_key`: PEM private keys (`-----BEGIN ... PRIVATE KEY-----` ... `END`), also cut short
- `jwt`: JSON Web Tokens (`eyJ...`.`eyJ...`.`...`)
- `anthropic_api_key`: `sk-ant-...`
- `openai_api_key`: other `sk-...` keys (`sk-proj-...`, `sk-svcacct-...`, legacy `sk-...`)
- `aws_access_key_id`: `AKIA...` / `ASIA...`
- `aws_secret_access_key`: `aws_secret_access_key = ...`
- `github_token`: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` tokens and `github_pat_...`
- `slack_token`: `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxe-` tokens and `xapp-...`
- `google_api_key`: `AIza...`
- `bearer_token`: `Bearer <token>`
- `url_credentials`: the password in `scheme://user:password@host`
- `password`: the value of `password=...`, `passwd: ...`, `pwd=...`
- `secret_assignment`: the value of `secret=...`, `token: ...`, `api_key=...`,
  `client_secret=...`, `access_token=...`, `private_key=...`

Example:
    >>> redact("use key sk-proj-abcdefghijklmnopqrstuvwx please")
    ('use key [REDACTED:openai_api_key] please', ['openai_api_key'])
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["REDACTION_KINDS", "redact"]

_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|(?!\[REDACTED)[^\s,;]+)"""
"""A quoted or bare assignment value; an earlier marker is not redacted twice."""

# Order matters: multi-part secrets (PEM blocks, JWTs) go first so the narrower token patterns
# never cut them in half, and the `name=value` patterns go last so a value that is itself a
# recognized token is reported under its precise kind.
_PATTERNS: Final[tuple[tuple[str, re.Pattern[str], str], ...]] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]*)PRIVATE KEY-----"
            r"(?:.*?-----END (?P=label)PRIVATE KEY-----|.*\Z)",
            re.DOTALL,
        ),
        "[REDACTED:private_key]",
    ),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        "[REDACTED:jwt]",
    ),
    (
        "anthropic_api_key",
        re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
        "[REDACTED:anthropic_api_key]",
    ),
    (
        "openai_api_key",
        re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
        "[REDACTED:openai_api_key]",
    ),
    (
        "aws_access_key_id",
        re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        "[REDACTED:aws_access_key_id]",
    ),
    (
        "aws_secret_access_key",
        re.compile(r"(?i)\b(?P<name>aws_secret_access_key)(?P<sep>\s*[=:]\s*)" + _VALUE),
        r"\g<name>\g<sep>[REDACTED:aws_secret_access_key]",
    ),
    (
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
        "[REDACTED:github_token]",
    ),
    (
        "slack_token",
        re.compile(r"\b(?:xox[abeprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,})"),
        "[REDACTED:slack_token]",
    ),
    (
        "google_api_key",
        re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
        "[REDACTED:google_api_key]",
    ),
    (
        "bearer_token",
        re.compile(r"(?i)\b(?P<name>bearer)\s+(?!\[REDACTED)[A-Za-z0-9._~+/-]{16,}=*"),
        r"\g<name> [REDACTED:bearer_token]",
    ),
    (
        "url_credentials",
        re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?P<at>@)"),
        r"\g<head>[REDACTED:url_credentials]\g<at>",
    ),
    (
        "password",
        re.compile(r"(?i)\b(?P<name>password|passwd|pwd)(?P<sep>\s*[=:]\s*)" + _VALUE),
        r"\g<name>\g<sep>[REDACTED:password]",
    ),
    (
        "secret_assignment",
        re.compile(
            r"(?i)\b(?P<name>(?:client[_-]?)?secret|(?:access[_-]?|auth[_-]?|refresh[_-]?)?token"
            r"|api[_-]?key|private[_-]?key)(?P<sep>\s*[=:]\s*)" + _VALUE
        ),
        r"\g<name>\g<sep>[REDACTED:secret_assignment]",
    ),
)

REDACTION_KINDS: Final[tuple[str, ...]] = tuple(kind for kind, _, _ in _PATTERNS)
"""Every kind `redact` can report, in the order the patterns are applied."""


def redact(text: str) -> tuple[str, list[str]]:
    """Replace every recognized secret in `text` with a `[REDACTED:<kind>]` marker.

    Args:
        text: Any text about to be persisted.

    Returns:
        The redacted text and the kinds found, each once, in pattern order (empty when the text
        was left unchanged).
    """
    found: list[str] = []
    for kind, pattern, replacement in _PATTERNS:
        text, count = pattern.subn(replacement, text)
        if count:
            found.append(kind)
    return text, found
