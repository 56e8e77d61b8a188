"""`layered-memory inspect`: what memory an agent gets, measured from the block it would receive.

Memory is loaded and rendered by `MemoryAssembler`, the engine the middleware runs (with
`--config`, the user's own middleware and assembler), so the block shown is byte for byte the
one a model call would carry; the per-layer sizes are measured on that block. Loading and
measuring: `_source`.

The report is printed as 80-column text (colour on a TTY) or JSON.

JSON (`--json`, `"version": 1`; keys are stable, new keys may be added):

- `source`: `{"kind": "folder", "root"}`, `{"kind": "store", "store" (URL, no password),
  "namespace" (list), "items" (items in the namespace)}`, or `{"kind": "config", "config"
  (the --config value), "module", "attribute", "found" (where the middleware was),
  "middleware" (its class), "backend" (in words), "injected" (false when its
  system_prompt is None: the model gets no block), "input": {"message", "paths", "context",
  "thread_id"}}`
- `keys`: the match keys (`--path`s, then `--entity`, then `--context` values; with
  `--config`, the touched paths then the context strings the middleware's `match_keys` gave)
- `budget`: `{"max_chars", "max_rules_chars", "used_chars", "used_tokens", "share",
  "max_tokens"}` (`max_tokens`: the middleware's token budget, or null)
- `layers[]`: `{"name", "writable", "paths", "chars", "tokens", "block_chars", "block_tokens",
  "share", "files": [{"path", "status", "chars", "tokens", "lines", "reason", "shown",
  "cut_by_lines", "block_chars"}]}` — `share` is `block_chars / max_chars`
- `rules`: `{"folders", "block_chars", "block_tokens", "share", "decisions": [{"name",
  "path", "status", "mode", "reason", "key", "glob"}]}`
- `extras[]`: nested memory files and `@path` imports: `{"kind" ("nested" or "import"),
  "layer", "path", "chars", "block_chars", "shown", "why"}`
- `session`: `{"key", "chars", "tokens", "share"}` of the session layer, or null
- `overhead`: `{"chars", "tokens", "share"}` (template, guidelines, preamble, separators)
- `problems[]`: `{"path", "severity", "reason"}`
- `learned[]`: entries a consolidator wrote into the layer files, with the provenance the block
  does not show: `{"path", "id", "text", "thread", "date", "model", "reviewed"}`
- `memory_report`: the record each model call with this input streams
  (`stream_mode="custom"`, `{"memory": ...}`; keys in `layered_memory.core.report`), or null
  when the middleware injects nothing
- `block`: the exact memory block, as a string

Tokens are approximate: characters / 4, rounded up.
"""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from layered_memory.cli._output import Painter, dumps_json, printable, use_colour
from layered_memory.cli._report import FileReport, InspectReport, LayerReport, shown_of, tokens
from layered_memory.cli._source import LOAD_ERRORS, loaded_memory, source_options
from layered_memory.sessions.stores.urls import scrub

# -- the command ------------------------------------------------------------------------------

EXIT_OK, EXIT_USAGE = 0, 2


def run_inspect(args: Any, *, render: Any) -> int:
    """Run the subcommand; `render(report, args)` prints it. Errors: one line on stderr, 2."""
    failure: str | None = None
    try:
        with loaded_memory(source_options(args)) as loaded:
            report = loaded.report
    except LOAD_ERRORS as exc:
        failure = str(exc)
    if failure is not None:
        print(f"layered-memory inspect: {printable(scrub(failure, None))}", file=sys.stderr)
        return EXIT_USAGE
    render(report, args)
    return EXIT_OK


# -- the report, printed ----------------------------------------------------------------------

WIDTH = 80
BAR_CELLS = 20
LABEL_WIDTH = 30

_STATUS_STYLE = {
    "applied": "green",
    "listed": "cyan",
    "skipped": "dim",
    "replaced": "yellow",
    "invalid": "red",
}

_Painter = Painter


def _share(chars: int, budget: int) -> float:
    return round(chars / budget, 4) if budget else 0.0


def _bar(chars: int, budget: int) -> str:
    cells = round(BAR_CELLS * chars / budget) if budget else 0
    if chars and not cells:
        cells = 1  # visible, however small
    cells = min(cells, BAR_CELLS)
    return "[" + "#" * cells + "." * (BAR_CELLS - cells) + "]"


