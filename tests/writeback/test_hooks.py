"""HookRegistry: priorities, sync and async handlers, error isolation, strict handlers."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from typing import Any

import pytest

from layered_memory import HookEvent, HookRegistry

END = HookEvent.PIPELINE_END


async def fire(registry: HookRegistry, event: HookEvent, data: Any, *, use_async: bool) -> None:
    if use_async:
        await registry.atrigger(event, data)
    else:
        registry.trigger(event, data)


async def suspend() -> None:
    """A real suspension point (the handler gives the loop back once), with no delay."""
    loop = asyncio.get_running_loop()
    resumed = loop.create_future()
    loop.call_soon(resumed.set_result, None)
    await resumed


def recorder(calls: list[str], label: str) -> Any:
    def handler(event: HookEvent, data: Any) -> None:
        calls.append(f"{label}:{event.value}:{data['n']}")

    return handler


def test_event_names_are_stable() -> None:
    assert [event.value for event in HookEvent] == [
        "pipeline_start",
        "pipeline_end",
        "memory_loaded",
        "rules_matched",
        "memory_written",
    ]
    assert HookEvent("pipeline_end") is HookEvent.PIPELINE_END


@pytest.mark.parametrize("use_async", [False, True])
async def test_higher_priority_first_ties_in_registration_order(use_async: bool) -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register(END, recorder(calls, "low"), name="low", priority=10)
    registry.register(END, recorder(calls, "tie1"), name="tie1")
    registry.register(END, recorder(calls, "high"), name="high", priority=90)
    registry.register(END, recorder(calls, "tie2"), name="tie2")
    registry.register(HookEvent.PIPELINE_START, recorder(calls, "other"), name="other")

    await fire(registry, END, {"n": 1}, use_async=use_async)

    assert calls == [
        "high:pipeline_end:1",
        "tie1:pipeline_end:1",
        "tie2:pipeline_end:1",
        "low:pipeline_end:1",
    ]
    assert registry.names(END) == ["high", "tie1", "tie2", "low"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_sync_and_async_handlers_both_run_to_completion(use_async: bool) -> None:
    registry = HookRegistry()
    calls: list[str] = []

    async def async_handler(event: HookEvent, data: Any) -> None:
        await suspend()
        calls.append(f"async:{data['n']}")

    registry.register(END, async_handler, name="async", priority=60)
    registry.register(END, recorder(calls, "sync"), name="sync")

    # Under `use_async=False` this calls the sync trigger from inside a running loop: the
    # async handler must still finish before trigger returns.
    await fire(registry, END, {"n": 7}, use_async=use_async)

    assert calls == ["async:7", "sync:pipeline_end:7"]


def test_async_handler_under_sync_trigger_without_a_loop() -> None:
    registry = HookRegistry()
    done: list[bool] = []

    async def handler(event: HookEvent, data: Any) -> None:
        await suspend()
        done.append(True)

    registry.register(END, handler, name="async")
    registry.trigger(END, {})
    assert done == [True]


CURRENT_RUN: contextvars.ContextVar[str] = contextvars.ContextVar("CURRENT_RUN", default="none")


@pytest.mark.parametrize("use_async", [False, True])
async def test_handlers_see_the_callers_context_variables(use_async: bool) -> None:
    registry = HookRegistry()
    seen: list[str] = []

    async def async_handler(event: HookEvent, data: Any) -> None:
        seen.append(CURRENT_RUN.get())

    def sync_handler(event: HookEvent, data: Any) -> None:
        seen.append(CURRENT_RUN.get())

    registry.register(END, async_handler, name="a")
    registry.register(END, sync_handler, name="s")
    token = CURRENT_RUN.set("run-42")
    try:
        await fire(registry, END, {}, use_async=use_async)
    finally:
        CURRENT_RUN.reset(token)
    assert seen == ["run-42", "run-42"]


async def test_atrigger_runs_plain_handlers_off_the_event_loop() -> None:
    registry = HookRegistry()
    threads: list[int] = []
    registry.register(END, lambda event, data: threads.append(threading.get_ident()), name="s")
    await registry.atrigger(END, {})
    assert threads
    assert threads != [threading.get_ident()]


@pytest.mark.parametrize("use_async", [False, True])
async def test_async_twin_is_used_by_atrigger_only(use_async: bool) -> None:
    registry = HookRegistry()
    calls: list[str] = []

    async def twin(event: HookEvent, data: Any) -> None:
        calls.append("async twin")

    registry.register(
        END, lambda event, data: calls.append("sync form"), name="dual", async_handler=twin
    )
    await fire(registry, END, {}, use_async=use_async)
    assert calls == (["async twin"] if use_async else ["sync form"])


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_failing_handler_is_logged_by_name_and_the_others_run(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    registry = HookRegistry()
    calls: list[str] = []

    def broken(event: HookEvent, data: Any) -> None:
        raise RuntimeError("boom")

    async def broken_async(event: HookEvent, data: Any) -> None:
        raise KeyError("missing")

    registry.register(END, recorder(calls, "first"), name="first", priority=90)
    registry.register(END, broken, name="broken_sync", priority=80)
    registry.register(END, broken_async, name="broken_async", priority=70)
    registry.register(END, recorder(calls, "last"), name="last", priority=10)

    with caplog.at_level(logging.ERROR, logger="layered_memory.writeback.hooks"):
        await fire(registry, END, {"n": 3}, use_async=use_async)

    assert calls == ["first:pipeline_end:3", "last:pipeline_end:3"]
    messages = [record.getMessage() for record in caplog.records]
    assert any("'broken_sync'" in m and "pipeline_end" in m for m in messages)
    assert any("'broken_async'" in m for m in messages)
    assert all(record.exc_info for record in caplog.records)


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_strict_handler_stops_the_dispatch_and_propagates(use_async: bool) -> None:
    registry = HookRegistry()
    calls: list[str] = []

    class ValidationError(Exception):
        pass

    def gate(event: HookEvent, data: Any) -> None:
        raise ValidationError("final state is invalid")

    registry.register(END, recorder(calls, "before"), name="before", priority=90)
    registry.register(END, gate, name="gate", priority=80, strict=True)
    registry.register(END, recorder(calls, "after"), name="after", priority=10)

    with pytest.raises(ValidationError, match="final state is invalid") as excinfo:
        await fire(registry, END, {"n": 1}, use_async=use_async)

    assert calls == ["before:pipeline_end:1"]
    assert any("'gate'" in note for note in excinfo.value.__notes__)


def test_duplicate_names_are_rejected_and_unregister_frees_the_name() -> None:
    registry = HookRegistry()
    registry.register(END, recorder([], "a"), name="audit")
    with pytest.raises(ValueError, match="already registered"):
        registry.register(HookEvent.PIPELINE_START, recorder([], "b"), name="audit")
    assert "audit" in registry
    assert registry.unregister("audit") is True
    assert registry.unregister("audit") is False
    assert "audit" not in registry
    registry.register(END, recorder([], "a"), name="audit")


def test_unregistered_handlers_no_longer_run() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register(END, recorder(calls, "x"), name="x")
    registry.unregister("x")
    registry.trigger(END, {"n": 1})
    assert calls == []


def test_register_validates_its_arguments() -> None:
    registry = HookRegistry()
    with pytest.raises(ValueError, match="non-empty"):
        registry.register(END, recorder([], "a"), name=" ")
    with pytest.raises(TypeError, match="not callable"):
        registry.register(END, "not a function", name="bad")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="priority"):
        registry.register(END, recorder([], "a"), name="p", priority="high")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no_such_event"):
        registry.register("no_such_event", recorder([], "a"), name="e")
    registry.register("pipeline_end", recorder([], "a"), name="by_value")
    assert registry.names(END) == ["by_value"]


def test_a_handler_may_change_the_registry_while_it_runs() -> None:
    registry = HookRegistry()
    calls: list[str] = []

    def once(event: HookEvent, data: Any) -> None:
        calls.append("once")
        registry.unregister("once")
        registry.register(END, recorder(calls, "late"), name="late")

    registry.register(END, once, name="once")
    registry.trigger(END, {"n": 1})
    registry.trigger(END, {"n": 2})
    assert calls == ["once", "late:pipeline_end:2"]


def test_trigger_from_many_threads_is_safe() -> None:
    registry = HookRegistry()
    counter: list[int] = []
    lock = threading.Lock()

    def count(event: HookEvent, data: Any) -> None:
        with lock:
            counter.append(data["n"])

    registry.register(END, count, name="count")
    threads = [threading.Thread(target=registry.trigger, args=(END, {"n": n})) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(counter) == list(range(16))


# --- Fired by MemoryMiddleware (issue 4 point 2) --------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_memory_middleware_fires_start_and_end_with_state_and_config(
    tmp_path: Any, use_async: bool
) -> None:
    from deepagents.backends import FilesystemBackend
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from layered_memory import Layer, MemoryMiddleware, build_thread_config
    from layered_memory.testing import ScriptedChatModel

    (tmp_path / "MEMORY.md").write_text("# Memory\n")
    registry = HookRegistry()
    seen: list[tuple[HookEvent, dict[str, Any]]] = []
    for event in (HookEvent.PIPELINE_START, HookEvent.PIPELINE_END):
        registry.register(event, lambda e, d: seen.append((e, d)), name=f"spy_{event.value}")
    middleware = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("memory", "/MEMORY.md", writable=True)],
        hooks=registry,
    )
    agent = create_agent(ScriptedChatModel(script=["final answer"]), middleware=[middleware])
    config: Any = build_thread_config("acme", "review")
    config["configurable"]["entity_name"] = "acme"
    inputs: Any = {"messages": [HumanMessage("hi")]}
    if use_async:
        await agent.ainvoke(inputs, config, context={"entity_name": "acme"})
    else:
        agent.invoke(inputs, config, context={"entity_name": "acme"})

    assert [event for event, _ in seen] == [HookEvent.PIPELINE_START, HookEvent.PIPELINE_END]
    start, end = (data for _, data in seen)
    assert start["thread_id"] == end["thread_id"] == "entity:acme:review"
    assert end["config"]["configurable"]["entity_name"] == "acme"
    assert end["runtime_context"] == {"entity_name": "acme"}
    assert [m.text for m in end["messages"]] == ["hi", "final answer"]
