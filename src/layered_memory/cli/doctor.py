"""`layered-memory doctor`: one report of everything that makes memory silently absent or wrong.

Memory is loaded and rendered once by the middleware's own code (`cli._source.loaded_memory`: the
folder, the store namespace, or `--config module:attribute`), then judged by the checks below:
problems the load reported (missing, unreadable or refused files, rule folders, a root holding
none of the files, and whatever else a load reports, such as `@import` problems), rule files
and globs, rules no file of the project matches, what the budget cuts (for the given call, and
for the call where a file of every rule was touched), stores that do not answer. Exit status:
0 when clean, 1 on findings (errors or warnings; notes do not count), 2 on a usage error.

The checks: each reads what one load and one render by the middleware's own code produced (a
`cli._source.Loaded`): the snapshot's problems, the parsed rule set, the measured block. Nothing
here re-implements loading, matching or rendering.
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from layered_memory.cli import CHECKS
from layered_memory.cli._output import (
    SEVERITY_STYLE,
    Painter,
    counted,
    dumps_json,
    printable,
    use_colour,
)
from layered_memory.cli._report import InspectReport, report_from
from layered_memory.cli._source import (
    LOAD_ERRORS,
    Loaded,
    SourceOptions,
    disk_root,
    loaded_memory,
    source_options,
)
from layered_memory.core.assembler import SESSION_READ_FAILED, session_store_label
from layered_memory.core.imports import MAX_IMPORT_DEPTH, TOO_DEEP_REASON
from layered_memory.core.loading import MemoryExtras
from layered_memory.core.unrestored import LEFT_OUT_START
from layered_memory.errors import CliStoreError, MemoryWriteError, ReviewError
from layered_memory.rules import RuleSet
from layered_memory.rules.dead_globs import dead_globs
from layered_memory.safety.defuse import defuse_attribute, defuse_name
from layered_memory.sessions.stores.urls import redact_url, scrub

# -- the command ------------------------------------------------------------------------------

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

_ORDER = {"error": 0, "warning": 1, "info": 2}


def diagnose(loaded: Loaded) -> tuple[list[Finding], list[dict[str, str]]]:
    """Every finding about the loaded memory, and the checks that could not run (and why)."""
    assembler = loaded.assembler
    skipped: list[dict[str, str]] = []
    findings = [
        *load_findings(loaded),
        *import_findings(loaded.snapshot.extras),
        *stale_findings(loaded),
    ]
    if not assembler.layers and not assembler.rule_folders:
        message = "no memory file and no rule folder found: the agent gets no memory"
        if loaded.report.source.get("kind") == "folder":
            message += " (looked for /AGENTS.md, /MEMORY.md and the usual rule folders; "
            message += "describe yours with --layer / --rules, or use --config)"
        findings.append(Finding("no-memory", "error", None, message))
    rule_set = assembler.rule_set(loaded.snapshot.rule_files)
    root = disk_root(loaded.backend)
    findings.extend(rule_findings(rule_set, root=root))
    busiest: list[str] = []
    files = project_files(loaded.backend) if rule_set is not None else None
    if rule_set is not None and files is None:
        reason = "the backend does not keep the project's files on disk"
        skipped.append({"check": "rule-matches-no-file", "reason": reason})
    elif files is not None:
        if not files.complete:
            reason = f"more than {len(files.keys):,} files below {files.root}: scan stopped"
            skipped.append({"check": "rule-matches-no-file", "reason": reason})
        context_keys = loaded.middleware is None or bool(loaded.middleware.match_keys)
        found, busiest = file_match_findings(
            rule_set,
            files,
            rule_root=assembler.rule_root,
            context_keys=context_keys,
            disk_root=str(root) if root else None,
        )
        findings.extend(found)
    if loaded.injected:
        plain = budget_findings(loaded.report)
        findings.extend(plain)
        findings.extend(busiest_findings(loaded, busiest, plain))
    else:
        message = (
            "system_prompt=None: the middleware injects no block; memory is only kept in the "
            "state (memory_contents)"
        )
        findings.append(Finding("not-injected", "info", None, message))
    if loaded.config is not None:
        findings.extend(store_findings(assembler.session_store))
    else:
        reason = "session stores belong to a middleware's configuration: use --config"
        skipped.append({"check": "store-unreachable", "reason": reason})
    findings.extend(review_queue_findings(loaded))
    if assembler.strict and any(f.severity == "error" for f in findings):
        message = (
            "strict=True: the agent's run stops with an error at the first of these problems "
            "(MemorySourceError / RuleFileError) instead of skipping it"
        )
        findings.append(Finding("strict", "error", None, message))
    return findings, skipped


def _store_down(options: SourceOptions, exc: CliStoreError) -> tuple[dict[str, Any], Finding]:
    store = redact_url(options.store_url or "")
    source = {
        "kind": "store",
        "store": store,
        "namespace": (options.namespace or "").strip("/").split("/"),
    }
    return source, Finding("store-unreachable", "error", store, str(exc))


def _where(source: dict[str, Any]) -> str:
    kind = source.get("kind")
    if kind == "folder":
        return f"folder {printable(source['root'])}"
    if kind == "config":
        return (
            f"--config {printable(source['config'])} ({printable(source['middleware'])} in "
            f"{printable(source['found'])}; {printable(source['backend'])})"
        )
    return (
        f"store {printable(source['store'])}, namespace {printable('/'.join(source['namespace']))}"
    )


def _counts(findings: list[Finding]) -> dict[str, int]:
    return {severity: sum(f.severity == severity for f in findings) for severity in _ORDER}


def _summary(counts: dict[str, int]) -> str:
    notes = f", {counted(counts['info'], 'note')}" if counts["info"] else ""
    if not counts["error"] and not counts["warning"]:
        return f"doctor: no problems found{notes}"
    return (
        f"doctor: {counted(counts['error'], 'error')}, "
        f"{counted(counts['warning'], 'warning')}{notes}"
    )


def print_findings(
    source: dict[str, Any], findings: list[Finding], skipped: list[dict[str, str]], *, as_json: bool
) -> None:
    """The report: one line per finding (`PATH: SEVERITY: MESSAGE [check]`), then a summary."""
    counts = _counts(findings)
    if as_json:
        data = {
            "version": 1,
            "ok": not counts["error"] and not counts["warning"],
            "source": source,
            "counts": counts,
            "findings": [
                {"check": f.check, "severity": f.severity, "path": f.path, "message": f.message}
                for f in findings
            ],
            "skipped": skipped,
        }
        print(dumps_json(data))
        return
    paint = Painter(use_colour(sys.stdout))
    print(f"{paint('layered-memory doctor', 'bold')}: {_where(source)}")
    for finding in findings:
        severity = paint(
            finding.severity if finding.severity != "info" else "note",
            SEVERITY_STYLE[finding.severity],
        )
        where = f"{printable(finding.path)}: " if finding.path else ""
        print(f"{where}{severity}: {printable(finding.message)} [{finding.check}]")
    for item in skipped:
        print(f"not checked: {item['check']}: {printable(item['reason'])}")
    print(_summary(counts))


def run_doctor(args: Any) -> int:
    """Run the subcommand (see the module docstring for the exit status)."""
    unknown = sorted(set(args.ignore) - CHECKS.keys())
    if unknown:
        print(
            f"layered-memory doctor: --ignore {printable(', '.join(unknown))}: no such check "
            f"(checks: {', '.join(CHECKS)})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    options = source_options(args)
    if options.config is None and options.store_url is None and options.root is None:
        options = replace(options, root=".")
    failure: str | None = None
    ignored = set(args.ignore)
    try:
        with loaded_memory(options) as loaded:
            findings, skipped = diagnose(loaded)
            source = loaded.report.source
    except CliStoreError as exc:
        source, finding = _store_down(options, exc)
        findings, skipped = [finding], [{"check": "*", "reason": "the store does not answer"}]
        # Nothing else was checked: ignoring this one finding would report a clean store.
        ignored.discard(finding.check)
    except LOAD_ERRORS as exc:
        failure = str(exc)
    if failure is not None:
        print(f"layered-memory doctor: {printable(scrub(failure, None))}", file=sys.stderr)
        return EXIT_USAGE
    kept = sorted(
        (f for f in findings if f.check not in ignored),
        key=lambda f: (_ORDER[f.severity], f.path or "", f.check),
    )
    print_findings(source, kept, skipped, as_json=args.json)
    return EXIT_FINDINGS if any(f.severity != "info" for f in kept) else EXIT_OK


# -- the checks -------------------------------------------------------------------------------

Severity = Literal["error", "warning", "info"]

PROBE_KEY = "layered-memory-doctor:probe"
STORE_TIMEOUT_SECONDS = 10.0
MAX_SCAN_FILES = 20_000
SKIPPED_FOLDERS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox"}
    | {".mypy_cache", ".ruff_cache", ".pytest_cache"}
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the doctor found.

    Attributes:
        check: Its code (a key of `CHECKS`).
        severity: `error` (memory is absent or wrong), `warning` (probably so), `info` (a note).
        path: The file, folder, rule or store it is about, if any.
        message: What is wrong and how to fix it.
    """

    check: str
    severity: Severity
    path: str | None
    message: str


