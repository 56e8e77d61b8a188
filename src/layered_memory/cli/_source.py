"""Where memory comes from for `inspect`, `doctor`, `review` and `lint --config`: a folder, a
store namespace, or the user's own middleware (`--config module:attribute`), loaded and rendered
for one model call by the code the middleware runs, and measured. Sections, in import order:


- `--config module:attribute`: the user's own `MemoryMiddleware`, found where their agent keeps it.

As `uvicorn app:app` does, the module is imported from the current folder and `sys.path`
(`myapp.agent:agent`), or from a file (`path/to/agent.py:agent`); the attribute may be dotted.
What it names may be:

- a `MemoryMiddleware`;
- a compiled agent (`create_agent` / `create_deep_agent` result): LangChain adds a graph node
  per middleware hook, `"<name>.before_agent"`, whose callable is the middleware's bound
  method, so the instance is read from the graph's builder (`langchain/agents/factory.py`);
- a list or tuple holding one (the `middleware=[...]` you pass);
- a callable taking no arguments that returns one of those (an app factory).

Importing the module runs its top-level code, as any import does, and a factory is called;
nothing else is: no agent is invoked, no model called, no hook fired. Whatever the module
prints goes to stderr, so `--json` output stays parseable.

- `--store`: what `inspect --store`, `sync`, `graph`, `review` and `tiers` share: opening a
  `PostgresStore`, namespaces, file items.

Memory files live in the store exactly as deepagents' `StoreBackend` keeps them: one item per
file, keyed by its path (`/AGENTS.md`), valued `{"content", "encoding", "created_at",
"modified_at"}`; text is stored as `utf-8`, anything else as `base64`.

- The block a model call would carry, measured: each layer's files, the rules, the problems.

The block is rendered by the middleware's own code (`MemoryAssembler.render_report`), which
also says what became of each part (whole, truncated, left as a stub, dropped, and why); this
module turns that account into per-file verdicts ("shown in full / cut / left out"), so the
sizes describe the bytes the model receives. `inspect` prints the result, `doctor` and `lint`
judge it.

- The preview: what a configured agent's model would get, computed by its own middleware,
  without a run.

`before_agent` loads memory and notes the run's context strings; `wrap_model_call` renders the
block from the state. Here the same steps run on a state built from the command line
(`--message`, `--path`, `--context`, `--thread`) with the middleware's own objects: its
assembler's `load`, its backend (a backend factory is called as the middleware calls it), its
`match_keys`, its block renderer. No hook fires (a `PIPELINE_START` handler could do anything),
no model is called, no graph node runs.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import importlib.util
import inspect
import logging
import os
import posixpath
import re
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.files import LEARNED_MARK
from layered_memory.core.layers import Layer
from layered_memory.core.loading import TOO_DEEP_REASON, download_files_safely
from layered_memory.core.options import MemoryOptions
from layered_memory.core.render import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_RULES_CHARS,
    PieceReport,
    RenderedMemory,
)
from layered_memory.core.state import (
    context_strings,
    match_keys_of,
    merge_paths,
    snapshot_update,
    touched_of,
)
from layered_memory.core.validation import is_backend
from layered_memory.errors import (
    CliStoreError,
    ConfigLoadError,
    PreviewError,
    UsageError,
)
from layered_memory.middleware import MemoryMiddleware
from layered_memory.rules import RuleDecision, list_rule_files
from layered_memory.sessions.stores.urls import driver_detail, password_hint, redact_url, scrub
from layered_memory.writeback.consolidation import learned_entries

# -- --config: the user's own middleware ------------------------------------------------------

WANTED = (
    "a MemoryMiddleware, a compiled agent (create_agent / create_deep_agent) holding one, a "
    "list holding one, or a callable taking no arguments that returns one of those"
)


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The middleware `--config` led to.

    Attributes:
        spec: The `--config` value as given.
        module: The module's name (a file is imported under a name of its own).
        attribute: The dotted attribute.
        middleware: The memory middleware the agent runs.
        found: Where it was found, in words (`"the compiled agent's middleware"`).
        store: The compiled agent's `BaseStore` (`create_agent(store=...)`), which LangGraph
            hands to a backend factory through the runtime; None otherwise.
    """

    spec: str
    module: str
    attribute: str
    middleware: MemoryMiddleware[Any, Any]
    found: str
    store: Any = None


@dataclass(frozen=True, slots=True)
class _Spec:
    text: str
    module: str
    attribute: str
    is_file: bool

    def error(self, message: str) -> ConfigLoadError:
        return ConfigLoadError(
            f"--config {self.text}: {scrub(message, None)}",
            spec=self.text,
            module=self.module,
            attribute=self.attribute,
        )


def parse_spec(text: str) -> _Spec:
    """Split `module:attribute` (or `path/to/file.py:attribute`) and check both parts.

    Raises:
        ConfigLoadError: No `:`, an empty part, or an attribute that is not a dotted name.
    """
    module, sep, attribute = text.rpartition(":")
    if not sep or not module.strip() or not attribute.strip():
        raise ConfigLoadError(
            f"--config {text}: expected MODULE:ATTRIBUTE, e.g. myapp.agent:agent or "
            "path/to/agent.py:agent",
            spec=text,
            module=module or text,
            attribute=attribute or None,
        )
    is_file = module.endswith(".py") or "/" in module or os.sep in module
    spec = _Spec(text, module, attribute, is_file)
    if not all(part.isidentifier() for part in attribute.split(".")):
        raise spec.error(f"attribute {attribute!r} is not a (dotted) Python name")
    if not is_file and not all(part.isidentifier() for part in module.split(".")):
        raise spec.error(
            f"module {module!r} is not a dotted module name (for a file, write path/to/file.py)"
        )
    return spec


@contextlib.contextmanager
def user_code() -> Iterator[None]:
    """Run the user's code with everything it prints on stderr (stdout may carry `--json`).

    Python's `sys.stdout` is redirected, and so is file descriptor 1: a command the module
    runs (`git describe`) or an `os.write(1, ...)` writes there, past `sys.stdout`.
    """
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # what the CLI printed before stays before
    saved: int | None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 (a closed stdout): nothing can leak through it
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            for stream in (sys.__stdout__, sys.stderr):  # bytes the user code left buffered
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    stream.flush()  # type: ignore[union-attr]
            os.dup2(saved, 1)
            os.close(saved)