def _wrap(text: str, indent: int, hanging: int | None = None) -> list[str]:
    """`text` wrapped to 80 columns (long paths are broken rather than overflowing)."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent if hanging is None else hanging),
        break_on_hyphens=False,
    ) or [" " * indent]


def _fit(label: str, width: int) -> str:
    return label if len(label) <= width else label[: width - 1] + "~"


def _row(label: str, chars: int, budget: int, paint: _Painter, style: str | None = None) -> str:
    """`  label   chars  ~tokens  [bar]  pct%` in 79 columns."""
    text = _fit(label, LABEL_WIDTH - 2)
    styled = paint(text, style) if style else text
    padding = " " * (LABEL_WIDTH - 2 - len(text))
    share = f"{100 * chars / budget:5.1f}%" if budget else "  -  "
    numbers = f"{chars:>9,} {tokens(chars):>8,}  "
    return f"  {styled}{padding}{numbers}{paint(_bar(chars, budget), 'cyan')} {share}"


def _file_line(file: FileReport, layer: LayerReport) -> str:
    path = printable(file.path)
    if file.status == "missing":
        state = "missing"
        shown = "nothing shown" if not layer.layer.writable else "the block says where to write"
        return f"{path}: {state}; {shown}"
    if file.status == "skipped":
        return f"{path}: skipped: {printable(file.reason)}"
    size = f"{file.chars:,} chars, {file.lines:,} lines"
    cap = layer.layer.line_cap(file.path)
    shown = {
        "full": "shown in full",
        "truncated": "cut to fit the budget (marker names the file)",
        "lines-capped": f"first {cap} lines shown",
        "omitted": "left out: over the budget (a one-line stub names it)",
        "empty": "empty: the block says where to write",
        "absent": "only comments or blank lines: nothing shown",
    }[file.shown]
    if file.shown == "truncated" and file.cut_by_lines:
        shown = f"first {cap} lines kept, then cut to fit the budget"
    return f"{path}: {size}; {shown}"


_SHOWN_WORDS = {
    "full": "shown in full",
    "truncated": "cut to fit the budget (marker names the file)",
    "lines-capped": "its line cap kept the head",
    "omitted": "left out: over the budget (a one-line stub names it)",
    "empty": "empty",
    "absent": "left out: over the budget",
}


def _layers_section(report: InspectReport, paint: _Painter) -> list[str]:
    budget = report.max_chars
    header = f"{'LAYERS (lowest first)':<{LABEL_WIDTH}}{'chars':>9} {'~tokens':>8}"
    lines = [paint(header, "bold") + "  share of the budget"]
    if not report.layers:
        lines.extend(
            _wrap("none: no AGENTS.md or MEMORY.md found; describe layers with --layer", 2)
        )
    for layer in report.layers:
        access = "writable" if layer.layer.writable else "read-only"
        label = f"{printable(layer.layer.name)} ({access})"
        lines.append(_row(label, layer.block_chars, budget, paint, "bold"))
        for file in layer.files:
            lines.extend(_wrap(_file_line(file, layer), 4, 6))
    for piece in report.extras:
        label = f"{piece.kind}: {printable(piece.path)}"
        lines.append(
            _row(label, piece.shown_chars if piece.outcome != "dropped" else 0, budget, paint)
        )
        shown, _ = shown_of(piece)
        lines.extend(_wrap(f"{printable(piece.layer)}: {_SHOWN_WORDS[shown]}", 4, 6))
    applied = sum(d.status == "applied" for d in report.decisions)
    listed = sum(d.status == "listed" for d in report.decisions)
    rules_label = f"rules ({applied} applied, {listed} listed)"
    lines.append(_row(rules_label, report.rules_block_chars, budget, paint))
    if report.session_key is not None:
        label = f"session ({printable(report.session_key)})"
        lines.append(_row(label, report.session_block_chars, budget, paint))
    lines.append(_row("template + guidelines", report.overhead_chars, budget, paint))
    lines.append(_row("total block", len(report.block), budget, paint, "bold"))
    lines.append("  tokens are approximate: characters / 4")
    return lines


def _rules_section(report: InspectReport, paint: _Painter) -> list[str]:
    if not report.rule_folders:
        return [
            paint("RULES", "bold"),
            *_wrap("none: no rule folder found; pass --rules FOLDER", 2),
        ]
    lines = [paint("RULES", "bold") + " (folders lowest precedence first)"]
    lines.extend(_wrap(", ".join(printable(folder) for folder in report.rule_folders), 2))
    keys = ", ".join(printable(repr(key)) for key in report.keys) if report.keys else "none"
    lines.extend(_wrap(f"match keys: {keys}", 2, 4))
    if not report.decisions:
        lines.append("  no rule files")
    for decision in report.decisions:
        style = _STATUS_STYLE.get(decision.status, "dim")
        name, path = printable(decision.name), printable(decision.path)
        head = _wrap(f"{decision.status:<9} {name}  {path}", 2, 12)
        head[0] = head[0].replace(decision.status, paint(decision.status, style), 1)
        lines.extend(head)
        lines.extend(_wrap(printable(decision.reason), 12))
    return lines


def _problems_section(report: InspectReport, paint: _Painter) -> list[str]:
    if not report.problems:
        return [paint("PROBLEMS", "bold") + " none"]
    lines = [paint("PROBLEMS", "bold") + " (files skipped, or used with a warning)"]
    for problem in report.problems:
        severity = paint(problem.severity, "red" if problem.severity == "error" else "yellow")
        path, reason = printable(problem.path), printable(problem.reason)
        wrapped = _wrap(f"{path}: {problem.severity}: {reason}", 2, 4)
        lines.extend(line.replace(problem.severity, severity, 1) for line in wrapped)
    return lines


def _learned_section(report: InspectReport, paint: _Painter) -> list[str]:
    if not report.learned:
        return []
    lines = [
        paint("LEARNED", "bold")
        + " (written by consolidation; provenance from HTML comments the model never sees)"
    ]
    for entry in report.learned:
        head = f"{printable(entry.path)} [{printable(entry.id or '?')}] {printable(entry.text)}"
        lines.extend(_wrap(head, 2, 4))
        origin = [
            f"thread {entry.thread}" if entry.thread else "",
            entry.date or "",
            f"model {entry.model}" if entry.model else "",
            f"reviewed {entry.reviewed}" if entry.reviewed else "",
        ]
        if any(origin):
            lines.extend(_wrap(printable(", ".join(part for part in origin if part)), 6, 6))
    return [*lines, ""]


_RULE_WHY = {
    "always": "always applies",
    "path": "a path matched",
    "key": "a match key named it",
}


def _token_budget_lines(report: InspectReport) -> list[str]:
    """The block's `max_tokens=`, as the model call counts it (the line above is in chars)."""
    record = report.memory_report
    if record is None or record["unit"] != "tokens":
        return []
    line = (
        f"token budget: {record['total']:,} of max_tokens={record['budget']:,}, counted by "
        f"{printable(record['counter'])}"
    )
    return _wrap(line, 0, 2)