# -- the review queue ------------------------------------------------------------------------


def review_queue_findings(loaded: Loaded) -> list[Finding]:
    """Each review queue that cannot be trusted: the `--config` middleware's consolidator's,
    else the one beside each writable memory file (`MEMORY.pending.json`), when it exists."""
    from layered_memory.writeback.consolidation import MemoryConsolidator

    middleware = loaded.middleware
    consolidators: list[MemoryConsolidator] = []
    if middleware is not None:
        if middleware.consolidator is not None:
            consolidators.append(middleware.consolidator)
    else:
        for layer in loaded.assembler.layers:
            if not layer.writable:
                continue
            for path in layer.files:
                try:
                    consolidators.append(
                        MemoryConsolidator(None, backend=loaded.backend, path=path)
                    )
                except (TypeError, ValueError):
                    continue  # not a file a consolidator could manage
    findings: list[Finding] = []
    for consolidator in consolidators:
        try:
            problems = consolidator.queue_problems()
        except (ReviewError, MemoryWriteError) as exc:
            problems = [str(exc)]
        findings.extend(
            Finding("review-queue", "error", consolidator.pending_path, problem)
            for problem in problems
        )
    return findings


# -- what the load reported -----------------------------------------------------------------


def load_findings(loaded: Loaded) -> list[Finding]:
    """The snapshot's problems, each under the check its path belongs to, and absent files."""
    assembler, snapshot = loaded.assembler, loaded.snapshot
    layer_paths = set(assembler.layer_paths)
    folders = set(assembler.rule_folders)
    findings = []
    reported = set()
    for problem in snapshot.problems:
        if problem.reason == TOO_DEEP_REASON:
            continue  # `import_findings` reports it (import-too-deep)
        if problem.reason.startswith(SESSION_READ_FAILED) and problem.path == session_store_label(
            assembler.session_store
        ):
            continue  # `store_findings` pings the store and reports it (store-unreachable)
        reported.add(problem.path)
        if problem.reason.startswith(LEFT_OUT_START):
            check = "unrestored"
        elif problem.path in layer_paths and problem.path not in snapshot.files:
            check = "layer-unreadable" if problem.unreadable else "layer-file"
        elif problem.path in folders:
            check = "rules-folder"
        elif problem.unreadable:
            check = "rule-invalid"  # a listed rule file that could not be read
        else:
            check = "memory-problem"
        findings.append(Finding(check, "error", problem.path, problem.reason))
    for layer in assembler.layers:
        for path in assembler.files_of(layer, snapshot):
            if path in snapshot.files or path in reported:
                continue
            if assembler.compat:  # `sources=` mode skips a missing file quietly, as deepagents
                message = "memory source not found: skipped quietly (sources=[...] mode)"
                findings.append(Finding("layer-file", "warning", path, message))
            elif layer.writable:
                message = f"layer {layer.name!r}: no file yet; the agent creates it when it saves"
                findings.append(Finding("layer-absent", "info", path, message))
    return findings