def error_detail(exc: BaseException) -> str:
    """`Type: first line of the message`, passwords of any URL in it masked."""
    if isinstance(exc, SystemExit):
        return f"sys.exit({exc.code!r})"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return scrub(text, None)


def _where_raised(exc: BaseException) -> str:
    """`(file, line N)` of the innermost frame in a real file, for an import failure."""
    frames = [
        frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename[:1] != "<"
    ]
    if not frames:
        return ""
    frame = frames[-1]
    return f" ({frame.filename}, line {frame.lineno})"


def _failure(spec: _Spec, exc: BaseException) -> ConfigLoadError:
    if isinstance(exc, SystemExit):
        return spec.error(f"importing module {spec.module!r} called {error_detail(exc)}")
    return spec.error(
        f"importing module {spec.module!r} failed: {error_detail(exc)}{_where_raised(exc)}"
    )


def import_module(spec: _Spec) -> ModuleType:
    """Import the module named by `spec` (from the current folder, `sys.path`, or its file).

    Raises:
        ConfigLoadError: The module is not found, or its import raised (the message names the
            exception and where it was raised).
    """
    if spec.is_file:
        return _import_file(spec)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # as `uvicorn app:app` and `python -m` do
    failure: ConfigLoadError | None = None
    try:
        with user_code():
            return importlib.import_module(spec.module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (spec.module == missing or spec.module.startswith(missing + ".")):
            failure = spec.error(
                f"cannot import module {spec.module!r}: no module named {missing!r} (searched "
                f"the current folder {cwd} and sys.path; for a file, write path/to/file.py:"
                f"{spec.attribute})"
            )
        else:
            failure = _failure(spec, exc)
    except (Exception, SystemExit) as exc:
        failure = _failure(spec, exc)
    raise failure


def _import_file(spec: _Spec) -> ModuleType:
    path = Path(spec.module).expanduser()
    if not path.is_file():
        raise spec.error(f"no such file: {spec.module}")
    path = path.resolve()
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else None
    name = name or f"_layered_memory_config_{abs(hash(str(path))):x}"
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise spec.error(f"cannot import {spec.module}: not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    # Its siblings import as they would when the file is run; dataclasses and pickling look
    # the module up by name while it executes.
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    sys.modules[name] = module
    failure: ConfigLoadError | None = None
    try:
        with user_code():
            loader_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        failure = _failure(spec, exc)
    if failure is not None:
        raise failure
    return module


def _attribute(spec: _Spec, module: ModuleType) -> Any:
    value: Any = module
    walked: list[str] = []
    for part in spec.attribute.split("."):
        where = f"module {spec.module!r}" if not walked else f"{spec.module}:{'.'.join(walked)}"
        failure: ConfigLoadError | None = None
        try:
            value = getattr(value, part)
        except AttributeError:
            hint = _candidates(module) if not walked else ""
            failure = spec.error(f"{where} has no attribute {part!r}{hint}")
        except (Exception, SystemExit) as exc:  # a property or a lazy proxy of the user's
            failure = spec.error(
                f"reading {spec.module}:{'.'.join([*walked, part])} raised "
                f"{error_detail(exc)}{_where_raised(exc)}"
            )
        if failure is not None:
            raise failure
        walked.append(part)
    return value


def _candidates(module: ModuleType) -> str:
    """`; it has: memory (MemoryMiddleware), agent (a compiled agent)` when something fits."""
    found = []
    for name, value in sorted(vars(module).items()):
        if name.startswith("_"):
            continue
        if isinstance(value, MemoryMiddleware):
            found.append(f"{name} ({type(value).__name__})")
        elif _builder(value) is not None:
            found.append(f"{name} (a compiled agent)")
    return f"; it has: {', '.join(found[:8])}" if found else ""


# -- finding the middleware ---------------------------------------------------------------------


def _builder(value: Any) -> Any:
    """The `StateGraph` behind a compiled agent (also through `with_config`), or None."""
    try:
        return _builder_of(value)
    except Exception:  # a lazy proxy that raises on any attribute is no agent
        return None


def _builder_of(value: Any) -> Any:
    value = getattr(value, "bound", value)  # a RunnableBinding around the compiled graph
    builder = getattr(value, "builder", None)
    if (
        builder is None
        and hasattr(value, "compile")
        and isinstance(getattr(value, "nodes", None), dict)
    ):
        builder = value  # an uncompiled StateGraph
    nodes = getattr(builder, "nodes", None)
    return builder if isinstance(nodes, dict) else None


def _node_owners(builder: Any) -> list[Any]:
    """The objects whose bound methods are the graph's nodes (the middleware instances)."""
    owners: dict[int, Any] = {}
    for spec in builder.nodes.values():
        runnable = getattr(spec, "runnable", spec)
        for attribute in ("func", "afunc"):
            owner = getattr(getattr(runnable, attribute, None), "__self__", None)
            if owner is not None:
                owners.setdefault(id(owner), owner)
    return list(owners.values())


def _is_deepagents_memory(value: Any) -> bool:
    kind = type(value)
    return kind.__name__ == "MemoryMiddleware" and kind.__module__.startswith("deepagents.")


def _search(value: Any) -> tuple[list[tuple[MemoryMiddleware[Any, Any], str]], list[Any]]:
    """Memory middlewares in `value` with where each was, and the other objects looked at."""
    if isinstance(value, MemoryMiddleware):
        return [(value, "the attribute itself")], []
    builder = _builder(value)
    if builder is not None:
        owners = _node_owners(builder)
        hits = [
            (o, "the compiled agent's middleware")
            for o in owners
            if isinstance(o, MemoryMiddleware)
        ]
        return hits, [o for o in owners if not isinstance(o, MemoryMiddleware)]
    if isinstance(value, list | tuple):
        hits = [
            (item, f"item {index} of the {type(value).__name__}")
            for index, item in enumerate(value)
            if isinstance(item, MemoryMiddleware)
        ]
        return hits, [item for item in value if not isinstance(item, MemoryMiddleware)]
    return [], []


def _describe(value: Any, others: list[Any]) -> str:
    """What was found instead of a memory middleware, in words."""
    from langchain.agents.middleware import AgentMiddleware

    names = sorted({type(o).__name__ for o in others if isinstance(o, AgentMiddleware)})
    listed = f" (its middleware: {', '.join(names[:12])})" if names else ""
    if _builder(value) is not None:
        return f"a compiled agent ({type(value).__name__}) with no MemoryMiddleware{listed}"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)} items, none a MemoryMiddleware{listed}"
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__qualname__}, not an instance of it"
    if isinstance(value, ModuleType):
        return f"the module {value.__name__}"
    if isinstance(value, str | bytes | int | float | bool):
        shown = repr(value)
        return f"a {type(value).__name__} ({shown[:60] + '...' if len(shown) > 60 else shown})"
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__}"


