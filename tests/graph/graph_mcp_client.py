"""A minimal MCP client over stdio (newline-delimited JSON-RPC 2.0), enough to call tools.

A synchronous client for the byte-for-byte comparison with the reference server, which steps
`KnowledgeGraph` and the server in lockstep from plain (sync) tests; `layered-memory mcp` is
tested with the MCP SDK's own client (`test_graph_mcp.py`). Every read has a deadline, so a
server that hangs fails the test instead of freezing it.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from pathlib import Path
from typing import Any

TIMEOUT_S = 60.0


class McpError(Exception):
    """The server answered a request with a JSON-RPC error."""


class McpStdioClient:
    """One server process on one memory file (`MEMORY_FILE_PATH`)."""

    def __init__(self, command: list[str], memory_file: Path) -> None:
        env = {**os.environ, "MEMORY_FILE_PATH": str(memory_file)}
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._ids = iter(range(1, 1_000_000))
        self._buffer = b""
        self._request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "layered-memory-tests", "version": "1"},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Call a tool; return its text content and whether it is an error result."""
        result = self._request("tools/call", {"name": name, "arguments": arguments})
        text = "".join(part["text"] for part in result["content"] if part["type"] == "text")
        return text, bool(result.get("isError"))

    def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools, as `tools/list` returns them."""
        tools: list[dict[str, Any]] = self._request("tools/list", {})["tools"]
        return tools

    def close(self) -> None:
        """Stop the server (closing stdin ends it; killed if it lingers)."""
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout:
            self._process.stdout.close()

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message).encode() + b"\n")
        self._process.stdin.flush()

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = json.loads(self._read_line())
            if message.get("id") != request_id:
                continue  # a notification
            if "error" in message:
                raise McpError(message["error"])
            return message["result"]

    def _read_line(self) -> bytes:
        stdout = self._process.stdout
        assert stdout is not None
        deadline = time.monotonic() + TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    msg = f"the MCP server sent no complete line within {TIMEOUT_S:.0f} s"
                    raise TimeoutError(msg)
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    msg = f"the MCP server exited (code {self._process.poll()})"
                    raise EOFError(msg)
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line