def stale_findings(loaded: Loaded) -> list[Finding]:
    """Entries the load marked stale (writable memory only): a cited span changed, moved or
    vanished. The list is `writeback.cites.stale_lessons`, the one `layered-memory review
    stale` prints."""
    from layered_memory.core.staleness import STALE_MARK
    from layered_memory.writeback.cites import stale_lessons

    backend, read_only = loaded.backend, loaded.assembler.is_read_only_layer_file
    marked = {
        path: text
        for path, text in loaded.snapshot.files.items()
        if STALE_MARK in text and not read_only(path)
    }
    if not marked:
        return []
    return [
        Finding(
            "stale-lesson",
            "warning",
            lesson.path,
            f"{lesson.entry}: {'; '.join(lesson.reasons)}"
            + (f" since {lesson.since}" if lesson.since else "")
            + "; update or delete the entry (`layered-memory review stale"
            + f"{_memory_flag(lesson.path)}`, id {lesson.id})",
        )
        for lesson in stale_lessons(backend, marked)
    ]


def _memory_flag(path: str) -> str:
    """The `--memory` that makes `review stale` read this file (it reads /MEMORY.md without)."""
    return "" if path == "/MEMORY.md" else f" --memory {shlex.quote(path)}"


def import_findings(extras: MemoryExtras) -> list[Finding]:
    """Import chains cut at the depth limit (memory silently absent) and import cycles."""
    findings = [
        Finding(
            "import-too-deep",
            "error",
            path,
            f"its @imports are {MAX_IMPORT_DEPTH} hops from a configured memory file and are "
            "not read: import those files from a shallower one",
        )
        for path in extras.too_deep
    ]
    for cycle in extras.cycles:
        chain = " -> ".join((*cycle, cycle[0]))
        message = f"memory files import each other ({chain}); each is read once, so it is harmless"
        findings.append(Finding("import-cycle", "warning", cycle[0], message + ", but a mistake"))
    return findings


