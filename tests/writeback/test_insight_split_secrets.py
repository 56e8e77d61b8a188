"""A secret written over two lines is redacted from the one line the write-back stores.

The insight is stored as one line: its line breaks (and U+2028, `\\x1c`...) become spaces, which
can complete a secret neither line showed. Each case here leaked before: the stored line held
the value in clear.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from layered_memory import (
    HookEvent,
    HookRegistry,
    InsightNotebook,
    MemoryWriter,
    record_insight_tool,
    redact,
    register_write_back,
)
from layered_memory.safety.redaction import find_secrets
from layered_memory.testing import ScriptedChatModel, tool_call

# Values built in pieces so secret scanners do not flag this file.
PASSWORD = "Xk9m" + "Q2pL7vTz"
URL_PASSWORD = "Wq8z" + "R4tY6uI0"
AWS_KEY_ID = "AKIA" + "IOSFODNN7QXBMPLF"

SPLIT = {
    "assignment_value_on_the_next_line": (f"staging DB PASSWORD=\n{PASSWORD}", PASSWORD),
    "url_password_on_the_next_line": (
        f"prod postgres://admin:\n{URL_PASSWORD}@db.acme.io/app",
        URL_PASSWORD,
    ),
    "indented_value_under_its_name": (f"db password:\n  {PASSWORD}", PASSWORD),
    "prose_then_a_key_on_the_next_line": (f"the api key is\n{AWS_KEY_ID}", AWS_KEY_ID),
    "line_separator": (f"PASSWORD\u2028={PASSWORD}", PASSWORD),
    "file_separator_control": (f"PASSWORD\x1c={PASSWORD}", PASSWORD),
}


def writer_in(tmp_path: Path) -> MemoryWriter:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    return MemoryWriter(backend, "/MEMORY.md", clock=lambda: dt.date(2025, 3, 14))


def stored_line(tmp_path: Path) -> str:
    [line] = [
        line for line in (tmp_path / "MEMORY.md").read_text().splitlines() if line[:2] == "- "
    ]
    return line


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("case", sorted(SPLIT))
async def test_a_secret_split_over_two_lines_is_redacted_from_the_stored_line(
    tmp_path: Path, case: str, use_async: bool
) -> None:
    text, secret = SPLIT[case]
    writer = writer_in(tmp_path)
    if use_async:
        await writer.aadd_insight(text, entity="acme")
    else:
        writer.add_insight(text, entity="acme")

    line = stored_line(tmp_path)
    assert secret not in line
    assert "[REDACTED:" in line
    assert find_secrets(line) == []  # the stored line itself holds nothing left to redact


@pytest.mark.parametrize("case", sorted(SPLIT))
def test_a_secret_split_over_two_lines_of_the_entity_is_redacted(tmp_path: Path, case: str) -> None:
    text, secret = SPLIT[case]
    writer_in(tmp_path).add_insight("a lesson", entity=text)

    line = stored_line(tmp_path)
    assert secret not in line
    assert line.startswith("- 2025-03-14: [")
    assert line.endswith("] a lesson")  # the entity's marker has no brackets to break the line


def test_the_handler_reports_the_kinds_found_once_the_lines_are_joined(tmp_path: Path) -> None:
    """The reviewer's run: notes recorded with `record_insight`, written at the run's end."""
    notebook = InsightNotebook()
    registry = HookRegistry()
    register_write_back(registry, writer_in(tmp_path), notebook=notebook)
    written: list[Any] = []
    registry.register(HookEvent.MEMORY_WRITTEN, lambda e, d: written.append(d), name="spy")
    model = ScriptedChatModel(
        script=[
            tool_call("record_insight", note=f"staging DB PASSWORD=\n{PASSWORD}"),
            tool_call(
                "record_insight", note=f"prod postgres://admin:\n{URL_PASSWORD}@db.acme.io/app"
            ),
            "Done.",
        ]
    )
    agent = create_agent(model, tools=[record_insight_tool(notebook)])
    config: Any = {"configurable": {"thread_id": "t1", "entity_name": "acme"}}
    final = agent.invoke({"messages": [HumanMessage("go")]}, config)

    registry.trigger(HookEvent.PIPELINE_END, {**final, "config": config, "thread_id": "t1"})

    memory = (tmp_path / "MEMORY.md").read_text()
    assert PASSWORD not in memory
    assert URL_PASSWORD not in memory
    assert written[0]["redacted"] == ["password", "url_credentials"]
    assert written[0]["text"] in memory


def test_a_url_password_after_a_line_break_is_found_by_redact_itself() -> None:
    text = f"prod postgres://admin:\r\n   {URL_PASSWORD}@db.acme.io/app"
    assert redact(text) == (
        "prod postgres://admin:\r\n   [REDACTED:url_credentials]@db.acme.io/app",
        ["url_credentials"],
    )
    # A URL ending a line with a port-like `:` and prose below it is no password.
    lookalike = "see https://example.com:\n  then the next step@home"
    assert redact(lookalike) == (lookalike, [])


def test_a_split_secret_straddling_the_cut_leaves_no_piece_behind(tmp_path: Path) -> None:
    writer = writer_in(tmp_path)  # max_insight_chars: 500
    writer.add_insight("note " * 95 + f"PASSWORD=\n{PASSWORD * 4}", entity="acme")

    line = stored_line(tmp_path)
    assert line.endswith("…")
    assert PASSWORD[:4] not in line
    assert "PASSWORD= [REDACTED:" in line
