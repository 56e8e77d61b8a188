"""`@path` references in memory files: what counts, where, and in linear time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from layered_memory.core.imports import MAX_IMPORTS_PER_FILE, find_imports, resolve_reference
from layered_memory.core.nested import candidates, directories_of


def refs(text: str) -> list[str]:
    return [reference.raw for reference in find_imports(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See @README.md and @docs/git.md.", ["README.md", "docs/git.md"]),
        ("@~/.claude/mine.md first", ["~/.claude/mine.md"]),
        ("Absolute: @/org/AGENTS.md", ["/org/AGENTS.md"]),
        ("Relative: @../shared/style.md, @./local.md;", ["../shared/style.md", "./local.md"]),
        ("Mail me at ada@example.com", []),
        ("Ping @alice about it", []),
        ("Inline `@docs/a.md` is code", []),
        ("Double ``code @x/y.md`` too", []),
        ("Unclosed ` tick then @real/file.md", ["real/file.md"]),
        ("(@paren/x.md)", []),
        ("@@twice/x.md", []),
        ("- @list/item.md", ["list/item.md"]),
    ],
)
def test_what_counts_as_an_import(text: str, expected: list[str]) -> None:
    assert refs(text) == expected


def test_fenced_blocks_are_code() -> None:
    """CommonMark fences: a longer fence of the same character closes a block, another
    character does not."""
    text = "\n".join(
        [
            "@before.md",
            "```python",
            "@decorator/x.md",
            "````",
            "@between.md",
            "~~~",
            "@tilde/fence.md",
            "```",
            "~~~",
            "@after.md",
            "```",
            "@unclosed/fence.md",
        ]
    )
    assert refs(text) == ["before.md", "between.md", "after.md"]
    assert [reference.line for reference in find_imports(text)] == [1, 5, 10]


def test_only_file_like_missing_references_are_worth_a_warning() -> None:
    found = {
        reference.raw: reference.names_a_file
        for reference in find_imports("@pytest.fixture @notes.md @dir/thing @~/x.v1")
    }
    assert found == {"pytest.fixture": False, "notes.md": True, "dir/thing": True, "~/x.v1": True}


def test_a_file_gives_at_most_so_many_references() -> None:
    assert len(find_imports("@x/y.md " * 10_000)) == MAX_IMPORTS_PER_FILE


@pytest.mark.parametrize(
    ("raw", "importer", "expected"),
    [
        ("style.md", "/team/AGENTS.md", "/team/style.md"),
        ("../org.md", "/team/sub/AGENTS.md", "/team/org.md"),
        ("/abs.md", "/team/AGENTS.md", "/abs.md"),
        ("~/home.md", "/team/AGENTS.md", "~/home.md"),
        ("x.md", "AGENTS.md", "x.md"),
    ],
)
def test_references_resolve_against_the_importing_file(
    raw: str, importer: str, expected: str
) -> None:
    assert resolve_reference(raw, importer) == expected


def test_nested_directories_from_root_down() -> None:
    assert directories_of(["/a/b/c.py", "/a/d.md", "/z.txt"]) == ["/", "/a", "/a/b"]
    assert directories_of(["/srv/p/src/x.py", "/etc/passwd"], root="/srv/p") == [
        "/srv/p",
        "/srv/p/src",
    ]
    assert directories_of(["/bad\x00.py", ""]) == []
    # Relative paths are read from the backend's root, as deepagents reads them.
    assert directories_of(["sub/x.py"]) == ["/", "/sub"]
    assert directories_of(["src/x.py"], root="/srv/p") == ["/srv/p", "/srv/p/src"]
    # A leading `//` (which POSIX normpath keeps) is folded like any repeated slash.
    assert directories_of(["//src/x.py", "///a//b/c.py"]) == ["/", "/a", "/src", "/a/b"]
    found = candidates(["/", "/a"], ["AGENTS.md", "CLAUDE.md"])
    assert found == {"/": ["/AGENTS.md", "/CLAUDE.md"], "/a": ["/a/AGENTS.md", "/a/CLAUDE.md"]}


def test_scanning_hostile_text_is_linear() -> None:
    """Backtick runs, `@` storms and unclosed fences, megabytes of them, in a subprocess."""
    code = (
        "from layered_memory.core.loading import find_imports\n"
        "texts = ['`' * 200_000 + '@a/b.md', ('`x ' * 300_000), '@' * 1_000_000,"
        " '```\\n' + '@x/y.md\\n' * 200_000, ('a `b ' * 200_000) + '@c/d.md']\n"
        "for text in texts:\n    find_imports(text)\nprint('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr
