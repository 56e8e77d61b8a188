"""A hostile size never makes a graph slow to serve (issue 35, class 5).

`read_graph` on a graph with one 20 MB line took 24 s over MCP: the official SDK's stdio
client rejoins its read buffer at every chunk, so the time grows with the square of a result
line. One name, type or observation is now at most `MAX_TEXT_CHARS` characters: a longer one
is refused at write with an error naming it, and one already in a file (written by another
server) comes back as a marker saying how long it was. The file keeps it byte for byte.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend
from mcp import Client, StdioServerParameters

from layered_memory.graph import MAX_TEXT_CHARS, KnowledgeGraph, KnowledgeGraphInputError

BIG = "word " * 4_000_000  # 20 MB
WAIT_SECONDS = 120  # the SDK client's deadline per request: a hang fails, nothing is timed


def _graph(tmp_path: Path) -> KnowledgeGraph:
    return KnowledgeGraph(FilesystemBackend(root_dir=tmp_path, virtual_mode=True), "/memory.jsonl")


@pytest.mark.parametrize(
    ("operation", "arguments"),
    [
        ("create_entities", [{"name": "a", "entityType": "t", "observations": [BIG]}]),
        ("create_entities", [{"name": BIG, "entityType": "t", "observations": []}]),
        ("create_relations", [{"from": "a", "to": "b", "relationType": BIG}]),
        ("add_observations", [{"entityName": "a", "contents": ["ok", BIG]}]),
    ],
)
def test_a_write_over_the_cap_is_refused_with_an_error_naming_it(
    tmp_path: Path, operation: str, arguments: list[dict[str, object]]
) -> None:
    graph = _graph(tmp_path)
    graph.create_entities([{"name": "a", "entityType": "t", "observations": []}])
    before = (tmp_path / "memory.jsonl").read_bytes()
    with pytest.raises(KnowledgeGraphInputError) as caught:
        getattr(graph, operation)(arguments)
    message = str(caught.value)
    assert f"{len(BIG):,} characters" in message
    assert f"{MAX_TEXT_CHARS:,}" in message
    assert "several shorter observations" in message
    assert (tmp_path / "memory.jsonl").read_bytes() == before


def test_a_huge_line_written_elsewhere_comes_back_small_over_mcp(tmp_path: Path) -> None:
    import asyncio

    record = {"type": "entity", "name": "big", "entityType": "thing", "observations": [BIG, "ok"]}
    file = tmp_path / "memory.jsonl"
    file.write_text(json.dumps(record) + "\n")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "layered_memory.cli", "mcp", "--graph", str(file)],
    )

    async def read() -> str:
        async with Client(server, read_timeout_seconds=WAIT_SECONDS, mode="legacy") as client:
            result = await client.call_tool("read_graph", {})
            return "".join(getattr(part, "text", "") for part in result.content)

    text = asyncio.run(read())
    assert len(text) < 1_000
    assert f"[{len(BIG):,} characters left out" in text
    assert '"ok"' in text
    assert file.read_text() == json.dumps(record) + "\n"  # the file keeps it
