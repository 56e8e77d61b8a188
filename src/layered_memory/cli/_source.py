"""Where memory comes from for `inspect`, `doctor`, `review` and `lint --config`, loaded once.

A folder (`--root`, with `--layer` or the discovered default layers and rule folders), a store
namespace (`--store`, `cli._store`) or the user's own middleware (`--config`, `cli._config`),
loaded by the code the middleware runs; `cli._report` measures the block, `cli._preview` shows
one model call.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layered_memory.cli._config import LoadedConfig, load_config, user_code
from layered_memory.cli._preview import AgentInput, describe_backend, parse_context, preview
from layered_memory.cli._report import InspectReport, report_from
from layered_memory.cli._store import list_file_items, open_store, parse_namespace
from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.layers import Layer
from layered_memory.core.loading import download_files_safely
from layered_memory.core.options import MemoryOptions
from layered_memory.core.render import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_RULES_CHARS,
)
from layered_memory.core.validation import is_backend
from layered_memory.errors import (
    CliStoreError,
    ConfigLoadError,
    PreviewError,
    UsageError,
)
from layered_memory.rules import list_rule_files
from layered_memory.sessions.stores.urls import redact_url

DEFAULT_LAYERS = (("project", "/AGENTS.md", False), ("memory", "/MEMORY.md", True))
"""Discovered when no `--layer` is given, lowest precedence first, if the file exists."""

DEFAULT_RULE_FOLDERS = (
    "/.agents/rules",
    "/.claude/rules",
    "/.cursor/rules",
    "/.github/instructions",
    "/.windsurf/rules",
    "/.devin/rules",
    "/.kiro/steering",
    "/rules",
)
"""Discovered when no `--rules` is given, lowest precedence first, if they hold files (the
legacy single files `.windsurfrules` and `.clinerules` are named with `--rules`)."""

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
            injected=seen.injected,
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
