"""One batched download; every kind of bad file skipped with its path and reason."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.backends.protocol import FileDownloadResponse

from layered_memory.core.loading import (
    MAX_FILE_BYTES,
    adownload_texts,
    decode_content,
    digest_texts,
    download_texts,
    report_problems,
    strip_html_comments,
)
from layered_memory.errors import MemorySourceError


class CountingBackend(FilesystemBackend):
    """A real FilesystemBackend that counts its batched downloads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.download_calls: list[list[str]] = []

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.download_calls.append(list(paths))
        return super().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.download_calls.append(list(paths))
        return super().download_files(paths)


class BrokenBackend(FilesystemBackend):
    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        msg = "connection reset"
        raise ConnectionError(msg)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        msg = "connection reset"
        raise ConnectionError(msg)


class ErrorBackend(FilesystemBackend):
    """Answers every path with one error code (root can read anything, so fake it)."""

    def __init__(self, root: Path, error: str) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.error = error

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return [FileDownloadResponse(path=p, content=None, error=self.error) for p in paths]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "good.md").write_text("hello", encoding="utf-8")
    (tmp_path / "empty.md").write_text("", encoding="utf-8")
    (tmp_path / "comment.md").write_text("<!-- only a note -->\n", encoding="utf-8")
    (tmp_path / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "binary.md").write_bytes(b"\x89PNG\x00\x00data")
    (tmp_path / "folder.md").mkdir()
    (tmp_path / "bom.md").write_bytes("\ufeffbom text".encode())
    return tmp_path


async def _download(backend: Any, paths: list[str], use_async: bool) -> Any:
    if use_async:
        return await adownload_texts(backend, paths)
    return download_texts(backend, paths)


@pytest.mark.parametrize("use_async", [False, True])
async def test_all_files_in_one_call_and_bad_ones_named(tree: Path, use_async: bool) -> None:
    backend = CountingBackend(tree)
    paths = [
        "/good.md",
        "/missing.md",
        "/empty.md",
        "/comment.md",
        "/latin1.md",
        "/binary.md",
        "/folder.md",
        "/../escape.md",
        "/bom.md",
    ]
    result = await _download(backend, paths, use_async)
    assert len(backend.download_calls) == 1
    assert "/../escape.md" not in backend.download_calls[0]  # refused before any I/O
    assert result.texts == {
        "/good.md": "hello",
        "/empty.md": "",
        "/comment.md": "<!-- only a note -->\n",
        "/bom.md": "bom text",
    }
    assert result.missing == {"/missing.md"}
    reasons = {problem.path: problem.reason for problem in result.problems}
    assert reasons == {
        "/latin1.md": "not valid UTF-8 (byte 3)",
        "/binary.md": "binary file (contains NUL bytes)",
        "/folder.md": "is a directory",
        "/../escape.md": "path escapes the backend root " + str(tree),
    }


@pytest.mark.parametrize("use_async", [False, True])
async def test_backend_failure_becomes_a_problem_per_file(tmp_path: Path, use_async: bool) -> None:
    result = await _download(BrokenBackend(root_dir=tmp_path), ["/a.md", "/b.md"], use_async)
    assert result.texts == {}
    assert [p.path for p in result.problems] == ["/a.md", "/b.md"]
    assert all("ConnectionError: connection reset" in p.reason for p in result.problems)


def test_backend_error_codes_are_named(tmp_path: Path) -> None:
    result = download_texts(ErrorBackend(tmp_path, "permission_denied"), ["/a.md"])
    assert [(p.path, p.reason) for p in result.problems] == [("/a.md", "permission denied")]
    result = download_texts(ErrorBackend(tmp_path, "quota exceeded"), ["/a.md"])
    assert result.problems[0].reason == "backend error: quota exceeded"


def test_huge_file_is_refused_with_its_size() -> None:
    text, reason = decode_content(b"a" * (MAX_FILE_BYTES + 1))
    assert text is None
    assert "larger than 8 MB" in (reason or "")


def test_problems_are_logged_once_then_quietly(caplog: pytest.LogCaptureFixture) -> None:
    from layered_memory.core.loading import SourceProblem

    seen: set[tuple[str, str]] = set()
    problem = SourceProblem("/x.md", "is a directory")
    with caplog.at_level(logging.DEBUG, logger="layered_memory.core.loading"):
        report_problems([problem], strict=False, already_logged=seen)
        report_problems([problem], strict=False, already_logged=seen)
    levels = [record.levelno for record in caplog.records]
    assert levels == [logging.WARNING, logging.DEBUG]
    assert "/x.md" in caplog.records[0].getMessage()
    assert "is a directory" in caplog.records[0].getMessage()


