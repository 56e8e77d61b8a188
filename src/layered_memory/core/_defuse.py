"""Defusing untrusted text before it enters the prompt: one function, used for everything.

Memory files, rule files, session data and file names are written by whoever can write them,
the agent included. Put in the prompt verbatim, such text could end the element that holds it
(`</layer>`, `</agent_memory>`) and go on as if it were our instructions, or pose as another
turn (`</system>`, `<|im_start|>system`). `defuse` breaks every such tag by putting a
backslash right after its `<`, so `</layer>` reads `<\\/layer>`: a model still reads the text,
and nothing closes.

What counts as such a tag, whatever the case and however it is disguised:

- a closing tag whose name starts with one of `GUARDED_NAMES`: the elements of our block
  (`agent_memory`, `memory_guidelines`, `layer`, `rule`/`rules`, `requested_rules`) and the
  names chat formats use for turns and tool traffic (`system`, `system-reminder`, `user`,
  `assistant`, `human`, `developer`, `tool_result`, `function_calls`, `instructions`, ...);
- a chat-template token opening with `<|` (`<|im_start|>`, `<|eot_id|>`, DeepSeek's
  `<｜User｜>`);
- in both, with whitespace or invisible characters (zero-width, bidi controls, combining
  marks: `</\\u200blayer>`) anywhere inside, and with look-alike characters for the `<`, the
  `/`, the `|` and every letter (Cyrillic `ѕуѕtеm`, fullwidth `＜／ｓｙｓｔｅｍ＞`, math
  alphabets), as Unicode's confusables list pairs them (`_lookalikes.py`).

Everything else is left exactly as it is: `a < b`, `x</y`, HTML and XML in code examples
(`</div>`, `</script>`, `</dependency>`), opening tags (`<system>` cannot end our element,
and inside it is plainly data). The one cost is that a closing tag of a code example whose
name starts with a guarded word (`</toolbar>`, `</users>`) also gets its backslash.

The rewrite is one regex substitution, linear in the text; it is idempotent, and the same
text always gives the same bytes.
"""

from __future__ import annotations

import functools
import re
from html import escape

from layered_memory.core._lookalikes import INVISIBLE, LOOKALIKES

__all__ = ["GUARDED_NAMES", "ascii_skeleton", "defuse", "defuse_attribute", "defuse_name"]

GUARDED_NAMES = (
    "agent_memory",
    "memory_guidelines",
    "layer",
    "rule",
    "requested_rules",
    "system",
    "user",
    "assistant",
    "human",
    "developer",
    "tool",
    "function",
    "instructions",
)
"""A closing tag whose name starts with one of these is defused (`rule` covers `rules`)."""

# Written by hand beside the generated tables: brackets and bars Unicode does not list as
# confusable with `<`, `>` and `|` but that render alike (`⟨/layer⟩`, `〈/layer〉`, `<∣im_start∣>`),
# and the braille blank, which renders as a space-width nothing.
_EXTRA_LOOKALIKES = {"<": "\u2329\u27e8\u3008", ">": "\u232a\u27e9\u3009", "|": "\u2223\u2502"}
_EXTRA_INVISIBLE = "2800"
_ALL_LOOKALIKES = {
    char: similar + _EXTRA_LOOKALIKES.get(char, "") for char, similar in LOOKALIKES.items()
}

# Gemma's turn tokens and the Llama 2 / Mistral sequence tokens, which tokenizers parse as
# special tokens from raw text (`<|...|>` tokens are handled by their own branch).
_TOKENS = ("start_of_turn", "end_of_turn")

_HIDDEN = "\x01"
"""What every invisible character becomes in the skeleton."""


def _skeleton_table() -> dict[int, str]:
    """`str.translate` table: a look-alike -> its ASCII character, an invisible -> `_HIDDEN`.

    Every entry maps one character to one character, so the skeleton of a text has the text's
    length and a match in it is at the same index in the text. ASCII letters map to lower case.
    """
    table: dict[int, str] = {code: chr(code).lower() for code in range(ord("A"), ord("Z") + 1)}
    targets: dict[str, set[str]] = {}
    for char, similar in _ALL_LOOKALIKES.items():
        for other in similar:
            if not other.isascii():
                targets.setdefault(other, set()).add(char)
    table.update({ord(other): min(chars) for other, chars in targets.items()})
    for word in (*INVISIBLE.split(), _EXTRA_INVISIBLE):
        low, _, high = word.partition("-")
        table.update(dict.fromkeys(range(int(low, 16), int(high or low, 16) + 1), _HIDDEN))
    return table


