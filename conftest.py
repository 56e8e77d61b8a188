"""Shared fixtures: real servers (skip on a laptop, required in CI) and small helpers; and the
code blocks of README.md and docs/ as tests.

`LAYERED_MEMORY_REQUIRE_SERVICES=1` (set by `.ci/run`) turns "server unreachable" from a skip
into a failure, so CI can never pass by skipping the Redis and PostgreSQL tests.

Every Python block of README.md and docs/*.md runs (pytest-markdown-docs, `--markdown-docs` in
pyproject's addopts), each in an empty folder of its own, as a reader would run it. A block
needing a server names its fixture (`` ``` {.python fixture:postgres_url} ``): it skips without
one, and fails in CI. A block that cannot run offline is marked `notest` and says why.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_markdown_docs.plugin import MarkdownDocstringCodeModule, MarkdownTextFile

ROOT = Path(__file__).resolve().parent
DOCS = ROOT / "docs"

REQUIRE_SERVICES = os.environ.get("LAYERED_MEMORY_REQUIRE_SERVICES", "") not in ("", "0")
REDIS_URL = os.environ.get("LAYERED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get(
    "LAYERED_MEMORY_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _service_unavailable(what: str, reason: str) -> None:
    message = f"{what} unreachable ({reason})"
    if REQUIRE_SERVICES:
        pytest.fail(f"{message}; LAYERED_MEMORY_REQUIRE_SERVICES is set, so this is a failure")
    pytest.skip(f"{message}; set LAYERED_MEMORY_REQUIRE_SERVICES=1 to make this a failure")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a live Redis server (skips, or fails in CI, when none answers)."""
    try:
        import redis
    except ImportError:  # pragma: no cover - the dev extra installs it
        _service_unavailable("Redis", "the redis package is not installed")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        _service_unavailable(f"Redis at {REDIS_URL}", str(exc))
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a live PostgreSQL server (skips, or fails in CI, when none answers)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the dev extra installs it
        _service_unavailable("PostgreSQL", "the psycopg package is not installed")
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _service_unavailable("PostgreSQL", str(exc).splitlines()[0] if str(exc) else repr(exc))
    return POSTGRES_URL


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[Any]:
    """A new, empty PostgreSQL schema for this test, dropped afterwards (`.name`, `.url`: a
    connection string whose `search_path` is the schema); tests/postgres_schema.py."""
    from postgres_schema import throwaway_schema

    with throwaway_schema(postgres_url) as schema:
        yield schema


@pytest.fixture
def settled_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk caches' clock runs an hour ahead, so files the test just wrote count as
    settled (outside the racy window) without touching their timestamps."""
    from layered_memory.core import disk_cache

    monkeypatch.setattr(disk_cache, "_clock", lambda: time.time_ns() + 3_600 * 10**9)


@pytest.fixture(scope="session", autouse=True)
def private_session_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for module- and session-scoped fixtures, which run before any function-scoped
    one (the hostile cases' child process is started once per module): nothing a test run
    starts ever records into the user's `~/.local/state`."""
    previous = os.environ.get("LAYERED_MEMORY_STATE_DIR")
    os.environ["LAYERED_MEMORY_STATE_DIR"] = str(tmp_path_factory.mktemp("session-state"))
    yield
    if previous is None:
        os.environ.pop("LAYERED_MEMORY_STATE_DIR", None)
    else:
        os.environ["LAYERED_MEMORY_STATE_DIR"] = previous


@pytest.fixture(autouse=True)
def private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test records unrestored read-only memory in a folder of its own, never in the
    user's `~/.local/state` (`core.snapshot`)."""
    monkeypatch.setenv("LAYERED_MEMORY_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(
    file_path: Path,
) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    """Markdown tests come from README.md and docs/ only: not from docstrings (the plugin
    imports every `.py` file it is given for them) nor from the real rule files kept as test
    data under tests/."""
    collected = yield
    return [
        node
        for node in collected
        if not isinstance(node, MarkdownDocstringCodeModule)
        and (not isinstance(node, MarkdownTextFile) or _documentation(file_path))
    ]


def _documentation(path: Path) -> bool:
    return path == ROOT / "README.md" or path.is_relative_to(DOCS)


@pytest.fixture(autouse=True)
def empty_folder_for_markdown(request: pytest.FixtureRequest) -> None:
    """A code block of the docs runs in an empty folder, as written: it creates its files."""
    if request.node.get_closest_marker("markdown-docs"):
        folder = request.getfixturevalue("tmp_path")
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.chdir(folder)
        # pytest-markdown-docs turns pytest's output capture off while a block runs, so
        # what a page's example prints landed between the progress dots of `make test`:
        # keep it captured (shown with a failure, as for any test).
        capman = request.config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            monkeypatch.setattr(capman, "global_and_fixture_disabled", contextlib.nullcontext)
