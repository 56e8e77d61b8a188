"""Many workers, one memory: N processes run deep agents against one PostgreSQL.

Memory lives in langgraph's `PostgresStore` (through deepagents' `StoreBackend`), checkpoints
in `PostgresSaver`. Each worker process has its own connection and runs one deep agent for its
own client (entity) on behalf of its own user:

- the organization layer (`/org/AGENTS.md`) and rule folder (`/org/rules`) are shared and
  read-only; the rule `client-reports` has `paths: ["*"]` and is matched by the run's
  `entity_name`, so every run shows it;
- each user's `/user/MEMORY.md` is private to that user (namespace from `context["user_id"]`);
- when a run ends, its insight is written into the shared `/project/MEMORY.md`; writers in all
  processes are serialized by a PostgreSQL advisory lock, so none is lost.

Everything lives under a fresh namespace `("examples", "multi_worker", <run id>)` and fresh
thread ids, deleted at the end (`--keep` keeps them), so reruns start clean.

Run:  python examples/multi_worker.py                         (4 workers, scripted model)
      python examples/multi_worker.py --workers 8
      python examples/multi_worker.py --model anthropic:claude-sonnet-4-5   (a real model)
Database: $LAYERED_MEMORY_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import sys
import uuid
from typing import Any

from layered_memory.cli.demo import model_failure

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
URL_VARIABLE = "LAYERED_MEMORY_POSTGRES_URL"
WORKER_TIMEOUT_SECONDS = 600  # a hung worker stops the example instead of blocking it forever

HOW_TO_START = f"""\
No PostgreSQL answers at {{url}}
  ({{reason}})

Start one, then run this again:
  docker run --rm -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test -p 5432:5432 postgres:16
or, with a Debian/Ubuntu package install:
  sudo pg_ctlcluster 16 main start      (see `pg_lsclusters` for your version and cluster)
or point {URL_VARIABLE} at your own server:
  export {URL_VARIABLE}=postgresql://user:password@host:5432/dbname
"""

ORG_AGENTS_MD = "# Organization\n\n- Never share one client's data with another client.\n"
ORG_RULE = """\
---
name: client-reports
description: How every client report starts
paths: ["*"]
---
Start every client report with a one-line summary in bold.
"""
RULE_MARKER = "one-line summary in bold"
PROJECT_AGENTS_MD = "# Reporting project\n\n- Reports are one page.\n"
PROJECT_MEMORY_MD = "# Memory\n\nWhat the reporting workers have learned.\n"
CLIENTS = ["acme_corp", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka"]
SYSTEM_PROMPT = (
    "You write client reports. End your final answer with a line "
    "`INSIGHT: <one short sentence>` saying what you learned about the client."
)


def client_for(index: int) -> str:
    return CLIENTS[index] if index < len(CLIENTS) else f"client_{index + 1}"


def namespaces(run_id: str) -> dict[str, tuple[str, ...]]:
    root = ("examples", "multi_worker", run_id)
    return {"root": root, "org": (*root, "org"), "project": (*root, "project")}


def _backend(store: Any, run_id: str) -> Any:
    from layered_memory import shared_memory_backend, user_namespace

    spaces = namespaces(run_id)
    return shared_memory_backend(
        store,
        org_namespace=spaces["org"],
        project_namespace=spaces["project"],
        user_namespace_factory=user_namespace(prefix=(*spaces["root"], "users")),
    )


def _scripted_model(entity: str) -> Any:
    from langchain_core.messages import BaseMessage

    from layered_memory.testing import ScriptedChatModel, system_text

    def answer(messages: list[BaseMessage]) -> str:
        summary = (
            f"**{entity}: on track.**" if RULE_MARKER in system_text(messages) else "On track."
        )
        return f"{summary} Report for {entity} drafted.\nINSIGHT: {entity} reviews on Fridays."

    return ScriptedChatModel(script=[answer])


def run_worker(url: str, run_id: str, index: int, model_name: str | None) -> dict[str, Any]:
    """One worker process: one deep agent, one client, one user; returns what it saw."""
    from deepagents import create_deep_agent
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    from layered_memory import (
        ORG_RULES,
        PROJECT_MEMORY,
        HookRegistry,
        MemoryMiddleware,
        MemoryWriter,
        build_thread_config,
        register_write_back,
        shared_memory_layers,
    )
    from layered_memory.testing import PromptRecorder

    entity, user = client_for(index), f"user-{index + 1}"
    if model_name:
        from langchain.chat_models import init_chat_model

        model: Any = init_chat_model(model_name)
    else:
        model = _scripted_model(entity)
    with (
        PostgresStore.from_conn_string(url) as store,
        PostgresSaver.from_conn_string(url) as checkpointer,
    ):
        backend = _backend(store, run_id)
        registry = HookRegistry()
        register_write_back(registry, MemoryWriter(backend, PROJECT_MEMORY))
        memory = MemoryMiddleware(
            backend=backend,
            layers=shared_memory_layers(),
            rules=[ORG_RULES],
            match_keys=("entity_name",),
            hooks=registry,
        )
        agent = create_deep_agent(
            model=model,
            backend=memory.protected_backend,  # /org/ and /project/ read-only as a whole
            memory=[],
            middleware=[memory],
            checkpointer=checkpointer,
            system_prompt=SYSTEM_PROMPT,
        )
        recorder = PromptRecorder()
        config: Any = build_thread_config(entity, "report", run_id)
        config["callbacks"] = [recorder]
        request = f"Write this week's report for {entity}."
        final = agent.invoke(
            {"messages": [{"role": "user", "content": request}]},
            config,
            context={"user_id": user, "entity_name": entity},
        )
    return {
        "index": index,
        "entity": entity,
        "user": user,
        "pid": os.getpid(),
        "thread_id": config["configurable"]["thread_id"],
        "request": request,
        "answer": final["messages"][-1].text,
        "rule_applied": bool(recorder.system_prompts)
        and all(RULE_MARKER in prompt for prompt in recorder.system_prompts),
    }


def _worker_entry(url: str, run_id: str, index: int, model_name: str | None, results: Any) -> None:
    try:
        results.put(run_worker(url, run_id, index, model_name))
    except Exception as exc:  # reported by the parent, which exits non-zero
        if model_name:  # a real model failed (a key, the network): one line, no traceback
            line = model_failure("multi_worker.py", ["--model", model_name], exc)
            results.put({"index": index, "error": line, "model_failure": line})
            return
        results.put({"index": index, "error": f"{type(exc).__name__}: {exc}"})
        raise


def run_workers(url: str, run_id: str, workers: int, model_name: str | None) -> list[Any]:
    """Start one process per worker (spawn: no inherited connections), collect their results."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(target=_worker_entry, args=(url, run_id, index, model_name, results))
        for index in range(workers)
    ]
    for process in processes:
        process.start()
    collected = [results.get(timeout=WORKER_TIMEOUT_SECONDS) for _ in processes]
    for process in processes:
        process.join()
    return sorted(collected, key=lambda result: result["index"])


