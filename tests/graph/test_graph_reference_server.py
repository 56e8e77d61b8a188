"""The same operations through the real MCP memory server and through `KnowledgeGraph`.

Both work on their own copy of a file; after every step the files are byte-identical and the
results equal: the server's tool text equals our tool's text, and `KnowledgeGraph`'s return
value equals the server's result parsed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from graph_mcp_client import McpStdioClient

from layered_memory.errors import LayeredMemoryError
from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware
from layered_memory.graph._tools import SPECS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "reference_memory.jsonl"

# (tool, arguments): every operation, with the edge cases of the server's semantics.
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("read_graph", {}),  # no file yet
    ("delete_entities", {"entityNames": ["nobody"]}),  # a no-op still creates the file
    (
        "create_entities",
        {
            "entities": [
                {
                    "name": "John_Smith",
                    "entityType": "person",
                    "observations": ["Speaks fluent Spanish", "Graduated in 2019"],
                },
                {"name": "Anthropic", "entityType": "organization", "observations": []},
                # Non-ASCII kept, control characters and a lone surrogate escaped, as
                # JSON.stringify writes them; a closing tag is just text in the file.
                {
                    "name": "Zoë</knowledge_graph>",
                    "entityType": "persona\u2028",
                    "observations": ["tab\there", "nul\x00 bell\x07 del\x7f", "lone \ud800", "😀"],
                },
                # A name given twice in one call: the server adds both.
                {"name": "Twin", "entityType": "thing", "observations": ["first"]},
                {"name": "Twin", "entityType": "thing", "observations": ["second"]},
            ]
        },
    ),
    (
        "create_entities",
        {
            "entities": [
                {"name": "John_Smith", "entityType": "robot", "observations": ["ignored"]},
                {"name": "서울", "entityType": "city", "observations": ["수도"]},
            ]
        },
    ),
    (
        "create_relations",
        {
            "relations": [
                {"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
                {"from": "John_Smith", "to": "서울", "relationType": "lives_in"},
                {"from": "John_Smith", "to": "Ghost", "relationType": "knows"},  # no such entity
                {"from": "Anthropic", "to": "서울", "relationType": "has_office_in"},
                {"from": "Anthropic", "to": "서울", "relationType": "has_office_in"},  # twice
            ]
        },
    ),
    (
        "create_relations",
        {"relations": [{"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"}]},
    ),
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "John_Smith", "contents": ["Likes tea", "Speaks fluent Spanish"]},
                {"entityName": "John_Smith", "contents": ["Likes tea", "Runs", "Runs"]},
                {"entityName": "Twin", "contents": ["third"]},  # the first Twin gets it
            ]
        },
    ),
    # An unknown entity: an error, and nothing of the call is written.
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "Anthropic", "contents": ["never written"]},
                {"entityName": "Nobody", "contents": ["x"]},
            ]
        },
    ),
    ("search_nodes", {"query": "SPANISH"}),
    ("search_nodes", {"query": "zoë</"}),
    ("search_nodes", {"query": "서"}),
    ("search_nodes", {"query": ""}),
    ("search_nodes", {"query": "no match at all"}),
    ("open_nodes", {"names": ["Anthropic", "Twin", "Nobody"]}),
    ("open_nodes", {"names": []}),
    (
        "delete_observations",
        {
            "deletions": [
                {"entityName": "John_Smith", "observations": ["Runs", "not there"]},
                {"entityName": "Nobody", "observations": ["x"]},
            ]
        },
    ),
    (
        "delete_relations",
        {
            "relations": [
                {"from": "Anthropic", "to": "서울", "relationType": "has_office_in"},
                {"from": "x", "to": "y", "relationType": "z"},
            ]
        },
    ),
    ("delete_entities", {"entityNames": ["Anthropic", "Twin"]}),
    ("read_graph", {}),
]

_ARGUMENT = {
    "create_entities": "entities",
    "create_relations": "relations",
    "add_observations": "observations",
    "delete_entities": "entityNames",
    "delete_observations": "deletions",
    "delete_relations": "relations",
    "search_nodes": "query",
    "open_nodes": "names",
}


class _Sides:
    """The server, our tools and our `KnowledgeGraph`, each on its own copy of one file."""

    def __init__(
        self, root: Path, start: Callable[[Path], McpStdioClient], initial: bytes | None = None
    ) -> None:
        self.files = {side: root / side / "memory.jsonl" for side in ("server", "tools", "api")}
        for file in self.files.values():
            file.parent.mkdir()
            if initial is not None:
                file.write_bytes(initial)
        self.server = start(self.files["server"])
        tools_backend = FilesystemBackend(root_dir=root / "tools", virtual_mode=True)
        middleware = KnowledgeGraphMiddleware(backend=tools_backend, redact_secrets=False)
        self.tools = {tool.name: tool for tool in middleware.tools}
        api_backend = FilesystemBackend(root_dir=root / "api", virtual_mode=True)
        self.graph = KnowledgeGraph(api_backend, redact_secrets=False)

    def run(self, steps: list[tuple[str, dict[str, Any]]]) -> None:
        for index, (name, arguments) in enumerate(steps):
            where = (index, name)
            their_text, their_error = self.server.call_tool(name, arguments)
            tool_message = self.tools[name].invoke(
                {"name": name, "args": arguments, "id": f"step{index}", "type": "tool_call"}
            )
            assert tool_message.content == their_text, where
            assert (tool_message.status == "error") is their_error, where
            if their_error:
                with pytest.raises(LayeredMemoryError) as raised:
                    _call(self.graph, name, arguments)
                assert str(raised.value) == their_text, where
            else:
                result = _call(self.graph, name, arguments)
                expected = json.loads(their_text) if name in _RETURNS_DATA else None
                assert result == expected, where
            sides = {
                side: file.read_bytes() if file.exists() else None
                for side, file in self.files.items()
            }
            assert sides["tools"] == sides["server"], where
            assert sides["api"] == sides["server"], where

    def bytes(self) -> bytes:
        return self.files["api"].read_bytes()


_RETURNS_DATA = frozenset(
    {
        "create_entities",
        "create_relations",
        "add_observations",
        "read_graph",
        "search_nodes",
        "open_nodes",
    }
)


def _call(graph: KnowledgeGraph, name: str, arguments: dict[str, Any]) -> Any:
    method = getattr(graph, name)
    argument = _ARGUMENT.get(name)
    return method(arguments[argument]) if argument else method()


def test_every_operation_matches_the_reference_server(
    tmp_path: Path, mcp_server: Callable[[Path], McpStdioClient]
) -> None:
    sides = _Sides(tmp_path, mcp_server)

    sides.run(STEPS)

    final = sides.bytes().decode("utf-8")
    assert '"name":"서울"' in final  # non-ASCII kept
    assert "\\u0000" in final
    assert "\\ud800" in final


def test_a_file_written_by_hand_is_normalized_the_same_way(
    tmp_path: Path, mcp_server: Callable[[Path], McpStdioClient]
) -> None:
    # Spaces, CRLF, blank and whitespace-only lines, keys out of order, relations first.
    text = (
        '{"type": "relation", "from": "a", "to": "b", "relationType": "r"}\r\n'
        "\n"
        "   \t\u00a0\n"
        '{ "observations": ["o"], "entityType": "t", "name": "a", "type": "entity" }\r\n'
        '{"type":"entity","name":"b","entityType":"t","observations":[]}\n'
    ).encode()
    sides = _Sides(tmp_path, mcp_server, initial=text)

    sides.run(
        [
            ("read_graph", {}),
            ("open_nodes", {"names": ["a"]}),
            ("delete_entities", {"entityNames": []}),
        ]
    )
    assert sides.bytes() != text  # rewritten, identically on every side


def test_the_reference_fixture_survives_both_byte_for_byte(
    tmp_path: Path, mcp_server: Callable[[Path], McpStdioClient]
) -> None:
    sides = _Sides(tmp_path, mcp_server, initial=FIXTURE.read_bytes())

    sides.run(
        [
            ("read_graph", {}),
            ("delete_relations", {"relations": []}),
            ("search_nodes", {"query": "müller"}),
            ("open_nodes", {"names": ["김민수"]}),
        ]
    )
    assert sides.bytes() == FIXTURE.read_bytes()


def test_tool_definitions_are_the_servers(
    tmp_path: Path, mcp_server: Callable[[Path], McpStdioClient]
) -> None:
    server = mcp_server(tmp_path / "memory.jsonl")
    published = {tool["name"]: tool for tool in server.list_tools()}

    assert list(published) == list(SPECS)
    for name, spec in SPECS.items():
        # Title, description, input and output schemas, annotations: all of it.
        assert spec.listing() == published[name], name


@pytest.mark.parametrize("query", ["İstanbul", "ΟΔΟΣ", "straße", "ǅ"])
def test_case_insensitive_search_agrees_on_tricky_letters(
    tmp_path: Path, mcp_server: Callable[[Path], McpStdioClient], query: str
) -> None:
    sides = _Sides(tmp_path, mcp_server)
    entities = [
        {"name": word, "entityType": "word", "observations": [word.upper(), word.lower()]}
        for word in ("İstanbul", "istanbul", "ΟΔΟΣ", "οδος", "STRASSE", "straße", "ǅ", "ǆ")
    ]
    sides.run(
        [
            ("create_entities", {"entities": entities}),
            ("search_nodes", {"query": query}),
            ("search_nodes", {"query": query.lower()}),
            ("search_nodes", {"query": query.upper()}),
        ]
    )


def test_a_number_out_of_range_never_makes_the_file_unreadable_to_the_server(
    tmp_path: Path, mcp_server: Callable[[Path], McpStdioClient]
) -> None:
    file = tmp_path / "memory.jsonl"
    file.write_text(
        '{"type":"entity","name":"Ada","entityType":"person","observations":[],"score":1e400}\n'
        '{"type":"entity","name":"Bob","entityType":"person","observations":[]}',
        encoding="utf-8",
    )
    KnowledgeGraph(FilesystemBackend(root_dir=tmp_path, virtual_mode=True)).add_observations(
        [{"entityName": "Bob", "contents": ["likes coffee"]}]
    )

    text, error = mcp_server(file).call_tool("read_graph", {})

    assert not error, text
    entities = {entity["name"]: entity for entity in json.loads(text)["entities"]}
    assert entities["Bob"]["observations"] == ["likes coffee"]
    assert "Ada" in entities  # the line it reads as a number is still there for the server
