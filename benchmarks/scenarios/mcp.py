"""Scenario 14: `read_graph` over MCP stdio, ours (`layered-memory mcp`) against the reference
memory server (`@modelcontextprotocol/server-memory`, pinned in `tests/graph`), on the same
10,000-entity / 30,000-relation file.

Both servers are spawned and driven by the official MCP SDK's client, one session each, the
calls interleaved (ours, theirs, ours, ...): each sample is the client-side wall time of one
`tools/call read_graph`, from the request to the parsed, schema-checked result. The reference
server reads and parses the file on every call; ours checks its stat signature (an unchanged
file is not read again) and keeps `read_graph`'s answer per content version. The target is the
issue's, on one unchanged file: at most 2x the reference's median. A third row changes the
file before each call (ours then parses and writes the new version once): information.
"""

from __future__ import annotations

import functools
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import fmt_ns
from benchmarks.scenarios.graph import SIZES, write_graph

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests/graph/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
TARGET = 2.0
"""Our median `read_graph` at most this many times the reference server's."""


def _calls(plan: Plan) -> int:
    return {"full": 41, "quick": 15}.get(plan.name, 3)


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Time `read_graph` through both servers on one file; report the median ratio."""
    title = "15. MCP read_graph"
    node = shutil.which("node")
    if node is None or not REFERENCE.is_file():
        row = Row(
            f"{title}: ours vs reference server",
            None,
            None,
            f"ratio <= {TARGET}",
            "unavailable",
            ours_text="node or tests/graph/node_modules missing",
        )
        return ScenarioResult("mcp", title, [row], ["Run `make test` (npm ci) first."])
    try:
        import anyio
    except ImportError:  # pragma: no cover - the mcp extra brings anyio
        row = Row(title, None, None, f"ratio <= {TARGET}", "unavailable", ours_text="no mcp")
        return ScenarioResult("mcp", title, [row], ["Install the mcp extra."])
    n_entities, n_relations, _ = SIZES.get(plan.name, SIZES["quick"])
    file = workdir / "memory.jsonl"
    write_graph(file, n_entities, n_relations)
    samples = anyio.run(_measure, node, file, _calls(plan))
    ours, theirs = statistics.median(samples["ours"]), statistics.median(samples["theirs"])
    ratio = ours / theirs
    raw = anyio.run(_measure_raw, node, file, _calls(plan))
    raw_ours, raw_theirs = statistics.median(raw["ours"]), statistics.median(raw["theirs"])
    changed = anyio.run(functools.partial(_measure_raw, node, file, _calls(plan), changing=True))
    new_ours, new_theirs = statistics.median(changed["ours"]), statistics.median(changed["theirs"])
    size = f"{n_entities:,} entities / {n_relations:,} relations"
    facts: dict[str, Any] = {
        "calls": _calls(plan),
        "ratio": ratio,
        "bytes": file.stat().st_size,
        "entities": n_entities,
    }
    rows = [
        Row(
            f"15. MCP read_graph over stdio ({size})",
            ours,
            theirs,
            f"ratio <= {TARGET} (the reference server, not deepagents)",
            verdict(ratio <= TARGET),
            facts=facts,
        ),
        Row(
            "15. MCP read_graph, the servers alone (raw JSON-RPC over the pipes, no client "
            "parsing or schema check)",
            raw_ours,
            raw_theirs,
            f"ratio <= {TARGET}",
            verdict(raw_ours / raw_theirs <= TARGET),
        ),
        Row(
            "15. MCP read_graph, the servers alone, a new version of the file before each call",
            new_ours,
            new_theirs,
            "info (ours parses each new version once, then answers from it)",
            "info",
        ),
    ]
    notes = [
        f"{_calls(plan)} calls per server, interleaved, through the MCP SDK's client over "
        f"stdio; file {file.stat().st_size / 1e6:.1f} MB. Medians: ours {fmt_ns(ours)}, "
        f"reference server {fmt_ns(theirs)} (ratio {ratio:.2f}; min {fmt_ns(min(samples['ours']))}"
        f" vs {fmt_ns(min(samples['theirs']))}). The 'deepagents' column of this row is the "
        "reference server."
    ]
    return ScenarioResult("mcp", title, rows, notes)


def _commands(node: str, file: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    return {
        "ours": (
            [
                sys.executable,
                "-m",
                "layered_memory.cli",
                "mcp",
                "--graph",
                str(file),
                "--read-only",
            ],
            {},
        ),
        "theirs": ([node, str(REFERENCE)], {"MEMORY_FILE_PATH": str(file)}),
    }


async def _measure_raw(
    node: str, file: Path, calls: int, *, changing: bool = False
) -> dict[str, list[float]]:
    """Request written to the server's stdin -> its whole answer line read from its stdout:
    what the server costs, without a client's parsing and output-schema check. `changing`:
    the file gets a new entity before each round (both servers read a new version)."""
    import os
    import subprocess

    import anyio

    samples: dict[str, list[float]] = {"ours": [], "theirs": []}
    processes = {
        side: await anyio.open_process(
            command, env={**os.environ, **env}, stderr=subprocess.DEVNULL
        )
        for side, (command, env) in _commands(node, file).items()
    }
    buffers = dict.fromkeys(processes, b"")

    async def exchange(side: str, message: dict[str, Any], *, answer: bool = True) -> int:
        process = processes[side]
        assert process.stdin is not None
        assert process.stdout is not None
        started = time.perf_counter_ns()
        await process.stdin.send(json.dumps(message).encode() + b"\n")
        while answer and b"\n" not in buffers[side]:
            buffers[side] += await process.stdout.receive(1 << 20)
        if answer:
            _line, _, buffers[side] = buffers[side].partition(b"\n")
        return time.perf_counter_ns() - started

    try:
        for side in processes:
            await exchange(
                side,
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"},
                    },
                },
            )
            await exchange(
                side, {"jsonrpc": "2.0", "method": "notifications/initialized"}, answer=False
            )
        call = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": "read_graph", "arguments": {}},
        }
        for side in processes:  # warm-up
            await exchange(side, {**call, "id": 1})
        base = file.read_text(encoding="utf-8")
        for index in range(calls):
            if changing:
                added = {"type": "entity", "name": f"Round_{index}", "entityType": "round"}
                line = json.dumps({**added, "observations": []}, separators=(",", ":"))
                file.write_text(f"{base}\n{line}", encoding="utf-8")
            order = ("ours", "theirs") if index % 2 == 0 else ("theirs", "ours")
            for side in order:
                samples[side].append(await exchange(side, {**call, "id": index + 2}))
        file.write_text(base, encoding="utf-8")
    finally:
        for process in processes.values():
            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()
    return samples


async def _measure(node: str, file: Path, calls: int) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters

    servers = {
        "ours": StdioServerParameters(
            command=sys.executable,
            args=["-m", "layered_memory.cli", "mcp", "--graph", str(file), "--read-only"],
        ),
        "theirs": StdioServerParameters(
            command=node, args=[str(REFERENCE)], env={"MEMORY_FILE_PATH": str(file)}
        ),
    }
    samples: dict[str, list[float]] = {"ours": [], "theirs": []}
    async with (
        Client(servers["ours"], mode="legacy", read_timeout_seconds=300) as ours,
        Client(servers["theirs"], mode="legacy", read_timeout_seconds=300) as theirs,
    ):
        clients = {"ours": ours, "theirs": theirs}
        for client in clients.values():  # warm-up: imports, JIT, the first parse
            await client.list_tools()
            await client.call_tool("read_graph", {})
        for index in range(calls):
            order = ("ours", "theirs") if index % 2 == 0 else ("theirs", "ours")
            for side in order:
                started = time.perf_counter_ns()
                result = await clients[side].call_tool("read_graph", {})
                samples[side].append(time.perf_counter_ns() - started)
                if result.is_error:
                    msg = f"{side} read_graph failed"
                    raise RuntimeError(msg)
    return samples
