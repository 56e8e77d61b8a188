"""The rule glob dialect is wcmatch's (what deepagents' `glob` tool speaks), matched linearly.

wcmatch itself is the oracle: on every pattern both accept, our matcher and
`wcmatch.glob.globmatch(..., GLOBSTAR | BRACE | DOTGLOB)` give the same verdict on normalized
keys, apart from the differences the `_glob` module docstring lists (tested one by one below).
That the matcher never backtracks is tested on long keys in a child process
(`test_hostile_inputs.py`).
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from wcmatch import glob as wcglob
from wcmatch import posix

from layered_memory.errors import GlobError, LayeredMemoryError
from layered_memory.rules import build_rule_set, compile_glob, parse_rule_file

FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.CASE


def ours(glob: str, key: str, *, ignore_case: bool = False) -> bool:
    return any(part.regex.fullmatch(key) for part in compile_glob(glob, ignore_case=ignore_case))


def theirs(glob: str, key: str, *, ignore_case: bool = False) -> bool:
    flags = FLAGS & ~wcglob.CASE | wcglob.IGNORECASE if ignore_case else FLAGS
    return bool(wcglob.globmatch(key, glob, flags=flags))


_SEGMENT_ATOMS = [
    *("a", "b", "ab", ".b", "*", "?", "[ab]", "[!a]", "[a-c]", "[[:alpha:]]", "[![:lower:]]"),
    *("\\*", "{a,b}", "{x,.a}", "{1..3}"),
]


@st.composite
def segments(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(st.sampled_from(_SEGMENT_ATOMS), min_size=1, max_size=4)))


@st.composite
def globs(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(segments(), st.just("**")), min_size=1, max_size=5))
    return "/".join(parts)


keys = st.lists(
    st.text(alphabet="ab.x*cA2", min_size=1, max_size=4).filter(lambda s: s not in (".", "..")),
    min_size=1,
    max_size=6,
).map("/".join)


@settings(max_examples=250, deadline=None)
@given(globs(), st.lists(keys, min_size=1, max_size=8))
def test_same_verdicts_as_wcmatch(glob: str, tried: list[str]) -> None:
    try:
        compile_glob(glob)
    except GlobError:
        assume(False)  # too many brace expansions: refused (tested below)
    for key in tried:
        assert ours(glob, key) == theirs(glob, key), (glob, key)


@settings(max_examples=250, deadline=None)
@given(globs(), st.lists(keys.map("/".__add__), min_size=1, max_size=8))
def test_same_verdicts_as_wcmatch_on_absolute_keys(glob: str, tried: list[str]) -> None:
    # An absolute key's first segment is empty: `*/x` must not match `/x`, `**/x` must.
    try:
        compile_glob(glob)
    except GlobError:
        assume(False)
    for key in tried:
        assert ours(glob, key) == theirs(glob, key), (glob, key)


@settings(max_examples=150, deadline=None)
@given(globs(), st.lists(keys, min_size=1, max_size=8))
def test_same_verdicts_as_wcmatch_ignoring_case(glob: str, tried: list[str]) -> None:
    try:
        compile_glob(glob, ignore_case=True)
    except GlobError:
        assume(False)
    for key in tried:
        assert ours(glob, key, ignore_case=True) == theirs(glob, key, ignore_case=True), (
            glob,
            key,
        )


@pytest.mark.parametrize(("glob", "key"), [("docs/", "docs/a/b.md"), ("src/**/", "src/a.py")])
def test_a_trailing_slash_means_everything_below(glob: str, key: str) -> None:
    # The one difference in what matches: to wcmatch a trailing `/` matches folders only.
    assert ours(glob, key)
    assert not theirs(glob, key)


def test_posix_classes_come_from_wcmatch() -> None:
    assert posix.get_posix_property("alpha", False) == "A-Za-z"
    assert ours("[[:digit:]]x", "5x")
    assert not ours("[![:digit:]]x", "5x")


@pytest.mark.parametrize(
    ("glob", "reason"),
    [
        ("src/[ab", "unclosed '['"),
        ("a{b,c", "unbalanced '{'"),
        ("a}", "unbalanced '}'"),
        ("!x", "negated patterns ('!...') are not supported"),
        ("a/../b", "'..' segments never match (keys are normalized paths)"),
        ("{a,b}" * 9, "brace expansion gives more than 256 patterns"),
        ("{" * 9 + "a" + "}" * 9, "braces nested deeper than 8 levels"),
        ("{1..300}", "brace expansion gives more than 256 patterns"),
        ("a" * 1025, "longer than 1024 characters"),
    ],
)
def test_refused_where_wcmatch_would_read_a_typo_literally(glob: str, reason: str) -> None:
    with pytest.raises(GlobError) as caught:
        compile_glob(glob)
    assert str(caught.value) == reason
    assert caught.value.pattern == glob[:1024]
    assert isinstance(caught.value, LayeredMemoryError)
    assert isinstance(caught.value, ValueError)


def test_ranges_expand_as_in_the_glob_tool() -> None:
    assert [part.pattern for part in compile_glob("log{1..3}.txt")] == [
        "log1.txt",
        "log2.txt",
        "log3.txt",
    ]
    assert ours("v{1..3}/*.md", "v2/a.md")
    assert theirs("v{1..3}/*.md", "v2/a.md")


@pytest.mark.parametrize(
    ("glob", "key"),
    [
        ("docs/caf\u00e9/**", "docs/cafe\u0301/menu.md"),
        ("docs/cafe\u0301/**", "docs/caf\u00e9/menu.md"),
    ],
)
def test_compared_in_nfc(glob: str, key: str) -> None:
    rule, _ = parse_rule_file("/r/x.md", f"---\npaths: ['{glob}']\n---\nB", folder_index=0)
    assert rule is not None
    assert build_rule_set([(rule, [])]).match([key]).applied == (rule,)


def test_a_key_longer_than_any_path_is_ignored_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rule, _ = parse_rule_file("/r/x.md", "---\npaths: ['**']\n---\nB", folder_index=0)
    rule_set = build_rule_set([(rule, [])])
    huge = "a/" * 5000
    with caplog.at_level(logging.WARNING):
        assert rule_set.match([huge]).applied == ()
        assert rule_set.match([huge + "b", "src/x.py"]).applied == (rule,)
    warnings = [r for r in caplog.records if "match key" in r.getMessage()]
    assert len(warnings) == 1
    assert "10000 characters" in warnings[0].getMessage()
