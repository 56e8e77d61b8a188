"""Session keys, thread configs and listing a checkpointer's threads by key prefix."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from layered_memory import (
    SessionKeyError,
    build_session_key,
    build_thread_config,
    parse_session_key,
)
from layered_memory.sessions import (
    SessionKey,
    alist_thread_ids,
    list_thread_ids,
    normalize_key_part,
)
from postgres_schema import throwaway_schema

# -- keys -----------------------------------------------------------------------------------


def test_build_session_key_shapes() -> None:
    assert build_session_key("acme_corp", "evaluation") == "entity:acme_corp:evaluation"
    assert (
        build_session_key("ACME Corp", "Evaluation", "Quality-Evaluator")
        == "entity:acme_corp:evaluation:quality_evaluator"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ACME Corp", "acme_corp"),
        ("  Acme -- Corp  ", "acme_corp"),
        ("acme\t\ncorp", "acme_corp"),
        ("a__b", "a_b"),
        ("New York–Boston", "new_york_boston"),  # en dash is a dash too
        ("a:b/c\\d", "abcd"),  # separators cannot survive into a part
        ("x\x00y\x07z\u200b!", "xyz"),  # control and format characters, punctuation
        ("Straße", "strasse"),  # casefold
        ("ﬁle", "file"),  # NFKC ligature
        ("ＡＣＭＥ／ｊｐ", "acmejp"),  # full-width forms
        ("ｱｲｳ", "アイウ"),  # half-width katakana
        ("cafe\u0301", "café"),  # composed
        ("삼성 전자", "삼성_전자"),
        ("東京 大学", "東京_大学"),
        ("مرحبا بكم", "مرحبا_بكم"),
        ("acme.com", "acme.com"),
        ("Ⅻ", "xii"),
        ("a\u00a0b", "a_b"),  # no-break space
    ],
)
def test_normalization(raw: str, expected: str) -> None:
    assert normalize_key_part(raw) == expected
    assert normalize_key_part(expected) == expected, "normalization is idempotent"


@pytest.mark.parametrize(
    ("args", "part"),
    [
        (("  ", "research"), "entity"),
        (("acme", ":/"), "phase"),
        (("acme", "research", "---"), "sub_context"),
        (("\x00\x01", "research"), "entity"),
    ],
)
def test_empty_part_raises_naming_it(args: tuple[str, ...], part: str) -> None:
    with pytest.raises(ValueError, match=f"{part} is empty") as info:
        build_session_key(*args)
    assert isinstance(info.value, SessionKeyError)


def test_non_string_part_is_rejected() -> None:
    with pytest.raises(SessionKeyError, match="entity must be a str"):
        build_session_key(42, "x")  # type: ignore[arg-type]


def test_separator_in_a_part_cannot_inject_parts() -> None:
    key = build_session_key("acme:evil", "research:extra", "a:b:c")
    assert key == "entity:acmeevil:researchextra:abc"
    assert parse_session_key(key) == SessionKey("acmeevil", "researchextra", "abc")


def test_phase_validation() -> None:
    phases = {"research", "Evaluation"}
    assert build_session_key("acme", "EVALUATION", phases=phases) == "entity:acme:evaluation"
    with pytest.raises(SessionKeyError, match=r"phase 'deploy' is not one of \['evaluation'"):
        build_session_key("acme", "deploy", phases=phases)
    with pytest.raises(SessionKeyError, match="not one of"):
        parse_session_key("entity:acme:deploy", phases=phases)


def test_parse_inverts_build() -> None:
    for args in [("ACME Corp", "research"), ("삼성", "평가", "품질 검사")]:
        key = build_session_key(*args)
        parsed = parse_session_key(key)
        assert parsed.key == key
        assert str(parsed) == key
        assert build_session_key(parsed.entity, parsed.phase, parsed.sub_context) == key
    assert parse_session_key("entity:acme:research") == SessionKey("acme", "research", None)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "parts"),
        ("entity", "parts"),
        ("entity:acme", "parts"),
        ("user:acme:research", "parts"),
        ("entity:a:b:c:d", "parts"),
        ("entity::research", "entity is empty"),
        ("entity:acme:research:", "sub_context is empty"),
        ("entity:ACME:research", "not normalized"),
        ("entity:acme corp:research", "not normalized"),
    ],
)
def test_parse_rejects_malformed_keys(key: str, reason: str) -> None:
    with pytest.raises(SessionKeyError, match=reason) as info:
        parse_session_key(key)
    assert info.value.key == key


def test_session_key_is_frozen() -> None:
    parsed = parse_session_key("entity:acme:research")
    with pytest.raises(AttributeError):
        parsed.entity = "other"  # type: ignore[misc]


# -- thread configs -------------------------------------------------------------------------


def test_build_thread_config() -> None:
    assert build_thread_config("Acme", "research", "web") == {
        "configurable": {"thread_id": "entity:acme:research:web"}
    }


def test_build_thread_config_merges_without_losing_keys() -> None:
    callbacks: list[Any] = []
    config: dict[str, Any] = {
        "recursion_limit": 7,
        "tags": ["nightly"],
        "callbacks": callbacks,
        "configurable": {"thread_id": "old", "user_id": "u1", "checkpoint_ns": ""},
    }
    merged = build_thread_config("acme", "research", config=config)  # type: ignore[arg-type]
    assert merged == {
        "recursion_limit": 7,
        "tags": ["nightly"],
        "callbacks": callbacks,
        "configurable": {"thread_id": "entity:acme:research", "user_id": "u1", "checkpoint_ns": ""},
    }
    assert merged["callbacks"] is callbacks, "objects in the config stay shared"
    assert config["configurable"]["thread_id"] == "old", "the input config is not modified"


# -- listing a checkpointer's threads -------------------------------------------------------


class _State(TypedDict):
    n: int


def _graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(_State)
    builder.add_node("step", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=checkpointer)


THREADS = [
    ("acme", "research", None),
    ("acme", "research", "web"),
    ("acme", "evaluation", "quality"),
    ("acme", "researcher", None),  # shares a prefix with "research", not a phase
    ("acme_corp", "research", None),  # shares a prefix with "acme", not an entity
    ("globex", "research", None),
]


def _run_threads(checkpointer: BaseCheckpointSaver[Any]) -> None:
    graph = _graph(checkpointer)
    for entity, phase, sub in THREADS:
        graph.invoke({"n": 0}, build_thread_config(entity, phase, sub))
    graph.invoke({"n": 0}, build_thread_config("acme", "research"))  # a second checkpoint run
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "not-a-session-key"}})


def _assert_listing(ids_all: list[str], ids_research: list[str], ids_none: list[str]) -> None:
    assert ids_all == [
        "entity:acme:evaluation:quality",
        "entity:acme:research",
        "entity:acme:research:web",
        "entity:acme:researcher",
    ]
    assert ids_research == ["entity:acme:research", "entity:acme:research:web"]
    assert ids_none == []


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def checkpointer(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[BaseCheckpointSaver[Any]]:
    if request.param == "memory":
        yield InMemorySaver()
        return
    if request.param == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
        return
    yield from _postgres_saver(request.getfixturevalue("postgres_url"))


def _postgres_saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with throwaway_schema(url) as schema, PostgresSaver.from_conn_string(schema.url) as saver:
        saver.setup()
        yield saver


def test_list_thread_ids_by_prefix(checkpointer: BaseCheckpointSaver[Any]) -> None:
    _run_threads(checkpointer)
    _assert_listing(
        list_thread_ids(checkpointer, "ACME"),
        list_thread_ids(checkpointer, "acme", "Research"),
        list_thread_ids(checkpointer, "initech"),
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def async_checkpointer(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if request.param == "memory":
        yield InMemorySaver()
        return
    async with AsyncExitStack() as stack:
        if request.param == "sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            saver: Any = await stack.enter_async_context(
                AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db"))
            )
            yield saver
            return
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        schema = request.getfixturevalue("postgres_schema")
        saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(schema.url))
        await saver.setup()
        yield saver


async def test_alist_thread_ids_by_prefix(async_checkpointer: BaseCheckpointSaver[Any]) -> None:
    graph = _graph(async_checkpointer)
    for entity, phase, sub in THREADS:
        await graph.ainvoke({"n": 0}, build_thread_config(entity, phase, sub))
    await graph.ainvoke({"n": 0}, {"configurable": {"thread_id": "not-a-session-key"}})
    _assert_listing(
        await alist_thread_ids(async_checkpointer, "acme"),
        await alist_thread_ids(async_checkpointer, "acme", "research"),
        await alist_thread_ids(async_checkpointer, "initech"),
    )


@pytest.mark.parametrize("entity", ["e\u2605\u0301", "a/\u0308b", "o:\u0302", "\u00e9"])
def test_a_built_key_always_parses_back(entity: str) -> None:
    """A dropped symbol between a letter and a combining mark left "e\\u0301" uncomposed: the
    key did not parse, and listing by "\u00e9" missed the thread."""
    key = build_session_key(entity, "x")
    assert str(parse_session_key(key)) == key
    assert normalize_key_part(normalize_key_part(entity)) == normalize_key_part(entity)