def _takes_no_arguments(value: Any) -> bool:
    try:
        inspect.signature(value).bind()
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): try calling it
        return True
    return True


def find_memory(spec: _Spec, value: Any) -> tuple[MemoryMiddleware[Any, Any], str, Any]:
    """The one memory middleware `value` is or holds (calling a zero-argument factory once).

    Raises:
        ConfigLoadError: None found, several found, or the factory failed; the message says
            what was found instead.
    """
    hits, others = _search(value)
    label = f"{spec.module}:{spec.attribute}"
    if not hits and callable(value) and not isinstance(value, type) and _builder(value) is None:
        if not _takes_no_arguments(value):
            raise spec.error(f"{label} is a callable that needs arguments; --config takes {WANTED}")
        failure: ConfigLoadError | None = None
        try:
            with user_code():
                value = value()
        except (Exception, SystemExit) as exc:  # a factory's sys.exit(0) is no clean check
            verb = "called" if isinstance(exc, SystemExit) else "raised"
            failure = spec.error(
                f"calling {label}() {verb} {error_detail(exc)}{_where_raised(exc)}"
            )
        if failure is not None:
            raise failure
        hits, others = _search(value)
        hits = [(middleware, f"{where}, returned by {label}()") for middleware, where in hits]
        label = f"{label}()"
    if not hits and any(_is_deepagents_memory(other) for other in [value, *others]):
        raise spec.error(
            f"{label} holds deepagents' own MemoryMiddleware (deepagents.middleware.memory), "
            "not layered-memory's: use layered_memory.MemoryMiddleware(backend=..., "
            "sources=[...]) (a drop-in), and pass memory=[] with middleware=[memory] to "
            "create_deep_agent"
        )
    if not hits:
        raise spec.error(f"{label} is {_describe(value, others)}; expected {WANTED}")
    if len({id(middleware) for middleware, _ in hits}) > 1:
        where = ", ".join(found for _, found in hits)
        raise spec.error(
            f"{label} holds {len(hits)} MemoryMiddleware instances ({where}): point --config "
            "at one of them"
        )
    middleware, found = hits[0]
    return middleware, found, getattr(getattr(value, "bound", value), "store", None)


def load_config(text: str) -> LoadedConfig:
    """Import the module of `module:attribute` and find the memory middleware it names.

    Raises:
        ConfigLoadError: Naming the module, the attribute and what was found instead.
    """
    spec = parse_spec(text)
    module = import_module(spec)
    failure: ConfigLoadError | None = None
    try:
        with user_code():  # properties and proxies of the user's objects run while searched
            value = _attribute(spec, module)
            middleware, found, store = find_memory(spec, value)
    except ConfigLoadError:
        raise
    except (Exception, SystemExit) as exc:
        failure = spec.error(
            f"looking for the MemoryMiddleware in {spec.module}:{spec.attribute} raised "
            f"{error_detail(exc)}{_where_raised(exc)}"
        )
    if failure is not None:
        raise failure
    return LoadedConfig(text, module.__name__, spec.attribute, middleware, found, store)


# -- --store: a PostgresStore namespace -------------------------------------------------------

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

CONNECT_TIMEOUT_SECONDS = 5
"""Added to the connection string unless it sets `connect_timeout` itself."""

PAGE_SIZE = 500

# The characters deepagents' StoreBackend allows in a namespace component, but `.`: the
# PostgresStore `--store` names joins components with it and refuses it in a label.
_COMPONENT_RE = re.compile(r"^[A-Za-z0-9\-_@+:~]+$")

INSTALL_HINT = "install the postgres extra: pip install 'layered-memory[postgres]'"


@dataclass(frozen=True, slots=True)
class FileItem:
    """One store item read as a file.

    Attributes:
        key: The item key (the file's backend path, e.g. `/AGENTS.md`).
        data: The file's bytes, or None when the item is not a file item.
        created_at: The item's `created_at`, kept when the file is updated.
    """

    key: str
    data: bytes | None
    created_at: str | None = None


def parse_namespace(text: str) -> tuple[str, ...]:
    """`a/b/c` -> `("a", "b", "c")`, checked as deepagents' `StoreBackend` checks it.

    Raises:
        CliStoreError: An empty component or a character the backend refuses.
    """
    parts = tuple(text.strip().strip("/").split("/"))
    for part in parts:
        if not part or not _COMPONENT_RE.match(part):
            msg = (
                f"invalid namespace {text!r}: use components of letters, digits and - _ @ + : ~ "
                "separated by '/' (e.g. org/acme/project; no '.': PostgresStore's separator)"
            )
            raise CliStoreError(msg)
    return parts


