"""`--config module:attribute`: the user's own `MemoryMiddleware`, found where their agent keeps it.
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
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from layered_memory.errors import (
    ConfigLoadError,
)
from layered_memory.middleware import MemoryMiddleware
from layered_memory.sessions.stores.urls import scrub

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
