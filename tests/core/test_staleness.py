"""Lessons that cite what they are about: a cited span that changed, moved or vanished is
marked stale in the prompt; read-only memory is shown as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import HumanMessage, SystemMessage

from layered_memory import Layer, MemoryMiddleware
from layered_memory.core.staleness import Cite, cite_comment, mark_stale, parse_cite
from layered_memory.testing import ScriptedChatModel

APP = "def retry():\n    return 3\n\ndef other():\n    pass\n"
DAY = "2026-12-07"


def _entry(
    cites: list[Cite], texts: dict[str, str | None], text: str = "retries are capped at 3"
) -> str:
    return f"- {text} {cite_comment(cites, texts, DAY)}"


def test_an_unchanged_span_is_not_marked() -> None:
    line = _entry([Cite("/src/app.py", 1, 2)], {"/src/app.py": APP})
    assert mark_stale(line, {"/src/app.py": APP}) == (line, [])


def test_a_change_outside_the_span_is_not_marked() -> None:
    line = _entry([Cite("/src/app.py", 1, 2)], {"/src/app.py": APP})
    changed = APP.replace("pass", "return None")
    assert mark_stale(line, {"/src/app.py": changed})[1] == []


@pytest.mark.parametrize(
    ("current", "reason"),
    [
        (APP.replace("return 3", "return 5"), "/src/app.py lines 1-2 changed"),
        (None, "/src/app.py moved or was deleted"),
        ("", "/src/app.py lines 1-2 no longer exist (the file is shorter)"),
    ],
)
def test_a_changed_moved_or_shortened_span_is_marked(current: str | None, reason: str) -> None:
    line = _entry([Cite("/src/app.py", 1, 2)], {"/src/app.py": APP})
    texts = {} if current is None else {"/src/app.py": current}
    marked, markers = mark_stale(line, texts)
    assert markers == [f"[stale: {reason} since {DAY}; check it before relying on this]"]
    # The marker is shown before the comment, which the loader strips from the prompt.
    assert marked.startswith(f"- retries are capped at 3 {markers[0]} <!-- cites=")


def test_a_whole_file_cite_and_a_learned_entry_comment() -> None:
    digest = cite_comment([Cite("/README.md")], {"/README.md": "hello"}, DAY).split("@")[1][:12]
    line = f"- say hello <!-- learned id=k3f9 date={DAY} cites=/README.md@{digest} -->"
    assert mark_stale(line, {"/README.md": "hello"})[1] == []
    assert mark_stale(line, {"/README.md": "bye"})[1] == [
        f"[stale: /README.md changed since {DAY}; check it before relying on this]"
    ]


@pytest.mark.parametrize("spec", ["", "a b", "/x#L0-3", "/x#L5-2", "/x#Lx"])
def test_a_malformed_cite_is_refused_with_the_form_to_use(spec: str) -> None:
    with pytest.raises(ValueError, match="cite"):
        parse_cite(spec)


def test_parse_cite() -> None:
    assert parse_cite("/src/app.py#L10-24") == Cite("/src/app.py", 10, 24)
    assert parse_cite("/src/app.py#L7") == Cite("/src/app.py", 7, 7)
    assert parse_cite("/src/app.py") == Cite("/src/app.py")


def test_a_hostile_line_is_read_in_linear_time() -> None:
    line = "- x <!-- " + "cites=" * 200_000 + " " + "/a#L1-1@" * 50_000 + " -->"
    assert mark_stale(line, {})[1] == []  # nothing well-formed: nothing marked, no hang


# -- end to end: the prompt of the next run ----------------------------------------------------


def _system_prompt(mw: Any) -> str:
    state = dict(mw.before_agent({"messages": []}, _Runtime()) or {})
    request = ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=[HumanMessage("hi")],
        system_message=SystemMessage("base"),
        state=state,  # type: ignore[arg-type]
        runtime=_Runtime(),  # type: ignore[arg-type]
    )
    sent = mw.wrap_model_call(request, lambda r: r)
    return str(sent.system_message.content_blocks[-1]["text"])


@pytest.mark.parametrize("use_async", [False, True])
def test_the_next_run_sees_a_stale_lesson_marked(tmp_path: Path, use_async: bool) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(APP)
    cite = [Cite("/src/app.py", 1, 2)]
    entry = _entry(cite, {"/src/app.py": APP})
    (tmp_path / "MEMORY.md").write_text(f"# Notes\n{entry}\n- the user likes tea\n")
    (tmp_path / "AGENTS.md").write_text(f"{entry}\n")
    mw = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
    )
    if use_async:
        import asyncio

        assert "[stale" not in str(asyncio.run(mw.abefore_agent({"messages": []}, _Runtime())))
    assert "[stale" not in _system_prompt(mw)
    (tmp_path / "src" / "app.py").write_text(APP.replace("return 3", "return 5"))
    if use_async:
        import asyncio

        update = asyncio.run(mw.abefore_agent({"messages": []}, _Runtime())) or {}
        assert "[stale: /src/app.py lines 1-2 changed" in update["memory_contents"]["/MEMORY.md"]
    prompt = _system_prompt(mw)
    marker = f"[stale: /src/app.py lines 1-2 changed since {DAY}; check it before relying on this]"
    assert f"- retries are capped at 3 {marker}" in prompt
    assert prompt.count("[stale") == 1  # read-only memory (AGENTS.md) is shown as written
    assert "cites=" not in prompt  # the comment never reaches the model
    (tmp_path / "src" / "app.py").unlink()
    assert "/src/app.py moved or was deleted" in _system_prompt(mw)


class _Runtime:
    context = None

    def stream_writer(self, _chunk: Any) -> None:
        return None


@pytest.mark.parametrize("use_async", [False, True])
def test_an_insight_written_with_cites_goes_stale_when_its_span_changes(
    tmp_path: Path, use_async: bool
) -> None:
    import asyncio
    import datetime as dt

    from layered_memory import MemoryWriter

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(APP)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=lambda: dt.date(2026, 12, 7))
    cites = ["/src/app.py#L1-2"]
    if use_async:
        assert asyncio.run(writer.aadd_insight("retries are capped at 3", cites=cites))
    else:
        assert writer.add_insight("retries are capped at 3", cites=cites)
    assert "cites=/src/app.py#L1-2@" in (tmp_path / "MEMORY.md").read_text()
    mw = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    assert "[stale" not in _system_prompt(mw)
    (tmp_path / "src" / "app.py").write_text(APP.replace("return 3", "return 4"))
    assert "[stale: /src/app.py lines 1-2 changed since 2026-12-07" in _system_prompt(mw)


def test_a_bad_cite_writes_nothing(tmp_path: Path) -> None:
    from layered_memory import MemoryWriter

    writer = MemoryWriter(FilesystemBackend(root_dir=tmp_path, virtual_mode=True), "/MEMORY.md")
    with pytest.raises(ValueError, match="cite"):
        writer.add_insight("x", cites=["/a b"])
    with pytest.raises(ValueError, match="cite"):
        writer.add_insight("x", cites=["/x-->visible"])
    assert not (tmp_path / "MEMORY.md").exists()


def test_doctor_lists_stale_lessons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from layered_memory.cli import main

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(APP)
    entry = _entry([Cite("/src/app.py", 1, 2)], {"/src/app.py": APP})
    (tmp_path / "MEMORY.md").write_text(f"{entry}\n")
    args = ["doctor", "--root", str(tmp_path), "--layer", "notes=/MEMORY.md:rw", "--json"]
    main(args)
    assert "stale-lesson" not in capsys.readouterr().out
    (tmp_path / "src" / "app.py").unlink()
    main(args)
    data = json.loads(capsys.readouterr().out)
    [finding] = [f for f in data["findings"] if f["check"] == "stale-lesson"]
    assert finding["path"] == "/MEMORY.md"
    assert "/src/app.py moved or was deleted" in finding["message"]
