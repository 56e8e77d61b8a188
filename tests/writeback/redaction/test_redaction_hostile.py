"""Redaction stays linear on hostile input: a megabyte of adversarial text never hangs it.

Run in a subprocess with a generous time limit (a hang fails the test, a slow machine does
not): every text below made some version of the detectors rescan the rest of the text for each
occurrence of a pattern (quadratic), or backtrack inside a run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from layered_memory import redact

LIMIT_SECONDS = 300

SCRIPT = textwrap.dedent(
    """
    import random
    from layered_memory.safety.redaction import redact, redact_json

    MB = 1 << 20

    def fill(unit, size=MB):
        return (unit * (size // len(unit) + 1))[:size]

    rnd = random.Random(5)
    units = [
        "-----BEGIN PRIVATE KEY-----\\n", "-----BEGIN A PRIVATE KEY-----x",
        "PuTTY-User-Key-File-2: ", "a://a:@", "ab://" + "u" * 100 + ":" + "p" * 100 + "@@",
        "s://:", "password=",
        "password: '", '"password":"', "password=`", "password is ", "--password ", "?token=a&",
        "passwordtokensecretkeysig", "sk-", "eyJaaaaa.eyJ", "%41", "%E2%80%8B", "a\\u200b", "a\\n",
        "ab1C2d\\n", "aB3/", "aB3/" * 10 + "x ", "Bearer ", "Basic YWJjOmRlZg== ",
        "Authorization: ", "-u a:", "https://hooks.slack.com/", "AccountKey=", "a-", "=", " ",
        "a://a:\\n", "ab://" + "u" * 128 + ":\\n x",
        # Command lines, credential files and vendor heads (issue 22).
        "mysql -p", "mysql " + "a" * 40, "sqlplus " + "a" * 200 + "/", "redis-cli -a ",
        "smbclient -U " + "u" * 200, "a:5432:b:c:", "*:*:", "machine a login b ",
        "machine " + "m" * 300, "Q~", "abc1Q~", ".atlasv1.", "_mmk", "LS0tLS1CRUdJTi" + "A" * 40,
        '"auth": "', "_auth=", "psk=", "-storepass ", "sk-" + "a" * 31, "ATATT3", "sl.",
        # Issue 35: command lines, pairs, joined literals, code and format strings.
        "redis-cli AUTH a ", "htpasswd -b a ", "zip -P ", "ssh-keygen -N ", "openssl -pass ",
        "login: a / ", "credentials: " + "u" * 70 + " /", 'a" + "b', "a' 'b", 'a"\\n  "b',
        "LTAI" + "a1" * 10 + " ", "a1" * 15 + " ", ' key="password" value="', "SSWS ",
        '"' * 3, "password = " + '"' * 3 + "a", "${PASSWORD:-", "password: a.b.c", "password: a?.",
        "%H:%M:", "a:5432:b:c:d in ", "https://" + "ab" * 16 + "@",
    ]
    # One megabyte mixing every unit, then the run- and line-sensitive ones a megabyte each.
    mixed = "".join(fill(unit, MB // len(units)) for unit in units)
    mixed += "".join(rnd.choice("=:'\\"@/%\\n \\tpassword") for _ in range(MB // 8))
    texts = [mixed] + [fill(unit) for unit in (
        "password=", "-----BEGIN PRIVATE KEY-----\\n", "PuTTY-User-Key-File-2: ", "a://a:@",
        "ab1C2d\\n", "%41\\u200b", "a://a:\\n", "mysql -pa ", "sqlplus a", "machine a ",
        "a:1:", "a1bQ~", 'a" + "', "LTAI0123456789abcdef ", "redis-cli AUTH ",
        "login: a / b ", "password: a.b ",
    )]
    for text in texts:
        redact(text)
    # Secret-named keys of a saved value: long names, long values, many keys.
    redact_json({fill("password_"): fill("a..."), "api_key": fill("{{x}} "), "token": fill("=")})
    redact_json({f"k{i}_password": "p" for i in range(MB // 16)})
    print("ok", len(texts))
    """
)


@pytest.mark.slow
def test_a_megabyte_of_adversarial_text_never_hangs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "18"]


@pytest.mark.parametrize(
    "text",
    [
        "PASSWORD\x00=Xk9mQ2pL7vTz",
        "PASS\x1bWORD=Xk9mQ2pL7vTz",
        "db_password=\x07Xk9mQ2pL7vTz",
        "ghp_\x00A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    ],
)
def test_control_characters_inside_a_secret_do_not_hide_it(text: str) -> None:
    """A terminal shows NUL, ESC or BEL as nothing: read as the zero-width characters are."""
    redacted, kinds = redact(text)
    assert kinds
    assert "Xk9mQ2pL7vTz" not in redacted
    assert "A1b2C3d4E5f6G7h8I9j0" not in redacted
    assert redact("hello\x00world \x1b[31mred\x1b[0m") == ("hello\x00world \x1b[31mred\x1b[0m", [])