def _conninfo(url: str) -> str:
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError as exc:
        msg = f"--store needs psycopg: {INSTALL_HINT}"
        raise CliStoreError(msg) from exc
    hint = password_hint(url)
    if hint is not None:
        raise CliStoreError(f"invalid store URL {redact_url(url)}: {hint}")
    failure: CliStoreError | None = None
    try:
        if "connect_timeout" in conninfo_to_dict(url):
            return url
        return make_conninfo(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except Exception as exc:  # psycopg.ProgrammingError: a malformed URL
        reason = _first_line(exc, url)
        failure = CliStoreError(f"invalid store URL {redact_url(url)}: {reason}")
    # Raised outside the `except`: psycopg's exception quotes the whole URL, password included,
    # and must not even ride along as `__context__`.
    raise failure


def _first_line(exc: BaseException, url: str) -> str:
    text = str(exc).strip()
    return driver_detail(text.splitlines()[0], url) if text else type(exc).__name__


def store_failure(url: str, exc: BaseException) -> CliStoreError:
    """A one-line error naming the URL without its password and the driver's first line."""
    reason = _first_line(exc, url)
    if type(exc).__name__ == "UndefinedTable":
        reason = "it has no memory tables yet (run `layered-memory sync push` first)"
    return CliStoreError(f"cannot use the store at {redact_url(url)}: {reason}")


@contextmanager
def open_store(url: str) -> Iterator[BaseStore]:
    """A `PostgresStore` on `url`, closed on exit; driver errors become `CliStoreError`.

    Raises:
        CliStoreError: psycopg is missing, the URL is malformed, or the server does not answer
            (also when it fails later, inside the `with` block). Never chained to the driver's
            exception, whose text may hold the password.
    """
    try:
        import psycopg
        from langgraph.store.postgres import PostgresStore
    except ImportError as exc:
        msg = f"--store needs langgraph-checkpoint-postgres: {INSTALL_HINT}"
        raise CliStoreError(msg) from exc
    conninfo = _conninfo(url)
    failure: CliStoreError | None = None
    try:
        with PostgresStore.from_conn_string(conninfo) as store:
            yield store
    except psycopg.Error as exc:
        failure = store_failure(url, exc)
    if failure is not None:
        # Inside `with open_store(...)` the driver's exception is still being handled here, so
        # Python attaches it as `__context__` anyway; `from None` keeps it out of tracebacks.
        raise failure from None


def file_item(key: str, value: Any) -> FileItem:
    """Read a store value as deepagents' `StoreBackend` does (legacy list content included)."""
    if not isinstance(value, dict):
        return FileItem(key, None)
    content = value.get("content")
    if isinstance(content, list) and all(isinstance(line, str) for line in content):
        content = "\n".join(content)
    created = value.get("created_at")
    created_at = created if isinstance(created, str) else None
    if not isinstance(content, str):
        return FileItem(key, None, created_at)
    if value.get("encoding", "utf-8") == "base64":
        try:
            return FileItem(key, base64.standard_b64decode(content), created_at)
        except ValueError:
            return FileItem(key, None, created_at)
    return FileItem(key, content.encode("utf-8", "surrogatepass"), created_at)


def file_value(data: bytes, *, created_at: str | None = None) -> dict[str, Any]:
    """The store value for a file's bytes: `utf-8` text when it is text, else `base64`.

    Text with a NUL byte goes as base64 too: PostgreSQL's `jsonb` cannot hold `\\u0000`.
    """
    from deepagents.backends.utils import create_file_data

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        encoded = base64.standard_b64encode(data).decode("ascii")
        return dict(create_file_data(encoded, created_at=created_at, encoding="base64"))
    return dict(create_file_data(text, created_at=created_at, encoding="utf-8"))


def list_file_items(store: BaseStore, namespace: Sequence[str]) -> list[FileItem]:
    """Every item stored exactly in `namespace` (not in namespaces below it), by key.

    `BaseStore.search` matches a namespace prefix; PostgreSQL identifies a namespace by its
    components joined with `.`, so the comparison is made the same way.
    """
    wanted = ".".join(namespace)
    items: list[FileItem] = []
    offset = 0
    while True:
        page = store.search(tuple(namespace), limit=PAGE_SIZE, offset=offset)
        items.extend(
            file_item(str(item.key), item.value)
            for item in page
            if ".".join(item.namespace) == wanted
        )
        if len(page) < PAGE_SIZE:
            break
        offset += PAGE_SIZE
    return sorted(items, key=lambda item: item.key)


# -- the block, measured ----------------------------------------------------------------------

Shown = Literal["full", "truncated", "lines-capped", "omitted", "empty", "absent"]
FileStatus = Literal["loaded", "missing", "skipped"]


@dataclass(frozen=True, slots=True)
class FileReport:
    """One file of a layer: what was read and how much of it reached the block.

    Attributes:
        path: The configured path.
        status: `loaded`, `missing` (no such file) or `skipped` (see `reason`).
        chars: Characters read (0 unless loaded).
        lines: Lines read (0 unless loaded).
        reason: Why it was skipped.
        shown: `full`, `truncated` (cut to the budget), `lines-capped` (line cap),
            `omitted` (a one-line stub: over the budget), `empty` (a writable file with nothing
            yet: the block says where to write), `absent` (not in the block).
        cut_by_lines: The line cap kept only the head (also when `truncated` afterwards).
        block_chars: Characters of this file's element in the block, tags included.
    """

    path: str
    status: FileStatus
    chars: int
    lines: int
    reason: str | None
    shown: Shown
    cut_by_lines: bool
    block_chars: int


@dataclass(frozen=True, slots=True)
class LayerReport:
    """One layer: its files and its share of the block."""

    layer: Layer
    files: tuple[FileReport, ...]

    @property
    def chars(self) -> int:
        return sum(file.chars for file in self.files)

    @property
    def block_chars(self) -> int:
        return sum(file.block_chars for file in self.files)


@dataclass(frozen=True, slots=True)
class Problem:
    """A file skipped (`error`) or used with a warning."""

    path: str
    severity: str
    reason: str


@dataclass(frozen=True, slots=True)
class LearnedEntry:
    """A learned entry of a layer file, with the provenance the block does not show (the
    loader strips the HTML comment that keeps it)."""

    path: str
    id: str | None
    text: str
    thread: str | None
    date: str | None
    model: str | None
    reviewed: str | None


@dataclass(frozen=True, slots=True)
class InspectReport:
    """Everything `inspect` prints, in both the human and the JSON form."""

    source: dict[str, Any]
    keys: tuple[str, ...]
    max_chars: int
    max_rules_chars: int
    layers: tuple[LayerReport, ...]
    rule_folders: tuple[str, ...]
    decisions: tuple[RuleDecision, ...]
    rules_block_chars: int
    problems: tuple[Problem, ...]
    block: str
    session_key: str | None = None
    session_block_chars: int = 0
    extras: tuple[PieceReport, ...] = ()
    """Nested memory files and `@path` imports, as the renderer placed them."""
    learned: tuple[LearnedEntry, ...] = ()
    """Entries consolidation wrote into the layer files, with their provenance."""

    @property
    def extras_block_chars(self) -> int:
        """Characters of the nested and imported files' elements in the block."""
        return sum(piece.shown_chars for piece in self.extras if piece.outcome != "dropped")

    @property
    def overhead_chars(self) -> int:
        """Template, guidelines, preamble and separators: the block minus layers, rules and
        the session layer."""
        used = (
            sum(layer.block_chars for layer in self.layers)
            + self.rules_block_chars
            + self.session_block_chars
            + self.extras_block_chars
        )
        return len(self.block) - used


def tokens(chars: int) -> int:
    """Approximate tokens: one per 4 characters, rounded up."""
    return (chars + 3) // 4


def shown_of(piece: PieceReport | None, *, unreadable: bool = False) -> tuple[Shown, bool]:
    """The verdict on one file's part of the block, and whether its line cap cut it."""
    cut_by_lines = piece is not None and any("max_lines" in why for why in piece.why)
    shown: Shown
    if piece is None or piece.outcome == "dropped":
        shown = "absent"
    elif piece.outcome == "stub":
        shown = "omitted"
    elif piece.kind == "note" and not unreadable:
        shown = "empty"
    elif piece.outcome == "truncated" and not (cut_by_lines and len(piece.why) == 1):
        shown = "truncated"
    elif cut_by_lines:
        shown = "lines-capped"
    else:
        shown = "full"
    return shown, cut_by_lines


def _file_report(
    path: str,
    snapshot: MemorySnapshot,
    problems: Mapping[str, str],
    piece: PieceReport | None,
) -> FileReport:
    """One file of a layer, from the renderer's own account of its part of the block."""
    text = snapshot.files.get(path)
    status: FileStatus = "loaded" if text is not None else "missing"
    if text is None and path in problems:
        status = "skipped"  # a loaded file's problems (a missing @import) are listed apart
    shown, cut_by_lines = shown_of(piece, unreadable=path in snapshot.unreadable)
    return FileReport(
        path=path,
        status=status,
        chars=len(text) if text is not None else 0,
        lines=(text.count("\n") + (0 if text.endswith("\n") else 1)) if text else 0,
        reason=problems.get(path),
        shown=shown,
        cut_by_lines=cut_by_lines,
        block_chars=piece.shown_chars if piece is not None and piece.outcome != "dropped" else 0,
    )


def _layer_reports(
    assembler: MemoryAssembler, snapshot: MemorySnapshot, rendered: RenderedMemory
) -> tuple[LayerReport, ...]:
    problems = {problem.path: problem.reason for problem in snapshot.problems}
    pieces = {
        (piece.layer, piece.path): piece
        for piece in rendered.pieces
        if piece.kind in ("layer", "note")
    }
    return tuple(
        LayerReport(
            layer,
            tuple(
                _file_report(path, snapshot, problems, pieces.get((layer.name, path)))
                for path in assembler.files_of(layer, snapshot)
            ),
        )
        for layer in assembler.layers
    )


def _learned(assembler: MemoryAssembler, snapshot: MemorySnapshot) -> tuple[LearnedEntry, ...]:
    found: list[LearnedEntry] = []
    layers = assembler.layers
    for path in dict.fromkeys(p for layer in layers for p in assembler.files_of(layer, snapshot)):
        text = snapshot.files.get(path)
        if text is None or LEARNED_MARK not in text:
            continue
        found.extend(
            LearnedEntry(
                path=path,
                id=entry.get("id"),
                text=entry["text"],
                thread=entry.get("thread"),
                date=entry.get("date"),
                model=entry.get("model"),
                reviewed=entry.get("reviewed"),
            )
            for entry in learned_entries(text)
        )
    return tuple(found)


def _chars(rendered: RenderedMemory, kind: str) -> int:
    return sum(
        piece.shown_chars
        for piece in rendered.pieces
        if piece.kind == kind and piece.outcome != "dropped"
    )


def report_from(
    assembler: MemoryAssembler,
    snapshot: MemorySnapshot,
    rendered: RenderedMemory,
    *,
    keys: Sequence[str],
    source: dict[str, Any],
    block: str | None = None,
) -> InspectReport:
    """Measure the block `assembler` rendered from `snapshot` (`render_report`) layer by layer,
    and explain the rules for `keys`.

    Args:
        assembler: The assembler that rendered it.
        snapshot: What it loaded.
        rendered: `assembler.render_report(snapshot, keys=keys)`.
        keys: The rule match keys of the call.
        source: Where memory came from (printed as is).
        block: The block as the middleware injects it, when it was rendered through the
            middleware's own function (the same text as `rendered.block`); default
            `rendered.block`.
    """
    rule_set = assembler.rule_set(snapshot.rule_files)
    decisions = (
        tuple(rule_set.explain(keys, root=assembler.rule_root)) if rule_set is not None else ()
    )
    # An import chain cut at the depth limit is reported from `extras.too_deep` (doctor's
    # import-too-deep check, lint's import problems), not twice.
    problems = [
        Problem(p.path, "error", p.reason) for p in snapshot.problems if p.reason != TOO_DEEP_REASON
    ]
    if rule_set is not None:
        problems.extend(Problem(p.path, p.severity, p.reason) for p in rule_set.problems)
    return InspectReport(
        source=source,
        keys=tuple(keys),
        max_chars=assembler.max_chars,
        max_rules_chars=assembler.max_rules_chars,
        layers=_layer_reports(assembler, snapshot, rendered),
        rule_folders=tuple(assembler.rule_folders),
        decisions=decisions,
        rules_block_chars=_chars(rendered, "rules"),
        problems=tuple(sorted(problems, key=lambda p: (p.path, p.severity, p.reason))),
        block=rendered.block if block is None else block,
        session_key=snapshot.session.key if snapshot.session else None,
        session_block_chars=_chars(rendered, "session"),
        extras=tuple(piece for piece in rendered.pieces if piece.kind in ("nested", "import")),
        learned=_learned(assembler, snapshot),
    )


# -- one model call, previewed ----------------------------------------------------------------


class RunContext(dict[str, Any]):
    """`--context key=value` pairs as the runtime context: a mapping (what `match_keys` names
    are looked up in) that also answers attribute access (`runtime.context.user_id`), as a
    dataclass `context_schema` would."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True, slots=True)
class AgentInput:
    """One model call's input, as the command line describes it.

    Attributes:
        message: The user's message (the state's `messages`), if given.
        paths: Files the agent's tools touched in the thread (rule match keys).
        context: The run's context (`context=` of `invoke`), by name.
        thread_id: The thread (`config["configurable"]["thread_id"]`): the session layer's key.
    """

    message: str | None = None
    paths: tuple[str, ...] = ()
    context: Mapping[str, str] = field(default_factory=dict)
    thread_id: str | None = None

    def as_data(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "message": self.message,
            "paths": list(self.paths),
            "context": dict(self.context),
            "thread_id": self.thread_id,
        }


@dataclass(frozen=True, slots=True)
class Preview:
    """What the model's system message would carry.

    Attributes:
        snapshot: What the middleware's load read.
        keys: The rule match keys of the call (touched paths, then context strings).
        block: The text appended to the system message ("" when `system_prompt=None`).
        rendered: The same block with the renderer's account of each part (`render_report`).
        backend: The backend the load read through (a factory's product, or the fixed one).
        injected: Whether the middleware injects a block at all (`system_prompt` not None).
    """

    snapshot: MemorySnapshot
    keys: tuple[str, ...]
    block: str
    rendered: RenderedMemory
    backend: Any
    injected: bool


def parse_context(pairs: Sequence[str]) -> dict[str, str]:
    """`key=value` options -> a mapping (a later pair with the same key wins).

    Raises:
        ValueError: A pair without `=` or with an empty key.
    """
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            msg = f"--context {pair!r}: expected KEY=VALUE, e.g. --context entity_name=acme_corp"
            raise ValueError(msg)
        context[key.strip()] = value
    return context


def preview(memory: MemoryMiddleware[Any, Any], given: AgentInput, *, store: Any = None) -> Preview:
    """Load and render memory as `memory` would for one model call of a run with this input.

    Args:
        memory: The middleware the agent runs.
        given: The run's input.
        store: The agent's `BaseStore` (`create_agent(store=...)`), handed to a backend factory
            through the runtime as LangGraph would.

    Raises:
        PreviewError: A backend factory or a `match_keys` callable raised.
    """
    state: dict[str, Any] = {"messages": [HumanMessage(given.message)] if given.message else []}
    if given.paths:
        state["memory_touched_paths"] = merge_paths(None, list(given.paths))
    runtime = Runtime(context=RunContext(given.context), store=store)
    config: dict[str, Any] = {"configurable": {}}
    if given.thread_id is not None:
        config["configurable"]["thread_id"] = given.thread_id
    failure: PreviewError | None = None
    try:
        backend = memory._backend(state, runtime, config)  # type: ignore[arg-type]
    except (Exception, SystemExit) as exc:  # the user's factory: a sys.exit is no clean check
        failure = PreviewError(f"the backend factory raised {error_detail(exc)}")
    if failure is not None:
        raise failure
    # As `before_agent` loads at the start of a run in a thread whose tools touched those paths
    # (nested memory is looked up in their folders).
    snapshot = memory.assembler.load(
        session_key=given.thread_id, backend=backend, touched=touched_of(state)
    )
    try:
        context_keys = context_strings(memory.match_keys, state, runtime, config)  # type: ignore[arg-type]
    except (Exception, SystemExit) as exc:
        failure = PreviewError(f"a match_keys callable raised {error_detail(exc)}")
    if failure is not None:
        raise failure
    after = {**state, **snapshot_update(state, snapshot, context_keys)}
    keys = tuple(match_keys_of(after))
    injected = memory.system_prompt is not None
    rendered = memory.assembler.render_report(snapshot, keys=keys)
    # The very function `wrap_model_call` renders with; `rendered` is the same text with the
    # account of each part.
    block = memory._memory_block(after) if injected else ""
    return Preview(
        snapshot=snapshot,
        keys=keys,
        block=block,
        rendered=rendered,
        backend=backend if backend is not None else memory.assembler.backend,
        injected=injected,
    )


def describe_backend(backend: Any) -> str:
    """A backend in words: its class (not the guard's generated one) and where it reads."""
    from deepagents.backends.composite import CompositeBackend
    from deepagents.backends.filesystem import FilesystemBackend

    kind = next(
        (k for k in type(backend).__mro__ if not k.__module__.startswith("layered_memory.")),
        type(backend),
    )
    if isinstance(backend, FilesystemBackend):
        paths = "virtual paths" if backend.virtual_mode else "host paths"
        return f"{kind.__name__} at {backend.cwd} ({paths})"
    if isinstance(backend, CompositeBackend):
        return f"{kind.__name__} (default: {describe_backend(backend.default)})"
    return kind.__name__


# -- loading a source once --------------------------------------------------------------------

DEFAULT_LAYERS = (("project", "/AGENTS.md", False), ("memory", "/MEMORY.md", True))
"""Discovered when no `--layer` is given, lowest precedence first, if the file exists."""

DEFAULT_RULE_FOLDERS = ("/.agents/rules", "/.claude/rules", "/.cursor/rules", "/rules")
"""Discovered when no `--rules` is given, lowest precedence first, if they hold files."""

EXIT_OK, EXIT_USAGE = 0, 2


def backend_path(path: str) -> str:
    """A path as the backends address it: `AGENTS.md` -> `/AGENTS.md`."""
    return path if path.startswith(("/", "~")) else "/" + path


def parse_layers(specs: Sequence[str]) -> list[Layer]:
    """`NAME=PATH[:rw|:ro]` options -> layers; a repeated NAME adds a path to that layer."""
    order: list[str] = []
    paths: dict[str, list[str]] = {}
    writable: dict[str, bool] = {}
    for spec in specs:
        name, sep, rest = spec.partition("=")
        flag = False
        for suffix, value in ((":rw", True), (":ro", False)):
            if rest.endswith(suffix):
                rest, flag = rest[: -len(suffix)], value
        if not sep or not name.strip() or not rest.strip():
            msg = f"--layer {spec!r}: expected NAME=PATH or NAME=PATH:rw"
            raise UsageError(msg)
        name = name.strip()
        if name in writable and writable[name] != flag:
            msg = f"--layer {name}: its paths disagree on ':rw' (a layer is writable or not)"
            raise UsageError(msg)
        if name not in paths:
            order.append(name)
        paths.setdefault(name, []).append(backend_path(rest.strip()))
        writable[name] = flag
    return [Layer(name, paths[name], writable=writable[name]) for name in order]


def discover_layers(backend: Any) -> list[Layer]:
    """The conventional layers whose file exists (one batched download)."""
    responses = download_files_safely(backend, [path for _, path, _ in DEFAULT_LAYERS])
    return [
        Layer(name, path, writable=writable)
        for (name, path, writable), response in zip(DEFAULT_LAYERS, responses, strict=True)
        if getattr(response, "error", None) != "file_not_found"
    ]


def discover_rule_folders(backend: Any) -> list[str]:
    """The conventional rule folders that hold at least one rule file (or a listing problem)."""
    found = []
    for folder in DEFAULT_RULE_FOLDERS:
        files, problems = list_rule_files(backend, [folder])
        if files or problems:
            found.append(folder)
    return found


def build_assembler(
    backend: Any,
    *,
    layers: Sequence[Layer] | None,
    rule_folders: Sequence[str] | None,
    max_chars: int,
    max_rules_chars: int,
    discover: bool = True,
    nested: Sequence[str] = (),
) -> MemoryAssembler:
    """The assembler the options describe (conventional files discovered when not given and
    `discover` is true).

    Raises:
        UsageError: A budget the template does not fit in.
    """
    chosen_layers = list(layers or ()) if layers or not discover else discover_layers(backend)
    folders = (
        list(rule_folders or ()) if rule_folders or not discover else discover_rule_folders(backend)
    )
    try:
        return MemoryAssembler(
            backend=backend,
            layers=chosen_layers,
            rules=folders,
            max_chars=max_chars,
            nested=tuple(nested),
            options=MemoryOptions(max_rules_chars=max_rules_chars),
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


@contextmanager
def quiet_package_logs() -> Iterator[None]:
    """The report lists every problem; keep the same warnings off stderr meanwhile."""
    logger = logging.getLogger("layered_memory")
    handler = logging.NullHandler()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _tool_path(key: str, folder: Path) -> str:
    """A `--path` as a virtual-path backend's file tools name it: `src/app.py` and
    `/srv/project/src/app.py` (below the folder) are both `/src/app.py`."""
    if key.startswith("/"):
        return _virtual_key(key, folder)
    relative = posixpath.normpath(key.replace(os.sep, "/"))
    if key.startswith("~") or relative == "." or relative.startswith(".."):
        return key
    return "/" + relative


def _virtual_key(key: str, folder: Path) -> str:
    """An absolute path below the folder as the agent's file tools name it (`/src/app.py`)."""
    if not key.startswith("/"):
        return key
    try:
        return "/" + Path(key).resolve().relative_to(folder).as_posix()
    except ValueError:
        return key


@dataclass(frozen=True, slots=True)
class Loaded:
    """Memory as one model call would get it, with everything `inspect` and `doctor` look at.

    Attributes:
        assembler: The assembler that loaded and rendered it (the middleware's own with
            `--config`).
        snapshot: What the load read.
        report: The measured block, the rule decisions and the problems.
        backend: The backend the load read through.
        middleware: The user's middleware (`--config` only).
        config: Where `--config` found it (`--config` only).
        given: The model call's input (`--config` only).
        injected: Whether the block reaches the model (a middleware with `system_prompt=None`
            injects nothing).
        store: The memory store `--store` opened (closed when the `with` block ends).
    """

    assembler: MemoryAssembler
    snapshot: MemorySnapshot
    report: InspectReport
    backend: Any
    middleware: Any = None
    config: LoadedConfig | None = None
    given: AgentInput | None = None
    injected: bool = True
    store: Any = None


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Where memory comes from and the model call to render it for (the shared options).

    Exactly one of `config`, `root` (default `.`) and `store_url` is used.
    """

    config: str | None = None
    root: str | None = None
    store_url: str | None = None
    namespace: str | None = None
    layer_specs: Sequence[str] = ()
    rule_folders: Sequence[str] = ()
    nested: Sequence[str] = ()
    paths: Sequence[str] = ()
    entity: str | None = None
    context: Sequence[str] = ()
    message: str | None = None
    thread_id: str | None = None
    max_chars: int | None = None
    max_rules_chars: int | None = None


def source_options(args: Any) -> SourceOptions:
    """The shared options of an argparse namespace (`inspect`, `doctor`)."""
    return SourceOptions(
        config=getattr(args, "config", None),
        root=getattr(args, "root", None),
        store_url=getattr(args, "store", None),
        namespace=getattr(args, "namespace", None),
        layer_specs=getattr(args, "layer", None) or (),
        rule_folders=getattr(args, "rules", None) or (),
        nested=getattr(args, "nested", None) or (),
        paths=getattr(args, "path", None) or (),
        entity=getattr(args, "entity", None),
        context=getattr(args, "context", None) or (),
        message=getattr(args, "message", None),
        thread_id=getattr(args, "thread", None),
        max_chars=getattr(args, "max_chars", None),
        max_rules_chars=getattr(args, "max_rules_chars", None),
    )


@contextmanager
def _lenient(assembler: MemoryAssembler) -> Iterator[None]:
    """`strict=True` would stop at the first problem; the report lists them all instead."""
    strict = assembler.strict
    assembler.strict = False
    try:
        yield
    finally:
        assembler.strict = strict


def _check_config_options(options: SourceOptions) -> None:
    if options.entity:
        msg = (
            "--entity: with --config, give the run's context as --context KEY=VALUE (your "
            "middleware's match_keys read it)"
        )
        raise UsageError(msg)
    by_hand = [
        flag
        for flag, value in (
            ("--layer", options.layer_specs),
            ("--rules", options.rule_folders),
            ("--nested", options.nested),
            ("--namespace", options.namespace),
            ("--max-chars", options.max_chars),
            ("--max-rules-chars", options.max_rules_chars),
        )
        if value
    ]
    if by_hand:
        msg = f"{', '.join(by_hand)}: --config takes these from your middleware; drop them"
        raise UsageError(msg)


def _from_config(options: SourceOptions) -> Loaded:
    _check_config_options(options)
    try:
        context = parse_context(options.context)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    config = load_config(options.config or "")
    memory = config.middleware
    assembler: MemoryAssembler = memory.assembler
    fixed = assembler.backend if is_backend(assembler.backend) else None
    folder = disk_root(fixed)
    paths = tuple(options.paths)
    given = AgentInput(
        message=options.message,
        paths=tuple(_tool_path(p, folder) for p in paths) if folder else paths,
        context=context,
        thread_id=options.thread_id,
    )
    failure: PreviewError | None = None
    try:
        # The user's backend factory, match_keys and backend run here: their prints go to
        # stderr, and an error names the --config it came from.
        with _lenient(assembler), user_code():
            seen = preview(memory, given, store=config.store)
    except PreviewError as exc:
        failure = PreviewError(f"--config {config.spec}: {exc}")
    if failure is not None:
        raise failure
    with _lenient(assembler):
        source = {
            "kind": "config",
            "config": config.spec,
            "module": config.module,
            "attribute": config.attribute,
            "found": config.found,
            "middleware": type(memory).__name__,
            "backend": describe_backend(seen.backend),
            "injected": seen.injected,
            "input": given.as_data(),
        }
        report = report_from(
            assembler,
            seen.snapshot,
            seen.rendered,
            keys=seen.keys,
            source=source,
            block=seen.block,
        )
    return Loaded(
        assembler=assembler,
        snapshot=seen.snapshot,
        report=report,
        backend=seen.backend,
        middleware=memory,
        config=config,
        given=given,
        injected=seen.injected,
    )


def disk_root(backend: Any) -> Path | None:
    """The disk folder behind a virtual-path backend's `/` (also through a `CompositeBackend`'s
    routes); None for other backends. The agent names files of that folder from `/`."""
    from deepagents.backends import FilesystemBackend

    from layered_memory.core.internals import final_route

    if backend is None:
        return None
    serving, _ = final_route(backend, "/")
    if isinstance(serving, FilesystemBackend) and serving.virtual_mode:
        return Path(serving.cwd)
    return None


def _by_hand_keys(options: SourceOptions) -> list[str]:
    if options.message is not None or options.thread_id is not None:
        msg = "--message and --thread need --config (only a configured agent reads them)"
        raise UsageError(msg)
    try:
        context = parse_context(options.context)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return [*options.paths, *([options.entity] if options.entity else []), *context.values()]


def folder_backend(root: str | None) -> tuple[Any, Path]:
    """The virtual-path backend on `--root` (default: this folder), and the folder.

    Raises:
        UsageError: No such folder.
    """
    from deepagents.backends import FilesystemBackend

    folder = Path(root or ".").expanduser().resolve()
    if not folder.is_dir():
        msg = f"--root {root}: no such folder"
        raise UsageError(msg)
    return FilesystemBackend(root_dir=folder, virtual_mode=True), folder


def store_namespace(store_url: str | None, namespace: str | None) -> tuple[str, ...] | None:
    """The `--namespace` of a `--store` (None without `--store`).

    Raises:
        UsageError: One of the two options without the other, or a malformed namespace.
    """
    if store_url is None:
        if namespace is not None:
            msg = "--namespace goes with --store, not --root"
            raise UsageError(msg)
        return None
    if namespace is None:
        msg = "--store needs --namespace (e.g. --namespace org/acme/project)"
        raise UsageError(msg)
    return parse_namespace(namespace)


@contextmanager
def loaded_memory(options: SourceOptions) -> Iterator[Loaded]:
    """Load and render memory from the folder, the store or the `--config` middleware.

    Raises:
        UsageError: Bad options.
        CliStoreError: The store cannot be used.
        ConfigLoadError: `--config` did not lead to a memory middleware.
        PreviewError: The middleware's own code failed on the given input.
    """
    with quiet_package_logs():
        if options.config is not None:
            yield _from_config(options)
            return
        keys = _by_hand_keys(options)
        layers = parse_layers(options.layer_specs)
        folders = [backend_path(folder) for folder in options.rule_folders]
        budgets: dict[str, Any] = {
            "nested": tuple(options.nested),
            "max_chars": DEFAULT_MAX_CHARS if options.max_chars is None else options.max_chars,
            "max_rules_chars": (
                DEFAULT_MAX_RULES_CHARS
                if options.max_rules_chars is None
                else options.max_rules_chars
            ),
        }
        parts = store_namespace(options.store_url, options.namespace)
        if parts is None:
            backend, folder = folder_backend(options.root)
            keys = [_virtual_key(key, folder) for key in keys]
            touched = [_tool_path(path, folder) for path in options.paths]
            assembler = build_assembler(backend, layers=layers, rule_folders=folders, **budgets)
            snapshot = assembler.load(touched=touched)
            rendered = assembler.render_report(snapshot, keys=keys)
            source: dict[str, Any] = {"kind": "folder", "root": str(folder)}
            report = report_from(assembler, snapshot, rendered, keys=keys, source=source)
            yield Loaded(assembler=assembler, snapshot=snapshot, report=report, backend=backend)
            return
        assert options.store_url is not None  # a namespace comes with a store
        with open_store(options.store_url) as store:
            from deepagents.backends import StoreBackend

            # Also fails clearly, before any download, when the store was never set up.
            items = list_file_items(store, parts)
            store_backend = StoreBackend(namespace=lambda _runtime: parts, store=store)
            described: dict[str, Any] = {
                "kind": "store",
                "store": redact_url(options.store_url),
                "namespace": list(parts),
                "items": len(items),
            }
            assembler = build_assembler(
                store_backend, layers=layers, rule_folders=folders, **budgets
            )
            snapshot = assembler.load(touched=[backend_path(path) for path in options.paths])
            rendered = assembler.render_report(snapshot, keys=keys)
            report = report_from(assembler, snapshot, rendered, keys=keys, source=described)
            yield Loaded(
                assembler=assembler,
                snapshot=snapshot,
                report=report,
                backend=store_backend,
                store=store,
            )


LOAD_ERRORS = (UsageError, CliStoreError, ConfigLoadError, PreviewError)
"""What `loaded_memory` raises for the user to fix: one line on stderr, exit status 2."""