def check_database(url: str) -> str | None:
    """None when PostgreSQL answers at `url`, else why not (one line)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install 'layered-memory[postgres]'"
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return None


def _display_url(url: str) -> str:
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def seed(store: Any, run_id: str) -> None:
    from deepagents.backends.utils import create_file_data

    spaces = namespaces(run_id)
    for namespace, key, text in [
        (spaces["org"], "/AGENTS.md", ORG_AGENTS_MD),
        (spaces["org"], "/rules/client-reports.md", ORG_RULE),
        (spaces["project"], "/AGENTS.md", PROJECT_AGENTS_MD),
        (spaces["project"], "/MEMORY.md", PROJECT_MEMORY_MD),
    ]:
        store.put(namespace, key, dict(create_file_data(text)))


def clean_up(store: Any, checkpointer: Any, run_id: str, thread_ids: list[str]) -> int:
    """Delete every item under this run's namespace and its threads; return the item count."""
    root = namespaces(run_id)["root"]
    deleted = 0
    while items := store.search(root, limit=100):
        for item in items:
            store.delete(item.namespace, item.key)
        deleted += len(items)
    for thread_id in thread_ids:
        checkpointer.delete_thread(thread_id)
    return deleted


def run(url: str, workers: int, model_name: str | None, *, keep: bool = False) -> int:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    run_id = uuid.uuid4().hex[:8]
    print(
        f"PostgreSQL at {_display_url(url)}; namespace examples/multi_worker/{run_id}; "
        f"{workers} worker processes"
    )
    with (
        PostgresStore.from_conn_string(url) as store,
        PostgresSaver.from_conn_string(url) as checkpointer,
    ):
        store.setup()
        checkpointer.setup()
        seed(store, run_id)
        results: list[dict[str, Any]] = []
        try:
            results = run_workers(url, run_id, workers, model_name)
            failed = [r["model_failure"] for r in results if "model_failure" in r]
            if failed:
                print(failed[0], file=sys.stderr)
                return 2
            return report(store, run_id, results)
        finally:
            if keep:
                print(f"kept: namespace examples/multi_worker/{run_id} and its threads")
            else:
                thread_ids = [r["thread_id"] for r in results if "thread_id" in r]
                count = clean_up(store, checkpointer, run_id, thread_ids)
                print(f"cleaned up: {count} store items, {len(thread_ids)} threads")


def report(store: Any, run_id: str, results: list[dict[str, Any]]) -> int:
    for result in results:
        if "error" in result:
            print(f"\n[worker {result['index'] + 1}] failed: {result['error']}")
            continue
        print(
            f"\n[worker {result['index'] + 1}, pid {result['pid']}] "
            f"{result['user']} / {result['entity']} / thread {result['thread_id']}"
        )
        print(f"  user:  {result['request']}")
        print(
            f"  org rule 'client-reports' in every system prompt: "
            f"{'yes' if result['rule_applied'] else 'NO'}"
        )
        for line in result["answer"].splitlines():
            print(f"  agent: {line}")
    item = store.get(namespaces(run_id)["project"], "/MEMORY.md")
    memory = "" if item is None else str(item.value["content"])
    print(f"\n--- shared /project/MEMORY.md ---\n{memory}---")
    ran = [r for r in results if "error" not in r]
    written = [r for r in ran if re.search(rf"\[{re.escape(r['entity'])}\] ", memory)]
    rules = sum(1 for r in ran if r["rule_applied"])
    print(
        f"insights in the shared MEMORY.md: {len(written)} of {len(results)}; "
        f"org rule applied in {rules} of {len(results)} runs"
    )
    return 0 if len(written) == rules == len(results) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--model", help="a real model as provider:name (needs its API key)")
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_VARIABLE, DEFAULT_URL),
        help=f"PostgreSQL URL (default: ${URL_VARIABLE} or {DEFAULT_URL})",
    )
    parser.add_argument("--keep", action="store_true", help="keep the run's rows and threads")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    problem = check_database(args.url)
    if problem is not None:
        print(HOW_TO_START.format(url=_display_url(args.url), reason=problem), file=sys.stderr)
        return 2
    return run(args.url, args.workers, args.model, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
