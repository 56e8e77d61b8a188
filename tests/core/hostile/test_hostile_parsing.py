"""The linear parsers and the path checks, one function at a time (properties against the old,
slow forms where they existed). The hostile inputs themselves run in `test_hostile_inputs.py`."""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
from pathlib import Path

import pytest
import yaml
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend
from hypothesis import given, settings
from hypothesis import strategies as st

from layered_memory.core.disk_cache import non_regular_files, special_file_kind
from layered_memory.core.layers import Layer, normalize_backend_path
from layered_memory.core.loading import strip_html_comments
from layered_memory.core.render import cap_lines
from layered_memory.core.validation import invalid_path_reason
from layered_memory.rules._frontmatter import MAX_FRONTMATTER_DEPTH, flow_too_deep, too_deep
from layered_memory.writeback.sections import Insight, find_section, plan_insight, split_lines

_OLD_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="<!->a\n", max_size=60))
def test_comment_stripper_gives_what_the_regex_gave(text: str) -> None:
    assert strip_html_comments(text) == _OLD_COMMENT.sub("", text)


def _old_cap_lines(text: str, max_lines: int, path: str) -> str:
    lines = text.split("\n")
    if len(lines) <= max_lines:
        return text
    cut = len(lines) - max_lines
    kept = "\n".join(lines[:max_lines])
    return (
        f"{kept}\n[... {cut} more lines of {path} not shown (first {max_lines} lines kept); "
        f"read_file {path} for the rest]"
    )


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab\n", max_size=40), st.integers(1, 8))
def test_line_cap_gives_what_splitting_gave(text: str, max_lines: int) -> None:
    assert cap_lines(text, max_lines, "/M.md") == _old_cap_lines(text, max_lines, "/M.md")


_STARTS = (
    yaml.BlockSequenceStartToken,
    yaml.BlockMappingStartToken,
    yaml.FlowSequenceStartToken,
    yaml.FlowMappingStartToken,
)
_ENDS = (yaml.BlockEndToken, yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)


def _token_depth(text: str) -> int:
    depth = deepest = 0
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, _STARTS):
            depth += 1
        elif isinstance(token, _ENDS):
            depth -= 1
        deepest = max(deepest, depth)
    return deepest


@pytest.mark.parametrize(
    "frontmatter",
    [
        "paths: ['**/*.{ts,tsx}', \"src/[ab]*\"]\nalwaysApply: false",
        "globs: *.ts, {a,b}/**\ndescription: 'uses [x] and {y}: [[[[[[[[[[[[[[[[[['",
        'description: "a \\" [[[[[[[[[[[[[[[[[[[["\n# [[[[[[[[[[[[[[[[[[[[ a comment\npaths: a',
        "description: arrays like a[0][1][2][3][4][5][6][7][8][9][10][11][12][13][14][15][16]",
        "paths:\n  - a\n  - b\nmeta: {x: [1, {y: [2]}]}",
    ],
)
def test_ordinary_frontmatter_is_never_called_too_deep(frontmatter: str) -> None:
    assert not too_deep(frontmatter)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[]{}ab,: -\n'\"#", max_size=60))
def test_the_quick_bracket_scan_only_flags_what_is_really_deep(text: str) -> None:
    if not flow_too_deep(text):
        return
    try:
        depth = _token_depth(text)
    except yaml.YAMLError:
        return  # the parser refuses it anyway
    assert depth > MAX_FRONTMATTER_DEPTH - 1, text


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/a\x00b", "contains a NUL byte"),
        ("/\ud800", "contains a character the file system cannot encode (a lone surrogate)"),
        ("/" + "a" * 4096, "longer than 4096 characters"),
        ("/caf\u00e9/\udcff", None),  # surrogateescape: a byte the file system gave us
        ("/ok.md", None),
    ],
)
def test_paths_no_file_can_have(path: str, reason: str | None, tmp_path: Path) -> None:
    assert invalid_path_reason(path) == reason
    for backend in (
        FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        FilesystemBackend(root_dir=tmp_path, virtual_mode=False),
        StateBackend(),
    ):
        normalized, why = normalize_backend_path(path, backend)
        if reason is None:
            assert normalized is not None
        else:
            assert (normalized, why) == (None, f"invalid path: {reason}")
    if reason is not None:
        with pytest.raises(ValueError, match=re.escape(reason)):
            Layer("x", path)


def test_special_files_are_named_without_being_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.md")
    (tmp_path / "plain.md").write_text("x")
    (tmp_path / "dir").mkdir()
    os.symlink("/dev/null", tmp_path / "null.md")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "sock.md"))
        assert special_file_kind(str(tmp_path / "fifo.md")) == "a FIFO"
        assert special_file_kind(str(tmp_path / "sock.md")) == "a socket"
        assert special_file_kind(str(tmp_path / "null.md")) == "a character device"
        for ordinary in ("plain.md", "dir", "missing.md"):
            assert special_file_kind(str(tmp_path / ordinary)) is None
        paths = ["/fifo.md", "/plain.md", "/sock.md", "/dir", "/missing.md", "/null.md"]
        virtual = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
        assert non_regular_files(virtual, paths) == {
            "/fifo.md": "a FIFO",
            "/sock.md": "a socket",
            "/null.md": "a character device",
        }
        composite = CompositeBackend(default=StateBackend(), routes={"/m/": virtual})
        assert non_regular_files(composite, ["/m/fifo.md", "/fifo.md", "/m/plain.md"]) == {
            "/m/fifo.md": "a FIFO"
        }
        host = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
        assert non_regular_files(host, [str(tmp_path / "fifo.md")]) == {
            str(tmp_path / "fifo.md"): "a FIFO"
        }
        assert non_regular_files(StateBackend(), ["/fifo.md"]) == {}


def test_write_back_never_puts_the_section_inside_an_open_fence() -> None:
    memory = "# Notes\n\n## Setup\n```\ncode\n## Recent Insights\n- 2020-01-01: old\n"
    insight = Insight(dt.date(2024, 5, 1), None, "fact")
    plan = plan_insight(memory, None, insight, max_insights=50, source_name="MEMORY.md")
    assert plan is not None
    # Everything kept; the new section outside the fence, where the prompt shows it.
    assert plan.memory == (
        "# Notes\n\n## Recent Insights\n\n- 2024-05-01: fact\n\n"
        "## Setup\n```\ncode\n## Recent Insights\n- 2020-01-01: old\n"
    )
    lines = split_lines(plan.memory)
    assert find_section(lines, "## Recent Insights") == (2, 6)


def test_write_back_with_a_fence_open_from_the_top_goes_first() -> None:
    memory = "```\n# Notes\n## Recent Insights\n"
    insight = Insight(dt.date(2024, 5, 1), "acme", "fact")
    plan = plan_insight(memory, None, insight, max_insights=50, source_name="MEMORY.md")
    assert plan is not None
    assert plan.memory == f"## Recent Insights\n\n- 2024-05-01: [acme] fact\n\n{memory}"
