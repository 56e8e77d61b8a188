"""Entities in focus by relevance: when the message names fewer than `max_entities`, the
recall engine fills the focus, never with an entity sharing no word with the message."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage

from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware, _recall

from .test_graph_middleware import _block, _request, _seed, _state


def test_a_question_about_an_observation_of_an_unnamed_entity_shows_that_entity(
    tmp_path: Path,
) -> None:
    backend = _seed(tmp_path, extra=50)
    middleware = KnowledgeGraphMiddleware(backend=backend)

    block = _block(middleware, _request(_state(middleware), "Who here speaks Spanish?"))

    assert '"name":"John_Smith"' in block
    assert "Speaks fluent Spanish" in block
    assert "filler_" not in block
    assert "then those most relevant to it by the words they share" in block
    # Named entities come first, the recalled ones after them.
    named_first = _block(middleware, _request(_state(middleware), "Anthropic: who speaks Spanish?"))
    assert named_first.index('"name":"Anthropic"') < named_first.index('"name":"John_Smith"')
    # Turned off: focus by name only, and the header says so.
    by_name = KnowledgeGraphMiddleware(backend=backend, recall=False)
    only = _block(by_name, _request(_state(by_name), "Who here speaks Spanish?"))
    assert "(No entity of the graph is in focus.)" in only
    assert "the entities named in the latest user message)" in only


def test_an_unrelated_question_shows_no_extra_entity(tmp_path: Path) -> None:
    middleware = KnowledgeGraphMiddleware(backend=_seed(tmp_path, extra=50))
    state = _state(middleware)

    unrelated = _block(middleware, _request(state, "How long should sourdough proof?"))
    named = _block(middleware, _request(state, "John Smith asks: how long should sourdough proof?"))

    assert "(No entity of the graph is in focus.)" in unrelated
    assert named.count('"name":') == 1
    assert '"name":"John_Smith"' in named


def test_the_recall_index_is_built_once_per_graph_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _seed(tmp_path, extra=20)
    builds: list[int] = []
    queries: list[str] = []
    build, relevant = _recall.EntityIndex.__init__, _recall.EntityIndex.relevant

    def counting_build(self: Any, names: Any, texts: Any) -> None:
        builds.append(len(names))
        build(self, names, texts)

    def counting_relevant(self: Any, message: str, **kwargs: Any) -> list[str]:
        queries.append(message)
        return relevant(self, message, **kwargs)

    monkeypatch.setattr(_recall.EntityIndex, "__init__", counting_build)
    monkeypatch.setattr(_recall.EntityIndex, "relevant", counting_relevant)
    middleware = KnowledgeGraphMiddleware(backend=backend)
    state = _state(middleware)

    for message in ("Who speaks Spanish?", "fact 3?", "Who speaks Spanish?", "fact 3?"):
        _block(middleware, _request(state, message))
    assert builds == [27]  # one build for the graph's version
    assert queries == ["Who speaks Spanish?", "fact 3?"]  # an unchanged message: the cached block

    tools = {tool.name: tool for tool in middleware.tools}
    result = tools["create_entities"].invoke(
        {
            "name": "create_entities",
            "args": {"entities": [{"name": "Paella", "entityType": "dish", "observations": []}]},
            "id": "c1",
            "type": "tool_call",
        }
    )
    call = AIMessage("", tool_calls=[{"name": "create_entities", "args": {}, "id": "c1"}])
    _block(middleware, _request(state, "paella?", call, result))
    assert builds == [27, 28]  # the new version's index


def test_without_numpy_focus_is_by_name_and_a_warning_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    KnowledgeGraph(backend).create_entities(
        [{"name": "Jo", "entityType": "person", "observations": ["Speaks Spanish"]}]
    )
    monkeypatch.setitem(sys.modules, "layered_memory.graph._recall", None)  # import fails

    middleware = KnowledgeGraphMiddleware(backend=backend)

    assert middleware.settings.recall is False
    assert "layered-memory[tiers]" in caplog.text
    assert "recall=False" in caplog.text