def _call_section(report: InspectReport, paint: _Painter) -> list[str]:
    """The record a model call streams, in words: what it was given and why."""
    record = report.memory_report
    if record is None:
        return []
    lines = [
        paint("WHAT A MODEL CALL REPORTS", "bold") + ' (stream_mode="custom", {"memory": ...})'
    ]
    for entry in record["files"]:
        state = f"cut: {'; '.join(entry['why'])}" if entry["cut"] else "whole"
        if entry["outcome"] in ("stub", "dropped"):
            state = f"{entry['outcome']}: over the budget"
        head = (
            f"{printable(entry['path'])} ({printable(entry['layer'])}, {entry['access']}): "
            f"{entry['chars']:,} chars shown, {state}"  # `chars` counts chars in any unit
        )
        lines.extend(_wrap(head, 2, 4))
    for rule in record["rules"]:
        why = _RULE_WHY.get(rule["why"], rule["why"])
        if rule["key"] is not None:
            why += f" ({printable(repr(rule['key']))}"
            why += f" ~ {printable(rule['glob'])})" if rule["glob"] else ")"
        lines.extend(_wrap(f"rule {printable(rule['name'])}: {why}", 2, 4))
    lines.append(
        f"  total {record['total']:,} of {record['budget']:,} {record['unit']} (the budget)"
    )
    return [*lines, ""]


def _config_lines(source: dict[str, Any]) -> list[str]:
    given = source["input"]
    found = f"{printable(source['middleware'])} found in {printable(source['found'])}"
    lines = [*_wrap(found, 2, 4), *_wrap(f"backend: {printable(source['backend'])}", 2, 4)]
    message = given["message"]
    if message is not None:
        shown = printable(message)
        lines.extend(_wrap(f"message: {shown[:200] + '...' if len(shown) > 200 else shown}", 2, 4))
    if given["context"]:
        pairs = ", ".join(f"{printable(k)}={printable(v)}" for k, v in given["context"].items())
        lines.extend(_wrap(f"context: {pairs}", 2, 4))
    if given["thread_id"] is not None:
        lines.extend(_wrap(f"thread: {printable(given['thread_id'])}", 2, 4))
    if not source["injected"]:
        lines.extend(
            _wrap(
                "system_prompt=None: the middleware injects no block; memory is only kept in "
                "the state (memory_contents)",
                2,
                4,
            )
        )
    return lines