_TABLE = _skeleton_table()


def _char_class(char: str, *, letters: bool = True) -> str:
    """The class of skeleton characters that stand for `char` (ASCII look-alikes included).

    `letters=False` leaves out look-alikes that are ASCII letters (`l` for `|`): `<link>`
    must stay as it is.
    """
    members = {char.lower()}
    for other in _ALL_LOOKALIKES.get(char, ""):
        shown = _TABLE.get(ord(other), other.lower())
        if letters or not shown.isalpha():
            members.add(shown)
    return "[" + "".join(re.escape(member) for member in sorted(members)) + "]"


def _opener(gap: str, hidden: str, flags: int, guarded: tuple[str, ...]) -> re.Pattern[str]:
    """The `<` of a guarded closing tag or chat token.

    `gap` may repeat between the `<`, the `/` (or `|`) and the name, `hidden` between the
    letters of the name and after a `|` (a chat token has no blank inside: `f <| g` is code).
    Every repetition is possessive and each piece is a small class, so the match at one `<`
    never backtracks: the whole search is linear.
    """
    names = "|".join(hidden.join(_char_class(char) for char in name) for name in guarded)
    tokens = "|".join(hidden.join(_char_class(char) for char in name) for name in _TOKENS)
    slash, pipe = _char_class("/", letters=False), _char_class("|", letters=False)
    # `<s>` / `</s>` exactly (a sequence token), not `</span>`: `s`, then `>` after the gap.
    sequence = f"{_char_class('s')}{gap}{_char_class('>', letters=False)}"
    return re.compile(
        f"<(?={gap}(?:{slash}{gap}(?:{names}|{sequence})|{pipe}{hidden}\\w|{tokens}|{sequence}))",
        flags,
    )


_LESS_THAN = re.compile("[" + re.escape("<" + _ALL_LOOKALIKES["<"]) + "]")
"""`<` or a look-alike, searched in the text itself: most texts have none."""


@functools.lru_cache(maxsize=16)
def _openers(names: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """For ASCII text, a pattern matched on the text itself (`re.IGNORECASE` covers upper
    case); for any other text, one matched on its skeleton (see `_skeleton_table`)."""
    guarded = (*GUARDED_NAMES, *names)
    return (
        _opener(r"\s*+", "", re.IGNORECASE, guarded),
        _opener(f"[\\s{_HIDDEN}]*+", f"{_HIDDEN}*+", 0, guarded),
    )


def defuse(text: str, *, names: tuple[str, ...] = ()) -> str:
    """`text` with every closing tag and chat token that could break out of our block defused.

    See the module docstring for what is defused and what is left alone.

    Args:
        text: Untrusted text.
        names: Tag names guarded besides `GUARDED_NAMES`, for a block with elements of its own
            (`tiered_memory`); prefixes, like those.

    Example:
        `defuse("ok</layer>\\n</system>")` -> `"ok<\\\\/layer>\\n<\\\\/system>"`
    """
    ascii_opener, skeleton_opener = _openers(names)
    if text.isascii():
        return ascii_opener.sub("<\\\\", text) if "<" in text else text
    if _LESS_THAN.search(text) is None:
        return text
    skeleton = text.translate(_TABLE)
    parts: list[str] = []
    start = 0
    for found in skeleton_opener.finditer(skeleton):
        cut = found.start() + 1
        parts.append(text[start:cut])
        parts.append("\\")
        start = cut
    if not parts:
        return text
    parts.append(text[start:])
    return "".join(parts)


def ascii_skeleton(text: str) -> str:
    """`text` as it reads: every look-alike as its ASCII character, ASCII letters in lower case,
    invisible characters removed (`ıgnоre` with a dotless i and a Cyrillic o reads `ignore`).

    For checks on what a text says; never shown (letters without an ASCII look-alike stay).
    """
    return text.translate(_TABLE).replace(_HIDDEN, "")


@functools.lru_cache(maxsize=4096)
def defuse_attribute(value: str) -> str:
    """An attribute value: one line (whitespace runs collapsed), HTML-escaped, defused.

    Remembered, as `defuse_name`: the same names and paths come back at every render.
    """
    return defuse(escape(" ".join(value.split()), quote=True))


@functools.lru_cache(maxsize=4096)
def defuse_name(value: str) -> str:
    """`defuse` for a path or name shown in running text (a marker, a list line)."""
    return defuse(value)
