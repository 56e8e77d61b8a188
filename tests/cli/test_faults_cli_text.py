"""`printable` and `dumps_json`: the one escaping helper every CLI subcommand prints through."""

from __future__ import annotations

import json
import unicodedata

from layered_memory.cli._output import dumps_json, printable

HOSTILE = [
    "\n",
    "\r",
    "\x1b[2J",
    "\x9b31m",
    "\x7f",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "\u2028",
    "\U000e0041",
]


def unsafe(text: str, *, allow: str = "\n") -> list[str]:
    return [
        char
        for char in text
        if char not in allow and unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs")
    ]


def test_every_control_and_invisible_character_is_escaped() -> None:
    categories = ("Cc", "Cf", "Zl", "Zp", "Cs")
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in categories:
            shown = printable(f"a{char}b")
            assert shown.startswith("a\\"), f"U+{code:04X} not escaped"
            assert shown.endswith("b")
            assert not unsafe(shown, allow=""), f"U+{code:04X}"
    bidi_controls = {"LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI"}
    for code in range(0x110000):
        if unicodedata.bidirectional(chr(code)) in bidi_controls:
            assert printable(chr(code)).startswith("\\u"), f"U+{code:04X}"


def test_text_stays_readable() -> None:
    for text in (
        "/AGENTS.md",
        "règles-ün.md",
        "日本語/メモ.md",
        "emoji ☕ 🚀",
        "C:\\Users\\x",
        "a b",
    ):
        assert printable(text) == text
    assert printable("line\nnext\tcell") == "line\\nnext\\tcell"
    assert printable("line\nnext\tcell\r", multiline=True) == "line\nnext\tcell\\r"


def test_json_is_valid_exact_and_terminal_safe() -> None:
    data = {"key": "".join(HOSTILE) + "\udcff", "keys": [f"/{char}.md" for char in HOSTILE]}
    text = dumps_json(data)
    assert json.loads(text) == data, "decodes to exactly the same strings"
    assert not unsafe(text)
    text.encode("utf-8")  # a lone surrogate (a non-UTF-8 file name) no longer breaks printing
