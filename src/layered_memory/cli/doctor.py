"""`layered-memory doctor`: one report of everything that makes memory silently absent or wrong.

Memory is loaded and rendered once by the middleware's own code (`_source.loaded_memory`: the
folder, the store namespace, or `--config module:attribute`), then judged by `_checks`:
problems the load reported (missing, unreadable or refused files, rule folders, a root holding
none of the files, and whatever else a load reports, such as `@import` problems), rule files
and globs, rules no file of the project matches, what the budget cuts (for the given call, and
for the call where a file of every rule was touched), stores that do not answer. Exit status:
0 when clean, 1 on findings (errors or warnings; notes do not count), 2 on a usage error.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from layered_memory.cli._checks import (
    CHECKS,
    Finding,
    budget_findings,
    busiest_findings,
    file_match_findings,
    import_findings,
    load_findings,
    project_files,
    rule_findings,
    store_findings,
)
from layered_memory.cli._source import (
    LOAD_ERRORS,
    Loaded,
    SourceOptions,
    disk_root,
    loaded_memory,
    source_options,
)
from layered_memory.cli._store import CliStoreError
from layered_memory.cli._style import SEVERITY_STYLE, Painter, use_colour
from layered_memory.cli._text import dumps_json, printable
from layered_memory.sessions.stores.urls import redact_url, scrub

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

_ORDER = {"error": 0, "warning": 1, "info": 2}


def diagnose(loaded: Loaded) -> tuple[list[Finding], list[dict[str, str]]]:
    """Every finding about the loaded memory, and the checks that could not run (and why)."""
    assembler = loaded.assembler
    skipped: list[dict[str, str]] = []
    findings = [*load_findings(loaded), *import_findings(loaded.snapshot.extras)]
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
    def count(number: int, noun: str) -> str:
        return f"{number} {noun}" if number == 1 else f"{number} {noun}s"

    notes = f", {count(counts['info'], 'note')}" if counts["info"] else ""
    if not counts["error"] and not counts["warning"]:
        return f"doctor: no problems found{notes}"
    return (
        f"doctor: {count(counts['error'], 'error')}, {count(counts['warning'], 'warning')}{notes}"
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
