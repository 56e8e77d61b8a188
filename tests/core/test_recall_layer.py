"""`Layer(..., recall=True)`: a memory file over its share shows its entries most relevant to
the latest user message and the files touched, in file order, with a marker; the choice
follows the conversation, the index is cached by content, and read-only layers keep priority."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend

from layered_memory import Layer, MemoryMiddleware
from layered_memory.recall import RecallQuery, choose_entries, split_entries
from layered_memory.testing import ScriptedChatModel, tool_call

TOPICS = [f"{a}{b}" for a in ("alpha", "bravo", "delta", "gamma") for b in range(100)]


def lessons(count: int = 400, *, special: int = 200) -> str:
    lines = ["# Lessons learned", ""]
    for number in range(count):
        if number == special:
            lines.append(
                f"- Lesson {number}: the sourdough starter service needs REDIS_TLS=1 before "
                "its nightly migration, or the deploy hangs."
            )
        else:
            lines.append(
                f"- Lesson {number}: when touching the {TOPICS[number]} module, rerun its "
                f"fixtures and check the {TOPICS[number]} changelog."
            )
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "LESSONS.md").write_text(lessons())
    (tmp_path / "AGENTS.md").write_text("Project uses make.\n")
    return tmp_path


def _agent(project: Path, model: ScriptedChatModel, **layer: object) -> object:
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[
            Layer("project", "/AGENTS.md"),
            Layer("lessons", "/LESSONS.md", writable=True, recall=True, **layer),  # type: ignore[arg-type]
        ],
    )
    return create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])


def test_400_lessons_in_4000_chars_show_the_one_asked_about(project: Path) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = _agent(project, model, max_chars=4000)
    agent.invoke(  # type: ignore[attr-defined]
        {"messages": [{"role": "user", "content": "Why does the sourdough deploy hang?"}]}
    )
    prompt = model.system_prompts[0]
    body = prompt.split('path="/LESSONS.md" access="writable">\n', 1)[1].split("\n</layer>")[0]
    assert len(body) <= 4000
    assert "Lesson 200: the sourdough starter service needs REDIS_TLS=1" in body
    shown = [int(n) for n in re.findall(r"- Lesson (\d+):", body)]
    assert shown == sorted(shown)  # file order
    assert 10 < len(shown) < 400
    left_out = 400 - len(shown)
    assert f"{left_out} of 400 entries of /LESSONS.md not shown" in body
    assert "read_file /LESSONS.md to read it whole" in body
    assert "Project uses make." in prompt


def test_the_choice_follows_the_latest_message_and_the_files_touched(project: Path) -> None:
    model = ScriptedChatModel(
        script=[tool_call("read_file", file_path="/src/gamma42/models.py"), "done", "again"]
    )
    (project / "src" / "gamma42").mkdir(parents=True)
    (project / "src" / "gamma42" / "models.py").write_text("x = 1\n")
    agent = _agent(project, model, max_chars=3000)
    agent.invoke({"messages": [{"role": "user", "content": "Fix the bug."}]})  # type: ignore[attr-defined]
    first, after_tool = model.system_prompts[0], model.system_prompts[1]
    assert "Lesson 342:" not in first  # gamma42: not asked about, past the head
    assert "Lesson 342: when touching the gamma42 module" in after_tool


def test_a_file_that_fits_is_shown_whole(tmp_path: Path) -> None:
    (tmp_path / "LESSONS.md").write_text(lessons(5, special=2))
    model = ScriptedChatModel(script=["ok"])
    agent = _agent(tmp_path, model)
    agent.invoke({"messages": [{"role": "user", "content": "hello"}]})  # type: ignore[attr-defined]
    assert lessons(5, special=2).strip() in model.system_prompts[0]
    assert "entries of /LESSONS.md not shown" not in model.system_prompts[0]


def test_the_whole_budget_gives_way_by_entries_not_by_head(project: Path) -> None:
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("lessons", "/LESSONS.md", recall=True)],
        max_chars=6000,
    )
    model = ScriptedChatModel(script=["ok"])
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "sourdough migration hangs"}]})
    prompt = model.system_prompts[0]
    assert "Lesson 200: the sourdough starter service" in prompt
    assert "entries of /LESSONS.md not shown" in prompt


def test_entries_are_list_items_and_sections_and_fences_stay_whole() -> None:
    text = (
        "Intro paragraph\nstill intro\n\n# Build\n- one\n  continued\n- two\n\n"
        "## Notes\nA paragraph.\n\n```\n# not a heading\n```\n"
    )
    entries = split_entries(text)
    assert [(e.text, e.is_heading) for e in entries] == [
        ("Intro paragraph\nstill intro", False),
        ("# Build", True),
        ("- one\n  continued", False),
        ("- two", False),
        ("## Notes", True),
        ("A paragraph.", False),
        ("```\n# not a heading\n```", False),
    ]
    assert entries[2].heading == 1
    assert entries[5].heading == 4


def test_the_marker_always_fits_and_too_small_a_budget_gives_nothing() -> None:
    text = lessons()

    def marker(left: int, total: int) -> str:
        return f"[{left} of {total} left out]"

    for limit in (0, 10, 25, 100, 1000, 5000):
        chosen = choose_entries(text, limit, RecallQuery("sourdough"), marker)
        assert len(chosen) <= limit
    assert choose_entries(text, 10, RecallQuery("x"), marker) == ""