def rule_findings(rule_set: RuleSet | None, *, root: Path | None) -> list[Finding]:
    """Invalid rule files, rule warnings, and globs no key can match."""
    if rule_set is None:
        return []
    findings = [
        Finding(
            "rule-invalid" if problem.severity == "error" else "rule-warning",
            "error" if problem.severity == "error" else "warning",
            problem.path,
            problem.reason,
        )
        for problem in rule_set.problems
    ]
    for dead in dead_globs(rule_set.rules, disk_root=str(root) if root else None):
        findings.append(Finding("rule-never-applies", dead.severity, dead.rule.path, dead.message))
    return findings


# -- rules against the project's files --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectFiles:
    """The project's files as the agent's tools name them (`/src/app.py`)."""

    root: Path
    keys: tuple[str, ...]
    complete: bool


def project_files(backend: Any) -> ProjectFiles | None:
    """The files below the disk folder the backend serves `/` from; None when not on disk."""
    from deepagents.backends import FilesystemBackend

    from layered_memory.core.internals import final_route

    serving, _ = final_route(backend, "/")
    if not isinstance(serving, FilesystemBackend):
        return None
    root = Path(serving.cwd)
    keys: list[str] = []
    for current, folders, names in os.walk(root, followlinks=False):
        folders[:] = sorted(name for name in folders if name not in SKIPPED_FOLDERS)
        relative = Path(current).relative_to(root).as_posix()
        for name in sorted(names):
            path = name if relative == "." else f"{relative}/{name}"
            keys.append("/" + path if serving.virtual_mode else str(root / path))
            if len(keys) >= MAX_SCAN_FILES:
                return ProjectFiles(root, tuple(keys), complete=False)
    return ProjectFiles(root, tuple(keys), complete=True)


def _path_only(globs: Sequence[str]) -> bool:
    return all("/" in glob or "**" in glob for glob in globs)


