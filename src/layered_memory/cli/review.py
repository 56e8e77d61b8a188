"""`layered-memory review`: list, approve and reject the changes a consolidator holds for review.

The queue is read and decided by a `MemoryConsolidator` without a model, on the same files as
the agent's (`--root` / `--store`), or by the consolidator of the user's own middleware
(`--config`), so its paths, section and budgets are the agent's. Every decision is one locked
transaction, as every memory write: an agent running meanwhile loses nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from layered_memory.cli._config import load_config, user_code
from layered_memory.cli._output import dumps_json, printable
from layered_memory.cli._source import LOAD_ERRORS, backend_path, folder_backend, store_namespace
from layered_memory.cli._store import open_store
from layered_memory.errors import ReviewError, UsageError
from layered_memory.sessions.stores.urls import redact_url, scrub
from layered_memory.writeback.consolidation import Change, MemoryConsolidator
from layered_memory.writeback.review_queue import SHOWN_ID_CHARS

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class _Decision:
    id: str
    decision: str
    outcome: str
    """`applied`, `rejected` (the change is off the queue) or `not found`."""
    entry_id: str | None
    reason: str | None


def run_review(args: Any) -> int:
    """Run the subcommand. Exit status: 0; 1 when a change was not found, an approval was
    refused by the rules, or the queue is unreadable; 2 on a usage error."""
    failure: str | None = None
    try:
        with _consolidator(args) as (consolidator, source):
            return _review(consolidator, source, args)
    except LOAD_ERRORS as exc:
        failure = str(exc)
    print(f"layered-memory review: {printable(scrub(failure, None))}", file=sys.stderr)
    return EXIT_USAGE


@contextmanager
def _consolidator(args: Any) -> Iterator[tuple[MemoryConsolidator, dict[str, Any]]]:
    """The consolidator the options name, and where it reads from (for the report)."""
    _check_ids(args)
    if args.config is not None:
        given = [
            flag
            for flag, value in (("--memory", args.memory), ("--section", args.section))
            if value
        ]
        if given:
            msg = f"{', '.join(given)}: --config takes these from your consolidator; drop them"
            raise UsageError(msg)
        config = load_config(args.config)
        consolidator = getattr(config.middleware, "consolidator", None)
        if consolidator is None:
            msg = (
                f"--config {args.config}: the middleware has no consolidator (pass "
                "consolidator=MemoryConsolidator(...) to MemoryMiddleware)"
            )
            if args.action in ("stale", "drop", "refresh"):
                msg = (
                    f"--config {args.config}: the middleware has no consolidator to name its "
                    "memory file: give the file instead (--root DIR --memory /NOTES.md)"
                )
            raise UsageError(msg)
        yield consolidator, {"kind": "config", "config": args.config}
        return
    path = backend_path(args.memory or "/MEMORY.md")
    section = args.section or "Learned"
    parts = store_namespace(args.store, args.namespace)
    if parts is None:
        backend, folder = folder_backend(args.root)
        yield _reviewer(backend, path, section), {"kind": "folder", "root": str(folder)}
        return
    with open_store(args.store) as store:
        from deepagents.backends import StoreBackend

        in_store = StoreBackend(namespace=lambda _runtime: parts, store=store)
        source = {"kind": "store", "store": redact_url(args.store), "namespace": list(parts)}
        yield _reviewer(in_store, path, section), source


def _reviewer(backend: Any, path: str, section: str) -> MemoryConsolidator:
    try:
        return MemoryConsolidator(None, backend=backend, path=path, section=section)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _check_ids(args: Any) -> None:
    if args.action in ("list", "stale") and (args.ids or args.all):
        msg = f"{args.action} takes no IDs (approve ID... or reject ID... decide changes)"
        raise UsageError(msg)
    if args.action in ("stale", "drop", "refresh"):
        if args.action != "stale" and not args.ids:
            msg = (
                f"{args.action} needs the IDs of stale entries (see `layered-memory review stale`)"
            )
            raise UsageError(msg)
        if args.all:
            msg = f"{args.action} takes IDs, not --all (each entry is a person's decision)"
            raise UsageError(msg)
        return
    if args.action != "list" and not args.ids and not args.all:
        msg = f"{args.action} needs the IDs of the changes (see `layered-memory review`), or --all"
        raise UsageError(msg)
    if args.ids and args.all:
        msg = "give IDs or --all, not both"
        raise UsageError(msg)


def _review(consolidator: MemoryConsolidator, source: dict[str, Any], args: Any) -> int:
    if args.action in ("stale", "drop", "refresh"):
        return _stale(consolidator, source, args)
    decisions: list[_Decision] = []
    problem: str | None = None
    distrust: list[str] = []
    try:
        with user_code():  # the user's backend runs here (--config): its prints go to stderr
            if args.action != "list":
                ids = args.ids
                if args.all:  # `approve --all` approves what the package queued, nothing else
                    ids = [
                        change.id
                        for change in consolidator.pending()
                        if args.action == "reject" or change.untrusted is None
                    ]
                decisions = [_decide(consolidator, args.action, change_id) for change_id in ids]
            waiting = consolidator.pending()
            distrust = consolidator.queue_problems()
    except ReviewError as exc:
        problem, waiting = exc.reason, []
    ok = problem is None and not distrust
    ok = ok and all(decision.outcome != "not found" for decision in decisions)
    ok = ok and not any(d.decision == "approve" and d.outcome == "rejected" for d in decisions)
    if args.json:
        data = _data(
            consolidator, source, waiting=waiting, decisions=decisions, problem=problem, ok=ok
        )
        data["distrust"] = distrust
        print(dumps_json(data))
    else:
        sys.stdout.write(_text(consolidator, waiting, decisions, problem, distrust))
    return EXIT_OK if ok else EXIT_FINDINGS


def _decide(consolidator: MemoryConsolidator, action: str, change_id: str) -> _Decision:
    try:
        if action == "reject":
            change = consolidator.reject(change_id)
            return _Decision(change.id, "reject", "rejected", change.entry_id, None)
        result = consolidator.approve(change_id)
    except ReviewError as exc:
        if exc.change_id is None:
            raise  # the queue itself is unreadable: reported once, not per id
        return _Decision(change_id, action, "not found", None, exc.reason)
    if result.applied:
        change = result.applied[0]
        return _Decision(change.id, "approve", "applied", change.entry_id, change.reason)
    change = result.rejected[0]
    return _Decision(change.id, "approve", "rejected", change.entry_id, change.reason)


def _data(
    consolidator: MemoryConsolidator,
    source: dict[str, Any],
    *,
    waiting: Sequence[Change],
    decisions: Sequence[_Decision],
    problem: str | None,
    ok: bool,
) -> dict[str, Any]:
    return {
        "version": 1,
        "ok": ok,
        "source": source,
        "memory": consolidator.path,
        "queue": consolidator.pending_path,
        "section": consolidator.section,
        "problem": problem,
        "decisions": [asdict(decision) for decision in decisions],
        "pending": [asdict(change) for change in waiting],
    }


def _text(
    consolidator: MemoryConsolidator,
    waiting: Sequence[Change],
    decisions: Sequence[_Decision],
    problem: str | None,
    distrust: Sequence[str] = (),
) -> str:
    queue, memory = printable(consolidator.pending_path), printable(consolidator.path)
    lines: list[str] = []
    for decision in decisions:
        entry = f" [{printable(decision.entry_id)}]" if decision.entry_id else ""
        why = f": {printable(decision.reason)}" if decision.reason else ""
        verb = "approved" if decision.decision == "approve" else "rejected"
        shown = printable(decision.id[:SHOWN_ID_CHARS])
        if decision.outcome == "not found":
            lines.append(f"{shown}: not decided{why}")
        elif decision.decision == "approve" and decision.outcome == "rejected":
            lines.append(f"{shown}: approved, but not applied{why}")
        else:
            lines.append(f"{shown}: {verb}{entry}{why}")
    if decisions:
        lines.append("")
    if problem is not None:
        lines.append(f"layered-memory review: {queue}: {printable(problem)}")
        return "\n".join(lines) + "\n"
    for warning in distrust:
        lines.append(f"warning: {printable(warning)}")
    if distrust:
        lines.append("")
    count = "1 change waits" if len(waiting) == 1 else f"{len(waiting)} changes wait"
    lines.append(
        f"{count} for review in {queue} (memory {memory}, section "
        f"{printable(consolidator.section)})"
    )
    for change in waiting:
        entry = f" [{printable(change.entry_id)}]" if change.entry_id else ""
        lines += ["", f"{change.id[:SHOWN_ID_CHARS]}  {printable(change.op)}{entry}"]
        if change.untrusted is not None:
            lines.append(f"  NOT TRUSTED: {printable(change.untrusted)}; reject it")
        if change.entry_text is not None:
            lines.append(f"  entry: {printable(change.entry_text)}")
        if change.text is not None:
            lines.append(f"  text:  {printable(change.text)}")
        if change.reason:
            lines.append(f"  why:   {printable(change.reason)}")
        origin = [
            f"thread {printable(change.thread_id)}" if change.thread_id else "",
            f"model {printable(change.model)}" if change.model else "",
            printable(change.date) if change.date else "",
        ]
        if any(origin):
            lines.append(f"  from:  {', '.join(part for part in origin if part)}")
    if waiting:
        lines += [
            "",
            "Decide with `layered-memory review approve ID...` or `layered-memory review "
            "reject ID...` (same --root/--store/--config).",
        ]
    return "\n".join(lines) + "\n"


def _stale(consolidator: MemoryConsolidator, source: dict[str, Any], args: Any) -> int:
    """`review stale|drop|refresh`: the memory file's stale entries, listed or decided (the
    list is `writeback.cites.stale_lessons`, the one `doctor` prints)."""
    import datetime as dt

    from layered_memory.core.loading import download_texts
    from layered_memory.writeback.cites import decide_stale, stale_lessons

    backend, path = consolidator.backend, consolidator.path
    with user_code():
        found = download_texts(backend, [path])
    if path in found.missing:  # a typo in --memory, or the wrong folder: never "0 stale"
        where = source.get("root") or source.get("namespace") or source.get("config")
        msg = (
            f"{path}: no such memory file in {where} (name it with --memory, or run in the "
            "project's folder / give --root)"
        )
        raise UsageError(msg)
    with user_code():
        decisions = []
        if args.action != "stale":
            today = dt.date.today().isoformat()
            decisions = decide_stale(backend, path, args.ids, action=args.action, today=today)
        texts = dict(download_texts(backend, [path]).texts)
        stale = stale_lessons(backend, texts)
    ok = not stale and all(decision.outcome != "not done" for decision in decisions)
    if args.json:
        data = {
            "version": 1,
            "ok": ok,
            "source": source,
            "memory": path,
            "decisions": [asdict(decision) for decision in decisions],
            "stale": [asdict(lesson) for lesson in stale],
        }
        print(dumps_json(data))
        return EXIT_OK if ok else EXIT_FINDINGS
    lines = []
    for decision in decisions:
        why = f": {printable(decision.reason)}" if decision.reason else ""
        lines.append(f"{printable(decision.id)}: {decision.outcome}{why}")
    if decisions:
        lines.append("")
    count = "1 stale entry" if len(stale) == 1 else f"{len(stale)} stale entries"
    lines.append(f"{count} in {printable(path)}")
    for lesson in stale:
        lines += ["", f"{lesson.id}  {printable(lesson.entry)}"]
        for cite, why in lesson.cites:
            since = f" since {printable(lesson.since)}" if lesson.since else ""
            lines.append(f"  {printable(cite)}: {why}{since}")
    if stale:
        lines += [
            "",
            "Decide with `layered-memory review drop ID...` (the entry goes) or `layered-memory "
            "review refresh ID...` (the lesson still holds: the cited lines are digested again).",
        ]
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK if ok else EXIT_FINDINGS
