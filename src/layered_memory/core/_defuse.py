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

Chat-template tokens that self-hosted tokenizers parse from raw text are broken the same way:
`<start_of_turn>`, `<eos>`, `<s>` and `</s>`, `<<SYS>>` (a backslash after the `<`), Mistral's
`[INST]`, `[/INST]`, `[SYSTEM_PROMPT]`, `[TOOL_RESULTS]` ... (a backslash after the `[`), and the
legacy completion format's `\n\nHuman:` / `\n\nAssistant:` (a backslash before the name).

Before any of that, characters that hide text are removed (`drop_invisible`): Unicode's
default-ignorable code points, which render as nothing (tag characters, variation selectors,
zero-width characters, bidi controls, Hangul fillers, ...). 64 tag characters spell 64 ASCII
characters a model reads and a person never sees; nothing of the kind reaches the prompt.

Each rewrite is one linear scan; the whole is idempotent, and the same text always gives the
same bytes.
"""

from __future__ import annotations

import functools
import re
from html import escape

from layered_memory.core._lookalikes import INVISIBLE, LOOKALIKES

__all__ = [
    "GUARDED_NAMES",
    "IGNORABLE",
    "defuse",
    "defuse_attribute",
    "defuse_name",
    "drop_invisible",
]

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
    "think",
)
"""A closing tag whose name starts with one of these is defused (`rule` covers `rules`,
`think` DeepSeek's and Qwen's `</think>` and `</thinking>`)."""

_ALWAYS_HIDDEN = (
    "\xad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200e\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0d\ufeff\uffa0\ufff0-\ufffb"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
)
_MAY_STAY = "\u200c\u200d\ufe0e\ufe0f"
"""Zero-width non-joiner and joiner, variation selectors 15 and 16 (text and emoji
presentation): they shape the visible characters beside them."""
_TAGS = "\U000e0000-\U000e0fff"
IGNORABLE = _ALWAYS_HIDDEN + _MAY_STAY + _TAGS
"""A regex class body: Unicode's Default_Ignorable_Code_Point characters (DerivedCoreProperties:
format characters, variation selectors, Hangul fillers, the combining grapheme joiner, Khmer's
inherent vowels, tag characters, and the code points reserved for more of them), plus the
interlinear annotation characters U+FFF9-FFFB, which can mark text as an annotation a renderer
leaves out. Fonts draw none of them; `tests/core/hostile` checks the list against
`unicodedata`."""

_INVISIBLE_CHAR = re.compile(f"[{IGNORABLE}]")
_FLAGS = tuple(
    "".join(chr(0xE0000 + ord(char)) for char in name) + "\U000e007f"
    for name in ("gbeng", "gbsct", "gbwls")
)
"""The tag characters of the three subdivision flags Unicode recommends for emoji (England,
Scotland, Wales), cancel tag included: after 🏴, the only use of tag characters in text."""


def _dropped_pattern() -> re.Pattern[str]:
    """One invisible character that goes (see `drop_invisible`), decided by its neighbours.

    Every match starts with one character, consumed first (so the engine skips to candidates
    in C), then judged by lookarounds of bounded width (a run of tag characters is taken
    whole): `re.sub` removes every match without a Python call, in one linear pass.
    """
    visible = f"[^\\x00-\\x9f\\s{IGNORABLE}]"  # a visible non-ASCII character
    flag = "|".join(f"(?<=\U0001f3f4{tags[0]})(?={tags[1:]}(?![{_TAGS}]))" for tags in _FLAGS)
    return re.compile(
        f"[{IGNORABLE}](?:"
        f"(?<=[{_ALWAYS_HIDDEN}])"
        # A joiner goes unless between visible characters (after an emoji's VS16, too).
        f"|(?<=[\u200c\u200d])(?:(?!{visible})|(?<!{visible}.)(?<!{visible}\ufe0f.))"
        # VS15/VS16 go unless right after a visible character, or in a keycap (1️⃣).
        f"|(?<=[\ufe0e\ufe0f])(?<!{visible}.)(?:(?<=\ufe0e)|(?<![0-9#*].)|(?!\u20e3))"
        # A run of tag characters goes whole (matched at its first character), unless it is
        # a subdivision flag's, right after 🏴.
        f"|(?<=[{_TAGS}])(?<![{_TAGS}].)(?!{flag})[{_TAGS}]*"
        ")"
    )


_DROPPED = _dropped_pattern()


def drop_invisible(text: str) -> str:
    """`text` without the characters that render as nothing (`IGNORABLE`), save a few that
    only change how visible characters look.

    Kept, because they carry no text of their own and removing them would break what a
    person sees:

    - one zero-width joiner or non-joiner between two visible non-ASCII characters: Persian
      and Indic spelling (`می‌خواهم`, `क्‍ष`) and emoji ZWJ sequences (👨‍👩‍👧);
    - one variation selector 15 or 16 right after a visible non-ASCII character (❤️, ©️) or
      inside a keycap (1️⃣), and VS16 + ZWJ inside an emoji sequence (🏳️‍🌈);
    - the three emoji subdivision flags (🏴 with the tag characters of gbeng, gbsct, gbwls).

    Everything else goes, because it can hide text a model reads and a person does not: tag
    characters spell ASCII one for one, and a run of variation selectors carries one byte
    each ("emoji smuggling"). Removing glyph variants (VS1-14, the ideographic and Mongolian
    selectors) only changes a glyph's shape; removing bidi controls leaves the characters in
    the order a model reads them anyway; what is kept carries at most one bit per visible
    non-ASCII character. Linear and in C: one search (nothing to do in most texts), then one
    `re.sub` that removes each match without calling back into Python.

    Example:
        `drop_invisible("hi\U000e0053\U000e0059")` -> `"hi"`
    """
    if text.isascii() or _INVISIBLE_CHAR.search(text) is None:
        return text
    return _DROPPED.sub("", text)


# Written by hand beside the generated tables: brackets and bars Unicode does not list as
# confusable with `<`, `>` and `|` but that render alike (`⟨/layer⟩`, `〈/layer〉`, `<∣im_start∣>`),
# and the braille blank, which renders as a space-width nothing.
_EXTRA_LOOKALIKES = {"<": "\u2329\u27e8\u3008", ">": "\u232a\u27e9\u3009", "|": "\u2223\u2502"}
_EXTRA_INVISIBLE = "2800"
_ALL_LOOKALIKES = {
    char: similar + _EXTRA_LOOKALIKES.get(char, "") for char, similar in LOOKALIKES.items()
}

# Tokens that tokenizers parse as special tokens from raw text, after a `<`: Gemma's turn and
# sequence tokens, Llama 2's system markers (`<|...|>` tokens and `<s>` have their own branch).
_TOKENS = ("start_of_turn", "end_of_turn", "eos>", "bos>", "<sys>", "</sys>")
# After a `[` (Mistral's control tokens, optionally closed with `/`), and the turn names of the
# legacy `\n\nHuman:` / `\n\nAssistant:` completion format, after a blank line.
_BRACKETED = (
    "inst",
    "system_prompt",
    "tool_results",
    "tool_calls",
    "tool_content",
    "available_tools",
    "think",
)
_TURNS = ("human:", "assistant:")

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


def _pattern(gap: str, hidden: str, flags: int, guarded: tuple[str, ...]) -> re.Pattern[str]:
    """Where a backslash goes: right after each match.

    A match is the `<` of a guarded closing tag or chat token, the `[` of a bracketed control
    token, or the blank line before a legacy turn name. `gap` may repeat between the `<`, the
    `/` (or `|`) and the name, `hidden` between the letters of a name and after a `|` (a chat
    token has no blank inside: `f <| g` is code). Every repetition is possessive and each piece
    is a small class, so the match at one position never backtracks: the search is linear.
    """

    def spelled(words: tuple[str, ...]) -> str:
        return "|".join(hidden.join(_char_class(char) for char in word) for word in words)

    slash, pipe = _char_class("/", letters=False), _char_class("|", letters=False)
    # `<s>` / `</s>` exactly (a sequence token), not `</span>`: `s`, then `>` after the gap.
    sequence = f"{_char_class('s')}{gap}{_char_class('>', letters=False)}"
    closing = f"{slash}{gap}(?:{spelled(guarded)}|{sequence})"
    return re.compile(
        f"<(?={gap}(?:{closing}|{pipe}{hidden}\\w|{spelled(_TOKENS)}|{sequence}))"
        f"|\\[(?={hidden}{slash}?{hidden}(?:{spelled(_BRACKETED)}){hidden}\\])"
        f"|\n\n(?={spelled(_TURNS)})",
        flags,
    )


_OPENING = re.compile("[" + re.escape("<[" + _ALL_LOOKALIKES["<"]) + "]|\n\n")
"""Where a match can start, searched in the text itself: most texts have none."""


@functools.lru_cache(maxsize=16)
def _patterns(names: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """For ASCII text, a pattern matched on the text itself (`re.IGNORECASE` covers upper
    case); for any other text, one matched on its skeleton (see `_skeleton_table`)."""
    guarded = (*GUARDED_NAMES, *names)
    return (
        _pattern(r"\s*+", "", re.IGNORECASE, guarded),
        _pattern(f"[\\s{_HIDDEN}]*+", f"{_HIDDEN}*+", 0, guarded),
    )


def _with_backslash(match: re.Match[str]) -> str:
    # A function, not the template `\g<0>\\`: `re` would parse a template at every call.
    return match.group() + "\\"


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
    ascii_pattern, skeleton_pattern = _patterns(names)
    if text.isascii():
        if "<" in text or "[" in text or "\n\n" in text:
            return ascii_pattern.sub(_with_backslash, text)
        return text
    text = drop_invisible(text)
    if _OPENING.search(text) is None:
        return text
    skeleton = text.translate(_TABLE)
    parts: list[str] = []
    start = 0
    for found in skeleton_pattern.finditer(skeleton):
        cut = found.end()
        parts.append(text[start:cut])
        parts.append("\\")
        start = cut
    if not parts:
        return text
    parts.append(text[start:])
    # A joiner kept between an opener and a letter now stands after a backslash: gone too, so
    # that a second pass changes nothing.
    return drop_invisible("".join(parts))


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