def render_text(report: InspectReport, *, colour: bool) -> str:
    """The human report: lines of at most 80 columns, except the memory block's own lines."""
    paint = _Painter(colour)
    source = report.source
    config_lines: list[str] = []
    if source["kind"] == "folder":
        where = f"folder {printable(source['root'])}"
    elif source["kind"] == "config":
        where = f"--config {printable(source['config'])}"
        config_lines = _config_lines(source)
    else:
        namespace = printable("/".join(source["namespace"]))
        store = printable(source["store"])
        where = f"store {store}, namespace {namespace} ({source['items']} items)"
    block_chars = len(report.block)
    used = 100 * block_chars / report.max_chars
    lines = [
        *_wrap(paint("layered-memory inspect", "bold") + f": {where}", 0, 2),
        *config_lines,
        f"memory block: {block_chars:,} of {report.max_chars:,} chars ({used:.1f}% of the "
        f"budget), ~{tokens(block_chars):,} tokens",
        *_token_budget_lines(report),
        "",
        *_layers_section(report, paint),
        "",
        *_rules_section(report, paint),
        "",
        *_problems_section(report, paint),
        "",
        *_learned_section(report, paint),
        *_call_section(report, paint),
        paint("MEMORY BLOCK", "bold") + " (exactly what the model receives)",
        paint("-" * 30 + " begin memory block " + "-" * 30, "dim"),
        # Escaped too (tabs and newlines kept): memory is data. --json gives the exact text.
        printable(report.block, multiline=True),
        paint("-" * 31 + " end memory block " + "-" * 31, "dim"),
    ]
    return "\n".join(lines) + "\n"


def report_data(report: InspectReport) -> dict[str, Any]:
    """The report as JSON-ready data (see the module docstring for the keys)."""
    budget = report.max_chars

    def sized(chars: int) -> dict[str, Any]:
        return {"chars": chars, "tokens": tokens(chars), "share": _share(chars, budget)}

    layers = [
        {
            "name": layer.layer.name,
            "writable": layer.layer.writable,
            "paths": list(layer.layer.paths),
            "chars": layer.chars,
            "tokens": tokens(layer.chars),
            "block_chars": layer.block_chars,
            "block_tokens": tokens(layer.block_chars),
            "share": _share(layer.block_chars, budget),
            "files": [
                {
                    "path": file.path,
                    "status": file.status,
                    "chars": file.chars,
                    "tokens": tokens(file.chars),
                    "lines": file.lines,
                    "reason": file.reason,
                    "shown": file.shown,
                    "cut_by_lines": file.cut_by_lines,
                    "block_chars": file.block_chars,
                }
                for file in layer.files
            ],
        }
        for layer in report.layers
    ]
    decisions = [
        {
            "name": d.name,
            "path": d.path,
            "status": d.status,
            "mode": d.mode,
            "reason": d.reason,
            "key": d.key,
            "glob": d.glob,
        }
        for d in report.decisions
    ]
    block = len(report.block)
    return {
        "version": 1,
        "source": report.source,
        "keys": list(report.keys),
        "budget": {
            "max_chars": budget,
            "max_rules_chars": report.max_rules_chars,
            "used_chars": block,
            "used_tokens": tokens(block),
            "share": _share(block, budget),
            "max_tokens": (
                report.memory_report["budget"]
                if report.memory_report and report.memory_report["unit"] == "tokens"
                else None
            ),
        },
        "layers": layers,
        "rules": {
            "folders": list(report.rule_folders),
            "block_chars": report.rules_block_chars,
            "block_tokens": tokens(report.rules_block_chars),
            "share": _share(report.rules_block_chars, budget),
            "decisions": decisions,
        },
        "extras": [
            {
                "kind": piece.kind,
                "layer": piece.layer,
                "path": piece.path,
                "chars": piece.source_chars,
                "block_chars": piece.shown_chars if piece.outcome != "dropped" else 0,
                "shown": shown_of(piece)[0],
                "why": list(piece.why),
            }
            for piece in report.extras
        ],
        "session": (
            {"key": report.session_key, **sized(report.session_block_chars)}
            if report.session_key is not None
            else None
        ),
        "overhead": sized(report.overhead_chars),
        "problems": [
            {"path": p.path, "severity": p.severity, "reason": p.reason} for p in report.problems
        ],
        "learned": [
            {
                "path": entry.path,
                "id": entry.id,
                "text": entry.text,
                "thread": entry.thread,
                "date": entry.date,
                "model": entry.model,
                "reviewed": entry.reviewed,
            }
            for entry in report.learned
        ],
        "memory_report": report.memory_report,
        "block": report.block,
    }


def print_report(report: InspectReport, args: Any) -> None:
    """Print the report to stdout as text (`--json`: as JSON)."""
    if args.json:
        sys.stdout.write(dumps_json(report_data(report)) + "\n")
        return
    sys.stdout.write(render_text(report, colour=use_colour(sys.stdout)))