def file_match_findings(
    rule_set: RuleSet | None,
    files: ProjectFiles,
    *,
    rule_root: str,
    context_keys: bool,
    disk_root: str | None = None,
) -> tuple[list[Finding], list[str]]:
    """`paths` rules that no file of the project matches, and one matching file per rule that
    some file matches (the keys of the busiest model call).

    Args:
        rule_set: The parsed rules.
        files: The project's files.
        rule_root: The root relative globs are anchored at.
        context_keys: Whether match keys may also be context strings (`match_keys`): a rule
            with a glob that cannot hold a path (`*acme*`) may be meant for those, and is not
            judged by files.
        disk_root: The disk folder of a virtual-path backend (its rules' dead globs are
            reported by `rule_findings` already).
    """
    if rule_set is None:
        return [], []
    match = rule_set.match(files.keys, root=rule_root)
    first_key = {hit.path: hit.key for hit in match.hits}
    dead = {
        dead.rule.path for dead in dead_globs(rule_set.rules, disk_root=disk_root) if dead.all_dead
    }
    findings = []
    for rule in rule_set.rules:
        if rule.mode != "paths" or rule.path in first_key or rule.path in dead:
            continue
        if not rule.paths:
            continue  # every glob was invalid: `rule-invalid` says so
        if context_keys and not _path_only(rule.paths):
            continue
        if not files.complete:
            continue  # the scan stopped early: a match may be among the files not seen
        globs = ", ".join(repr(glob) for glob in rule.paths)
        message = (
            f"no file below {files.root} matches [{globs}] ({len(files.keys):,} files checked): "
            "the rule applies only once the agent touches such a path (a typo?)"
        )
        findings.append(Finding("rule-matches-no-file", "warning", rule.path, message))
    return findings, sorted(set(first_key.values()))


# -- budgets ----------------------------------------------------------------------------------


def _cut_by(report: InspectReport, path: str, budget: str) -> str:
    """What cut the file, as the model call's record says (a layer's `max_chars` or
    `max_tokens`, the block's `max_tokens`), else the block's character budget."""
    record = report.memory_report or {}
    for entry in record.get("files", ()):
        if entry["path"] == path and entry["why"]:
            return "; ".join(entry["why"])
    return budget


def budget_findings(report: InspectReport, *, when: str = "") -> list[Finding]:
    """What the budget did to each layer file and each applied rule in the measured block."""
    findings = []
    budget = f"max_chars={report.max_chars:,}"
    for layer in report.layers:
        for file in layer.files:
            where = f"layer {layer.layer.name!r}"
            if file.shown == "omitted":
                message = (
                    f"{where}: left out of the block entirely by the budget ({file.chars:,} "
                    f"chars, {budget}){when}: raise max_chars, cap a lower layer (Layer("
                    "max_chars=...)) or shorten the files"
                )
                findings.append(Finding("budget-omits", "error", file.path, message))
            elif file.shown == "truncated":
                message = (
                    f"{where}: cut to fit the budget ({file.chars:,} chars, "
                    f"{_cut_by(report, file.path, budget)}){when}; "
                    "the model sees its head and a marker"
                )
                findings.append(Finding("budget-truncates", "warning", file.path, message))
            if file.cut_by_lines:
                cap = layer.layer.line_cap(file.path)
                message = f"{where}: only the first {cap} of {file.lines:,} lines are shown"
                findings.append(Finding("budget-line-cap", "info", file.path, message))
            if file.status == "loaded" and file.shown == "absent" and not when:
                message = f"{where}: only HTML comments or blank lines: nothing is shown"
                findings.append(Finding("layer-empty", "warning", file.path, message))
    for piece in report.extras:
        what = "nested memory file" if piece.kind == "nested" else f"{piece.layer!r}"
        if piece.outcome in ("stub", "dropped"):
            message = (
                f"{what}: left out of the block by the budget ({piece.source_chars:,} chars, "
                f"{budget}){when}"
            )
            findings.append(Finding("budget-omits", "error", piece.path, message))
        elif piece.outcome == "truncated" and not all("max_lines" in why for why in piece.why):
            message = (
                f"{what}: cut to fit the budget ({piece.source_chars:,} chars, {budget}){when}"
            )
            findings.append(Finding("budget-truncates", "warning", piece.path, message))
    rules_budget = f"max_rules_chars={report.max_rules_chars:,}"
    for decision in report.decisions:
        if decision.status == "applied":
            head = (
                f'<rule name="{defuse_attribute(decision.name)}" '
                f'path="{defuse_attribute(decision.path)}">\n'
            )
            start = report.block.find(head)
            if start == -1:
                message = (
                    f"rule {decision.name!r} applies but does not fit the rules budget "
                    f"({rules_budget}, {budget}){when}: it is left out"
                )
                findings.append(Finding("budget-drops-rule", "error", decision.path, message))
                continue
            end = report.block.find("\n</rule>\n", start)
            # A cut rule ends with the marker every cut ends with (`core.render`).
            shown = defuse_name(decision.path)
            marker = f" not shown; read_file {shown} for the rest]"
            if marker in report.block[start:end] and "[... truncated: " in report.block[start:end]:
                message = (
                    f"rule {decision.name!r} is cut to fit the rules budget ({rules_budget}){when}"
                )
                findings.append(Finding("budget-truncates-rule", "warning", decision.path, message))
        elif (
            decision.status == "listed"
            and f"(path: {defuse_name(decision.path)})\n" not in report.block
        ):
            message = (
                f"agent-requested rule {decision.name!r} is not listed: the rules budget is "
                f"full ({rules_budget}){when}"
            )
            findings.append(Finding("budget-drops-rule", "warning", decision.path, message))
    return findings


