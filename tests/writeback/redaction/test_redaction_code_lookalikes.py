"""Code is not a secret: real code lines that name passwords, tokens and keys come out of
redaction byte for byte (`code_lookalikes.txt`, one line each, from rule files and projects:
expressions, attribute access, calls, format strings, template placeholders, bind parameters).

The detectors read code as code (`safety._named_fields`: `is_code`, `is_format_string`, the
placeholders);
no line here is listed anywhere in the package. Each line is also checked inside a fenced
code block of a memory file and after a secret of the corpus on the same line, so the
decision rests on the code itself, not on the line being alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from layered_memory.safety.redaction import redact

CODE = [
    line
    for line in Path(__file__).with_name("code_lookalikes.txt").read_text("utf-8").splitlines()
    if line
]


def test_the_code_corpus_is_big_enough() -> None:
    assert len(CODE) >= 100
    assert len(set(CODE)) == len(CODE)


@pytest.mark.parametrize("line", CODE)
def test_code_stays_byte_for_byte(line: str) -> None:
    assert redact(line) == (line, [])
    fenced = f"Example:\n\n```\n{line}\n```\n"
    assert redact(fenced) == (fenced, [])


def test_the_issue_examples_stay() -> None:
    for line in (
        "password: vals.password.length < 6 ? 'Too short' : undefined,",
        'STAMP="$(date -u +%Y-%m-%dT%H:%M:%SZ)"',
    ):
        assert redact(line) == (line, [])


def test_a_literal_beside_code_is_still_a_secret() -> None:
    """Understanding code does not excuse a literal: the same fields with values are cut."""
    for text in (
        "password: 'Tr0ub4dor&3',",
        'token = "ghp_' + "A1b2C3d4" * 5 + '"',
        "password: Tr0ub4dor.x3 ? a : b",
        "DB_PASSWORD=hunter2x9",
        "password: 'hunter2|min:8'",  # a validation rule list holds rule names only
        "'password' => 'required|Tr0ub4dor&3',",
        "password: 'required|min:hunter2'",  # a rule's argument is a number or a field name
        "password: 'required|same:Tr0ub4dor'",
    ):
        output, kinds = redact(text)
        assert kinds, text
        assert "[REDACTED:" in output
