"""Builds `layered_memory/core/_lookalikes.py` from Unicode data (run this file to regenerate it).

The look-alike characters come from Unicode's confusables list as the `confusable-homoglyphs`
package ships it (a dev dependency: importing it costs 270 ms, too much for the package
itself), plus every character NFKC folds to the same ASCII character (fullwidth `＜`, circled
`Ⓐ`); the invisible characters from `unicodedata` (categories Cf, Mn, Me, plus the Hangul
fillers that render as nothing).

    .venv/bin/python tests/core/hostile/hostile_lookalikes.py   # rewrites the module
"""

from __future__ import annotations

import string
import sys
import unicodedata
from pathlib import Path

MODULE = Path(__file__).resolve().parents[3] / "src" / "layered_memory" / "core" / "_lookalikes.py"
ASCII = string.ascii_lowercase + "_-<>/|"
FILLERS = (0x115F, 0x1160, 0x3164, 0xFFA0)
"""Hangul fillers: letters (Lo) that render as nothing."""


def lookalikes() -> dict[str, str]:
    """For each character of `ASCII`, the single characters that look like it (either case)."""
    from confusable_homoglyphs.confusables import confusables_data

    folded: dict[str, set[str]] = {char: set() for char in ASCII}
    for code in range(0x80, sys.maxunicode + 1):
        nfkc = unicodedata.normalize("NFKC", chr(code))
        if len(nfkc) == 1 and nfkc.lower() in folded:
            folded[nfkc.lower()].add(chr(code))
    table: dict[str, str] = {}
    for char in ASCII:
        found = set(folded[char])
        for key in {char, char.upper()}:
            found.update(h["c"] for h in confusables_data.get(key, ()) if len(h["c"]) == 1)
        found -= {char, char.upper()}
        table[char] = "".join(sorted(found))
    return table


def invisible_ranges() -> list[tuple[int, int]]:
    """Code point ranges of format characters, combining marks and fillers."""
    points = [
        code
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cf", "Mn", "Me") or code in FILLERS
    ]
    ranges: list[tuple[int, int]] = []
    for code in points:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return ranges


def invisible(text: str) -> list[tuple[int, int]]:
    """`INVISIBLE`'s ranges (the same parsing as `_defuse`'s)."""
    ranges = []
    for word in text.split():
        low, _, high = word.partition("-")
        ranges.append((int(low, 16), int(high or low, 16)))
    return ranges


def _wrapped(words: list[str]) -> list[str]:
    rows: list[str] = []
    row = ""
    for word in words:
        if row and len(row) + len(word) + 1 > 84:
            rows.append(f'    "{row} "')
            row = ""
        row = f"{row} {word}" if row else word
    rows.append(f'    "{row}"')
    return rows


def render() -> str:
    """The module's source text."""
    lines = [
        '"""Look-alike and invisible characters, for `_defuse`. Generated: do not edit by hand.',
        "",
        "Regenerate with `.venv/bin/python tests/core/hostile/hostile_lookalikes.py`; a test",
        "checks it against Unicode's confusables list (`confusable-homoglyphs`) and `unicodedata`.",
        '"""',
        "",
        f'UNICODE_VERSION = "{unicodedata.unidata_version}"',
        "",
        "LOOKALIKES: dict[str, str] = {",
    ]
    for char, chars in lookalikes().items():
        chunks = [chars[i : i + 40] for i in range(0, len(chars), 40)] or [""]
        if len(chunks) == 1:
            lines.append(f'    "{char}": {chunks[0]!r},'.replace("'", '"'))
            continue
        lines.append(f'    "{char}": (')
        lines += [f"        {chunk!r}".replace("'", '"') for chunk in chunks]
        lines.append("    ),")
    lines += [
        "}",
        '"""ASCII character -> the single characters Unicode calls confusable with it."""',
    ]
    words = [f"{low:X}" if low == high else f"{low:X}-{high:X}" for low, high in invisible_ranges()]
    lines += ["", "INVISIBLE = (", *_wrapped(words), ")"]
    lines += [
        '"""Hex code point ranges (`LOW-HIGH`, inclusive, or one code point), blank-separated:',
        'format characters, combining marks and fillers, which render as nothing."""',
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    import subprocess

    MODULE.write_text(render(), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(MODULE)], check=True)
    print(f"wrote {MODULE}")
