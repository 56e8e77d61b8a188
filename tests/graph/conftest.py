"""Fixtures of the knowledge-graph tests: the MCP reference memory server, driven over stdio.

The server is `@modelcontextprotocol/server-memory`, pinned in `package.json` beside this file
and installed by `make test` when npm exists. Without node or the installed package its tests
skip with the reason, or fail when `LAYERED_MEMORY_REQUIRE_SERVICES=1` (as in CI), like the
Redis and PostgreSQL fixtures.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from graph_mcp_client import McpStdioClient

HERE = Path(__file__).resolve().parent
SERVER_SCRIPT = (
    HERE / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
)
REQUIRE_SERVICES = os.environ.get("LAYERED_MEMORY_REQUIRE_SERVICES", "") not in ("", "0")


def _unavailable(reason: str) -> None:
    message = f"MCP reference memory server unavailable ({reason})"
    if REQUIRE_SERVICES:
        pytest.fail(f"{message}; LAYERED_MEMORY_REQUIRE_SERVICES is set, so this is a failure")
    pytest.skip(f"{message}; run `make test` with npm installed")


@pytest.fixture(scope="session")
def mcp_server_command() -> list[str]:
    """The command starting the pinned reference server (skips without node or the package)."""
    node = shutil.which("node")
    if node is None:
        _unavailable("node is not installed")
    if not SERVER_SCRIPT.is_file():
        _unavailable(f"{SERVER_SCRIPT.relative_to(HERE.parent.parent)} is not installed")
    return [str(node), str(SERVER_SCRIPT)]


@pytest.fixture
def mcp_server(
    mcp_server_command: list[str],
) -> Iterator[Callable[[Path], McpStdioClient]]:
    """Start the reference server on a memory file: `client = mcp_server(path)`."""
    clients: list[McpStdioClient] = []

    def start(memory_file: Path) -> McpStdioClient:
        client = McpStdioClient(mcp_server_command, memory_file)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()