def busiest_findings(loaded: Loaded, keys: Sequence[str], seen: Iterable[Finding]) -> list[Finding]:
    """Budget findings of the model call where a file of every `paths` rule was touched, that
    the plain call did not already show."""
    if not keys:
        return []
    all_keys = [*loaded.report.keys, *keys]
    rendered = loaded.assembler.render_report(loaded.snapshot, keys=all_keys)
    report = report_from(
        loaded.assembler, loaded.snapshot, rendered, keys=all_keys, source=loaded.report.source
    )
    sample = ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else "")
    when = f" when the agent has touched a file of every rule ({sample})"
    known = {(finding.check, finding.path) for finding in seen}
    return [
        finding
        for finding in budget_findings(report, when=when)
        if (finding.check, finding.path) not in known and finding.severity != "info"
    ]


# -- stores -----------------------------------------------------------------------------------


def ping(store: Any, *, timeout: float = STORE_TIMEOUT_SECONDS) -> str | None:
    """Why `store` does not answer a read, or None when it does (bounded: a frozen server
    must not hang the doctor, so the read runs in a daemon thread)."""
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            store.get(PROBE_KEY)
        except BaseException as exc:  # reported, whatever it is
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=read, name="layered-memory-doctor-ping", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        return f"did not answer within {timeout:g} s (frozen, overloaded or cut off?)"
    failure = outcome[0]
    if failure is None:
        return None
    text = str(failure).strip().splitlines()[0] if str(failure).strip() else ""
    return scrub(f"{type(failure).__name__}: {text}" if text else type(failure).__name__, None)


def store_findings(session_store: Any) -> list[Finding]:
    """A session store (each tier of a hybrid one) that does not answer a read."""
    from layered_memory.sessions.stores.hybrid import HybridSessionStore

    if session_store is None:
        return []
    skipped = "the session layer is skipped while it does not answer"
    tiers: list[tuple[str, Any, Severity, str]] = (
        [
            (" L1", session_store.l1, "warning", "reads go to L2 while it does not answer"),
            (" L2", session_store.l2, "error", skipped),
        ]
        if isinstance(session_store, HybridSessionStore)
        else [("", session_store, "error", skipped)]
    )
    findings = []
    for label, tier, severity, consequence in tiers:
        reason = ping(tier)
        if reason is not None:
            name = scrub(repr(tier), None)
            message = f"session store{label}: {reason}; {consequence}"
            findings.append(Finding("store-unreachable", severity, name, message))
    return findings