def test_strict_mode_raises_naming_path_and_reason() -> None:
    from layered_memory.core.loading import SourceProblem

    with pytest.raises(MemorySourceError) as info:
        report_problems([SourceProblem("/x.md", "binary file")], strict=True, already_logged=set())
    assert info.value.path == "/x.md"
    assert "binary file" in str(info.value)


def test_html_comments_are_stripped_and_digest_tracks_changes() -> None:
    assert strip_html_comments("a<!-- x\ny -->b") == "ab"
    assert digest_texts({"a": "1"}) == digest_texts({"a": "1"})
    assert digest_texts({"a": "1"}) != digest_texts({"a": "2"})
    assert digest_texts({"a": "1"}, None) != digest_texts({"a": "1"}, "s")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # A file whose text holds the separators of a plain concatenation, against two files.
        (({"/a": "x\x02/b\x03y"},), ({"/a": "x", "/b": "y"},)),
        (({"/a": "x"}, "y"), ({"/a": "xy"}, None)),
        (("ab", "c"), ("a", "bc")),
        ((None,), ("",)),
        (({"/a": "1"}, {}), ({}, {"/a": "1"})),
    ],
)
def test_different_contents_never_share_a_digest(
    before: tuple[Any, ...], after: tuple[Any, ...]
) -> None:
    assert digest_texts(*before) != digest_texts(*after)


def test_a_memory_file_shaped_like_two_files_is_rendered_afresh(tmp_path: Path) -> None:
    from layered_memory import Layer, MemoryAssembler

    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("a", "/a.md"), Layer("b", "/b.md")],
    )
    first = assembler.render_parts({"/a.md": "x\x02/b.md\x03y"}, {}, None, ())
    second = assembler.render_parts({"/a.md": "x", "/b.md": "y"}, {}, None, ())
    assert "/b.md" in second
    assert second != first


def test_path_plans_are_remembered_per_backend_root(tmp_path: Path) -> None:
    from layered_memory.core.loading import plan_paths

    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    paths = ["/AGENTS.md", "/../escape.md"]
    for root in (one, two, one):
        plan, problems = plan_paths(paths, FilesystemBackend(root_dir=root, virtual_mode=True))
        assert plan == {"/AGENTS.md": "/AGENTS.md"}
        assert [problem.path for problem in problems] == ["/../escape.md"]
        assert str(root) in problems[0].reason
        plan["/changed"] = "/changed"  # the caller's copy: the remembered plan stays as it was


def test_a_home_path_is_planned_against_the_home_of_the_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from layered_memory.core.loading import plan_paths

    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    planned = []
    for home in ("home-one", "home-two"):
        monkeypatch.setenv("HOME", str(tmp_path / home))
        plan, problems = plan_paths(["~/AGENTS.md"], backend)
        assert not problems
        planned.append(plan)
    assert planned == [
        {"~/AGENTS.md": "/home-one/AGENTS.md"},
        {"~/AGENTS.md": "/home-two/AGENTS.md"},
    ]


def test_symlink_out_of_a_virtual_root_is_refused_per_file(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    (root / "AGENTS.md").write_text("fine")
    result = download_texts(
        FilesystemBackend(root_dir=root, virtual_mode=True), ["/link/secret.md", "/AGENTS.md"]
    )
    assert result.texts == {"/AGENTS.md": "fine"}
    assert [p.path for p in result.problems] == ["/link/secret.md"]
    assert result.problems[0].reason.startswith("invalid path (outside the backend root")


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_file_too_large_is_never_read(tmp_path: Path, use_async: bool) -> None:
    """A sparse file past the limit: one stat says so; reading it put the whole file in memory
    at every load (2 GB in a rule folder: 2 GB of memory per load)."""
    (tmp_path / "AGENTS.md").write_text("small")
    with (tmp_path / "huge.md").open("wb") as huge:
        huge.truncate(MAX_FILE_BYTES + 1)
    backend = CountingBackend(tmp_path)
    paths = ["/AGENTS.md", "/huge.md"]
    result = await adownload_texts(backend, paths) if use_async else download_texts(backend, paths)
    assert result.texts == {"/AGENTS.md": "small"}
    (problem,) = result.problems
    assert (problem.path, problem.unreadable) == ("/huge.md", True)
    assert problem.reason == f"larger than 8 MB ({MAX_FILE_BYTES + 1} bytes)"
    assert backend.download_calls == [["/AGENTS.md"]]
