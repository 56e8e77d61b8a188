"""The memory engine: load every layer and rule file, then render the prompt block, with caches.

`MemoryMiddleware` is a thin shell around one `MemoryAssembler`; a hand-built LangGraph graph
uses the assembler directly:

Example:
    assembler = MemoryAssembler(backend=FilesystemBackend(root_dir="."), layers=[
        Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)])
    snapshot = assembler.load()
    system_prompt = BASE_PROMPT + "\\n\\n" + assembler.render(snapshot, keys=["src/app.py"])
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from deepagents.backends.filesystem import FilesystemBackend

from layered_memory._logs import get_logger
from layered_memory.core import loading, staleness
from layered_memory.core.disk_cache import (
    DirSignatures,
    DiskReadCache,
    listing_cache_for,
    now_ns,
    read_cache_for,
)
from layered_memory.core.imports import TOO_DEEP_REASON, host_import_scope
from layered_memory.core.layers import (
    Layer,
    check_unique_layer_names,
    in_folder,
)
from layered_memory.core.loading import (
    Discovered,
    DownloadResult,
    MemoryExtras,
    Plan,
    SourceProblem,
    adownload_files_safely,
    adownload_texts,
    digest_texts,
    download_files_safely,
    download_texts,
    report_problems,
)
from layered_memory.core.nested import MAX_NESTED_DIRECTORIES, directories_of
from layered_memory.core.options import MemoryOptions, check_options
from layered_memory.core.path_access import PathAccess, PathAccessIndex
from layered_memory.core.render import (
    CHARS,
    DEFAULT_MAX_CHARS,
    MEMORY_SYSTEM_PROMPT,
    CutCount,
    RenderedMemory,
    SessionEntry,
    minimum_budget,
    render_memory_report,
)
from layered_memory.core.render_cache import LRU, rule_set_for
from layered_memory.core.report import MemoryReport
from layered_memory.core.snapshot import (
    Pinned,
    RunStart,
    disk_modes,
    folder_chains,
    identity_of,
    local_root,
    modes_at,
    text_digest,
    walk_nested,
)
from layered_memory.core.tokens import TokenCounter, fit_block, token_counter
from layered_memory.core.unrestored import Unrestored, left_out
from layered_memory.core.unrestored import entries as recorded_unrestored
from layered_memory.core.validation import (
    check_backend,
    check_bool,
    check_budget,
    check_int,
    check_layers,
    check_names,
    check_path_list,
    check_system_prompt,
)
from layered_memory.errors import SessionStoreError
from layered_memory.recall.entries import RecallQuery
from layered_memory.rules import (
    PARTIAL_LISTING,
    RuleMatch,
    RuleSet,
    alist_rule_files,
    list_rule_files,
    render_rules,
)

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol

    from layered_memory.sessions.stores import SessionStore

logger = get_logger(__name__)

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

SESSION_READ_FAILED = "session layer skipped"
"""How the reason of a snapshot problem for a failed session-store read begins."""


def session_store_label(store: object) -> str:
    """The path of a session-store problem: the store's repr (the stores mask passwords)."""
    return repr(store)


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    """Everything one load read: layer texts, rule texts, session data, and what was skipped.

    Attributes:
        files: Layer path (as configured) -> raw text, for each file that loaded.
        rule_files: Rule file path -> raw text.
        session: The session layer of this run, if a store holds data for its key.
        problems: Files skipped and configuration mistakes, with the reason.
        digest: Changes exactly when anything but `problems` changes.
        unreadable: Layer path -> reason, for layer files that may exist but could not be
            read (a directory, binary, not UTF-8, a backend error): shown to the agent as
            present-but-unreadable, and never overwritten by a whole-file `write_file`.
        extras: Nested memory files and `@path` imports found by this load.
        rule_listing: Every rule file listed, `(folder index, path)`, read or not.
        other_files: The other files the rule folders hold (not rule files).
        modes: Path -> `(normalized disk path, permission bits)` of the local files this
            load stat'ed anyway (the read cache's), for the run-start snapshot.
    """

    files: Mapping[str, str]
    rule_files: Mapping[str, str] = field(default_factory=dict)
    session: SessionEntry | None = None
    problems: tuple[SourceProblem, ...] = ()
    digest: str = ""
    unreadable: Mapping[str, str] = field(default_factory=dict)
    extras: MemoryExtras = field(default_factory=MemoryExtras)
    rule_listing: tuple[tuple[int, str], ...] = ()
    other_files: tuple[str, ...] = ()
    modes: Mapping[str, tuple[str, int]] = field(default_factory=dict, compare=False, repr=False)


class MemoryAssembler:
    """Loads memory through a deepagents backend and renders it into a prompt block.

    Args:
        backend: Any deepagents `BackendProtocol`.
        layers: Lowest to highest precedence.
        rules: Rule folders, lowest to highest precedence.
        session_store: Store whose entry under the session key is the top layer.
        max_chars: Upper bound on the rendered block.
        system_prompt: Template with an `{agent_memory}` slot (`None`: the default one).
        compat: Render in deepagents' flat layout (`sources=` mode).
        strict: Raise on the first unusable file instead of logging and skipping it.
        nested: Names of nested memory files, looked for in every directory from the root down
            to each touched path (the first existing name per directory).
        options: `MemoryOptions`: the rules budget (`max_rules_chars`), whether nested
            memory is writable (`nested_writable`), and `imports`: read `@path` imports in
            memory files, `True` within the backend's root (on a host-path backend: its
            folder, and the folders of layer files that live outside it, such as
            `~/.deepagents/`); `"anywhere"`: any file the backend can read (a cloned
            repository's AGENTS.md could then import `@~/.aws/credentials`); `False`: none;
            `None`: `True`, or `False` with `compat=True` (deepagents reads no imports).
        max_tokens: Upper bound on the rendered block in the model's tokens (`core.tokens`),
            beside `max_chars`; both hold.

    Raises:
        TypeError: An argument of the wrong type (a path where a list goes, a `str` budget),
            with the message `MemoryMiddleware` gives for the same argument.
        ValueError: A value out of range (a budget too small for the template).
    """

    def __init__(
        self,
        *,
        backend: BackendProtocol | Callable[[Any], BackendProtocol],
        layers: Sequence[Layer],
        rules: Sequence[str | os.PathLike[str]] = (),
        session_store: SessionStore | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        system_prompt: str | None = MEMORY_SYSTEM_PROMPT,
        compat: bool = False,
        strict: bool = False,
        nested: Sequence[str] = (),
        options: MemoryOptions | None = None,
        max_tokens: int | None = None,
    ) -> None:
        # The one validation path of the options `MemoryMiddleware` shares (it hands them on
        # unchecked): a mistake fails here, named, not later with a raw error (issue 26:
        # `rules="/.agents/rules"` was read letter by letter, `/` becoming a rule folder).
        template = check_system_prompt(system_prompt) or MEMORY_SYSTEM_PROMPT
        check_backend(backend)
        layer_list = check_layers(layers, Layer)
        if layer_list is None:
            msg = "layers must be a list of Layer objects (layers=[] for none); got None"
            raise TypeError(msg)
        rule_list = check_path_list(rules, parameter="rules") or []
        check_budget(max_chars, least=minimum_budget(template))
        nested = check_names(nested, parameter="nested")
        self.options = options = check_options(options)
        """The settings shared with `MemoryMiddleware` (`MemoryOptions`)."""
        check_unique_layer_names(layer_list)
        self.backend: Any = backend  # a factory is resolved per load (`load(backend=...)`)
        self.layers = tuple(layer_list)
        self.rule_folders = tuple(rule_list)
        self.session_store = session_store
        self.max_chars = max_chars
        self.max_rules_chars = options.max_rules_chars
        # The block's bound in the model's tokens (None: characters only).
        self.max_tokens = (
            None
            if max_tokens is None
            else check_int(max_tokens, parameter="max_tokens", minimum=1, unit="a number of tokens")
        )
        self.list_unmatched_rules = options.list_unmatched_rules
        # Whether a budget is given in tokens (`max_tokens=` or a layer's): worked out once,
        # as every model call asks.
        self.counts_tokens = max_tokens is not None or any(
            layer.max_tokens is not None for layer in self.layers
        )
        self.system_prompt = template
        self.compat = check_bool(compat, parameter="compat")
        self.recalls = not compat and any(layer.recall for layer in self.layers)
        """Whether a layer chooses its entries by relevance (`Layer(..., recall=True)`): only
        then does the latest user message shape the block."""
        self.strict = check_bool(strict, parameter="strict")
        self.nested = tuple(nested)
        """Names of nested memory files, in fallback order (`("AGENTS.md", "CLAUDE.md")`)."""
        self.nested_writable = options.nested_writable
        self.follow_imports = options.follow_imports(sources=compat)
        self.layer_paths = tuple(dict.fromkeys(p for layer in self.layers for p in layer.files))
        """The configured layer files (folder layers' files are known once a load lists them)."""
        self._read_only_paths = frozenset(
            path for layer in self.layers if not layer.writable for path in layer.files
        )
        self._layer_set = frozenset(self.layer_paths)
        self._layer_access: dict[str, loading.Access] = {
            path: ("writable" if layer.writable else "read-only")
            for layer in self.layers
            for path in layer.files
        }
        self.layer_folders: dict[str, loading.Access] = {
            folder: ("writable" if layer.writable else "read-only")
            for layer in self.layers
            for folder in layer.folders
        }
        """Folder layer paths (`/memories/`) and their access."""
        self.read_only_folders = tuple(
            folder for folder, access in self.layer_folders.items() if access == "read-only"
        )
        self._chains: tuple[Any, list[str]] | None = None
        self._paths = PathAccessIndex(backend, self.layers, self.rule_folders)
        self.rule_root = _rule_root(backend)
        """The folder rule globs are matched relative to (`/` for virtual-path backends)."""
        self._import_scope = (
            host_import_scope(self.rule_root, self.layer_paths)
            if self.follow_imports is True and self.rule_root != "/"
            else None
        )
        self._blocks: LRU[tuple[Hashable, ...], tuple[str, MemoryReport]] = LRU(256)
        self._logged: set[tuple[str, str]] = set()
        self._last_load: tuple[tuple[Mapping[str, str] | str | None, ...], str] | None = None
        self._probed_folders: set[str] = set()
        # Local disk: skip re-reading (and re-listing) what has not changed since last time.
        disk = backend if isinstance(backend, FilesystemBackend) else None
        self._disk_cache = read_cache_for(disk) if disk is not None else None
        self._listing_cache = (
            listing_cache_for(disk, self.rule_folders)
            if disk is not None and self.rule_folders
            else None
        )

    # -- loading ----------------------------------------------------------------------------

    def load(
        self,
        *,
        session_key: str | None = None,
        backend: BackendProtocol | None = None,
        touched: Sequence[str] = (),
        pinned: Pinned | None = None,
    ) -> MemorySnapshot:
        """Read every layer, rule file, nested file and import, and the session entry: one
        batched download for the first three, then one per import depth.

        Args:
            session_key: The run's thread id, for the session layer.
            backend: The backend to read through this time (a backend factory's product);
                default: the assembler's own.
            touched: Paths the agent's tools named (where nested memory is looked for).
            pinned: A mid-run load held to the run-start snapshot: read-only memory comes from
                it, and a nested or imported file new to the run must match its digest.
        """
        io = backend if backend is not None else self.backend
        listing = (
            self._pinned_listing(pinned.start)
            if pinned is not None and self._lists_as(pinned.start)
            else self._cached_listing()
        )
        if listing is None:
            taken, started = self._listing_signatures()
            others: list[str] = []
            files, problems = list_rule_files(io, self.rule_folders, others=others)
            listing = (files, problems, tuple(others))
            self._remember_listing(taken, listing, started)
        rule_paths, listing_problems, other_files = listing
        probe = self._folders_to_probe(rule_paths)
        if probe:
            listing_problems = [*listing_problems, *_probe_rule_folders(io, probe)]
        folders = self._folders_to_list(pinned)
        listed, folder_problems = loading.list_folder_layers(io, folders) if folders else ({}, [])
        layer_files, access = self._layer_files(listed, pinned)
        session, session_problem = self._read_session(session_key)
        cache = self._cache_for(io)

        def download(paths: list[str]) -> DownloadResult:
            return download_texts(io, paths, cache=cache)

        plan = self._plan(rule_paths, touched, layer_files, access)
        if pinned is None:
            found = loading.run(plan, download)
            # What an agent changed in an earlier run and the guard could not put back stays
            # out (a pinned load holds what the run started with instead).
            earlier = self._left_out_since_earlier_runs(io, found, rule_paths, access)
        else:
            found = pinned.verified(loading.run(plan, pinned.download(download)))
            earlier = {}
        citing, cited = staleness.citing_files(found.first.texts, _writable_in(access))
        if cited:  # entries citing files (`core.staleness`): one more batched download
            found = _with_stale_marked(found, citing, download(_citable(io, cited)).texts)
        listing = (rule_paths, [*listing_problems, *folder_problems], other_files)
        return self._snapshot(
            found, listing, session, session_problem, earlier=earlier, layer_files=layer_files
        )

    async def aload(
        self,
        *,
        session_key: str | None = None,
        backend: BackendProtocol | None = None,
        touched: Sequence[str] = (),
        pinned: Pinned | None = None,
    ) -> MemorySnapshot:
        """Async twin of `load`."""
        io = backend if backend is not None else self.backend
        # The listing cache's signatures stat the rule folders: in a worker thread.
        listing = (
            self._pinned_listing(pinned.start)
            if pinned is not None and self._lists_as(pinned.start)
            else await asyncio.to_thread(self._cached_listing)
        )
        if listing is None:
            taken, started = await asyncio.to_thread(self._listing_signatures)
            others: list[str] = []
            files, problems = await alist_rule_files(io, self.rule_folders, others=others)
            listing = (files, problems, tuple(others))
            self._remember_listing(taken, listing, started)
        rule_paths, listing_problems, other_files = listing
        probe = self._folders_to_probe(rule_paths)
        if probe:
            listing_problems = [*listing_problems, *await _aprobe_rule_folders(io, probe)]
        folders = self._folders_to_list(pinned)
        listed, folder_problems = (
            await loading.alist_folder_layers(io, folders) if folders else ({}, [])
        )
        layer_files, access = self._layer_files(listed, pinned)
        session, session_problem = await self._aread_session(session_key)
        cache = self._cache_for(io)

        async def download(paths: list[str]) -> DownloadResult:
            return await adownload_texts(io, paths, cache=cache)

        plan = self._plan(rule_paths, touched, layer_files, access)
        if pinned is None:
            found = await loading.arun(plan, download)
            earlier = await asyncio.to_thread(
                self._left_out_since_earlier_runs, io, found, rule_paths, access
            )
        else:
            found = pinned.verified(await loading.arun(plan, pinned.adownload(download)))
            earlier = {}
        citing, cited = staleness.citing_files(found.first.texts, _writable_in(access))
        if cited:
            readable = await asyncio.to_thread(_citable, io, cited)
            found = _with_stale_marked(found, citing, (await download(readable)).texts)
        listing = (rule_paths, [*listing_problems, *folder_problems], other_files)
        return self._snapshot(
            found, listing, session, session_problem, earlier=earlier, layer_files=layer_files
        )

    # -- the run-start snapshot -------------------------------------------------------------

    def run_start(
        self, snapshot: MemorySnapshot, *, backend: BackendProtocol | None = None
    ) -> dict[str, Any]:
        """What a run-start snapshot keeps besides the texts already in the run's state (see
        `core.snapshot`): digests of the nested files of untouched folders and of what they
        import, the rule folders' other files and, on disk, their identities."""
        io = backend if backend is not None else self.backend
        found = self._nested_beyond(snapshot, io) if self.nested else (None, True)
        return self._run_start_data(snapshot, io, found)

    async def arun_start(
        self, snapshot: MemorySnapshot, *, backend: BackendProtocol | None = None
    ) -> dict[str, Any]:
        """Async twin of `run_start` (the walk of the tree runs in a thread)."""
        io = backend if backend is not None else self.backend
        found = await self._anested_beyond(snapshot, io) if self.nested else (None, True)
        if not (self.rule_folders or self.nested or self._read_only_on_disk(io)):
            return self._run_start_data(snapshot, io, found)  # no file system work left
        return await asyncio.to_thread(self._run_start_data, snapshot, io, found)

    def _nested_plan(self, snapshot: MemorySnapshot, io: Any) -> tuple[Plan | None, bool]:
        files, complete = walk_nested(io, self.nested, self.rule_root)
        loaded = snapshot.extras.nested_dirs
        # One file per folder, as the load picks it: folders already looked up are left out.
        touched = [
            f"{os.path.dirname(path)}/-" for path in files if os.path.dirname(path) not in loaded
        ]
        if not touched:
            return None, complete
        if len(directories_of(touched, self.rule_root)) > MAX_NESTED_DIRECTORIES:
            complete = False
        # The layers are planned too (read again from the cache), so a folder holding a layer
        # file is left to its layer exactly as in the run's own load.
        listed = {
            folder: [
                path for path in [*snapshot.files, *snapshot.unreadable] if in_folder(path, folder)
            ]
            for folder in self.layer_folders
        }
        return self._plan((), touched, *self._layer_files(listed, None)), complete

    def _nested_beyond(self, snapshot: MemorySnapshot, io: Any) -> tuple[Discovered | None, bool]:
        plan, complete = self._nested_plan(snapshot, io)
        if plan is None:
            return None, complete
        cache = self._cache_for(io)
        return loading.run(plan, lambda paths: download_texts(io, paths, cache=cache)), complete

    async def _anested_beyond(
        self, snapshot: MemorySnapshot, io: Any
    ) -> tuple[Discovered | None, bool]:
        plan, complete = await asyncio.to_thread(self._nested_plan, snapshot, io)
        if plan is None:
            return None, complete
        cache = self._cache_for(io)

        async def download(paths: list[str]) -> DownloadResult:
            return await adownload_texts(io, paths, cache=cache)

        return await loading.arun(plan, download), complete

    def _run_start_data(
        self, snapshot: MemorySnapshot, io: Any, beyond: tuple[Discovered | None, bool]
    ) -> dict[str, Any]:
        found, complete = beyond
        data: dict[str, Any] = {}
        if found is not None:
            known = {**snapshot.extras.nested, **snapshot.extras.imports, **snapshot.files}
            texts = {
                path: text
                for kind in (found.extras.nested, found.extras.imports)
                for path, text in kind.items()
                if found.extras.access.get(path) == "read-only"
                and path not in known
                and path not in snapshot.unreadable
            }
            earlier = left_out(io, texts)
            data["digests"] = {
                path: text_digest(text) for path, text in texts.items() if path not in earlier
            }
            if earlier:
                data["left_out"] = {path: entry.reason() for path, entry in earlier.items()}
        if snapshot.problems:
            # Files that existed but were not used (unreadable, or left out since an earlier
            # run): never restored, never removed.
            listed = {path for _, path in snapshot.rule_listing}
            unread = {
                problem.path: problem.reason
                for problem in snapshot.problems
                if problem.unreadable and problem.path not in snapshot.rule_files
            }
            unread_rules = {path: why for path, why in unread.items() if path in listed}
            skipped = {
                path: why
                for path, why in unread.items()
                if path not in listed
                and path not in self._layer_set
                and not self._in_writable_folder(path)
            }
            if skipped:
                data["left_out"] = {**skipped, **data.get("left_out", {})}
            if unread_rules:
                data["unread_rules"] = unread_rules
            unlisted = [
                folder
                for folder in self.rule_folders
                if any(
                    problem.path == (folder.rstrip("/") or "/")
                    and problem.reason.startswith(PARTIAL_LISTING)
                    for problem in snapshot.problems
                )
            ]
            if unlisted:
                data["unlisted"] = unlisted
        if self.read_only_folders:
            # Their files are the run's read-only memory: a mid-run load lists them no more.
            data["layer_folders"] = list(self.read_only_folders)
        if self.nested:
            data["complete"] = complete
        # Permission bits, put back like content (`chmod 000` hides a folder from later runs).
        # `is_read_only_layer_file`, its set lookup inline: this runs at every invocation.
        read_only = self._read_only_paths
        layer_files = [
            path
            for path in (*snapshot.files, *snapshot.unreadable)
            if path in read_only or (self.read_only_folders and self.is_read_only_layer_file(path))
        ]
        if modes := _modes_of(io, layer_files, self.read_only_folders, snapshot.modes):
            data["modes"] = modes
        if self.rule_folders and (
            rule_modes := _modes_of(
                io, snapshot.rule_files, self.rule_folders, snapshot.modes, self._folder_chains(io)
            )
        ):
            data["rule_modes"] = rule_modes
        if self.rule_folders:
            data["others"] = list(snapshot.other_files)
            identities = {
                path: identity
                for path in self._folder_chains(io)
                if (identity := identity_of(path)) is not None
            }
            if identities:
                data["folders"] = identities
        return data

    def _read_only_on_disk(self, io: Any) -> bool:
        """Whether read-only layers live on local disk (their modes are read at run start)."""
        return bool(self._read_only_paths or self.read_only_folders) and (
            local_root(io) is not None
        )

    def _folder_chains(self, io: Any) -> list[str]:
        """The rule folders on disk and the folders above them (worked out once per backend)."""
        chains = self._chains
        if chains is None or chains[0] is not io:
            chains = self._chains = (io, folder_chains(io, self.rule_folders))
        return chains[1]

    def _lists_as(self, start: RunStart) -> bool:
        """Whether the run-start snapshot's rule listing is this assembler's (the same read-only
        folders: a subagent's own middleware may have others)."""
        return start.rules is not None and start.rule_folders == self.rule_folders

    @staticmethod
    def _pinned_listing(
        start: RunStart,
    ) -> tuple[list[tuple[int, str]], list[Any], tuple[str, ...]]:
        """A pinned load lists no folder: its rule files are those the run started with."""
        return list(start.rules or ()), [], tuple(start.others or ())

    # -- folder layers ------------------------------------------------------------------------

    def _folders_to_list(self, pinned: Pinned | None) -> list[str]:
        """The folder layers this load lists: all of them, but a mid-run load holds a read-only
        folder to the files the run started with (a file planted since is not memory)."""
        if pinned is None:
            return list(self.layer_folders)
        held = pinned.start.layer_folders
        return [folder for folder in self.layer_folders if folder not in held]

    def _layer_files(
        self, listed: Mapping[str, list[str]], pinned: Pinned | None
    ) -> tuple[list[str], dict[str, loading.Access]]:
        """Every layer file of this load in layer order (each folder layer's files in place of
        the folder) and the access of each."""
        if not self.layer_folders:
            return list(self.layer_paths), self._layer_access
        found = [path for files in listed.values() for path in files]
        if pinned is not None:
            start = pinned.start
            found.extend(
                path
                for path in (*start.texts, *start.left_out)
                for folder in start.layer_folders
                if folder in self.layer_folders and in_folder(path, folder)
            )
        files = list(
            dict.fromkeys(
                path
                for layer in self.layers
                # Every file is loaded (and held by the run-start snapshot); the render
                # shows at most `max_files` per folder and names the rest.
                for path in layer.files_of(found, taken=self._layer_set, capped=False)
            )
        )
        access = dict(self._layer_access)
        for folder, folder_access in self.layer_folders.items():
            access.update(
                (path, folder_access)
                for path in files
                if path not in self._layer_set and in_folder(path, folder)
            )
        return files, access

    def _in_writable_folder(self, path: str) -> bool:
        return any(
            in_folder(path, folder)
            for folder, access in self.layer_folders.items()
            if access == "writable"
        )

    def files_of(self, layer: Layer, snapshot: MemorySnapshot) -> list[str]:
        """A layer's files in a load (a folder layer's: those the load found), in prompt order."""
        return layer.files_of([*snapshot.files, *snapshot.unreadable], taken=self._layer_set)

    def is_read_only_layer_file(self, path: str) -> bool:
        """Whether `path` is a read-only layer file: configured, or in a read-only folder layer."""
        return path in self._read_only_paths or any(
            in_folder(path, folder) for folder in self.read_only_folders
        )

    def _plan(
        self,
        rule_paths: Sequence[tuple[int, str]],
        touched: Sequence[str],
        layer_files: Sequence[str],
        access: Mapping[str, loading.Access],
    ) -> Plan:
        return loading.plan(
            [*layer_files, *[path for _, path in rule_paths]],
            access,
            touched=touched,
            nested_names=self.nested,
            nested_access="writable" if self.nested_writable else "read-only",
            root=self.rule_root,
            follow_imports=bool(self.follow_imports),
            import_scope=self._import_scope,
        )

    def _cache_for(self, io: Any) -> DiskReadCache | None:
        return self._disk_cache if io is self.backend else None

    def _folders_to_probe(self, rule_paths: Sequence[tuple[int, str]]) -> list[str]:
        """Rule folders that listed no file and were never checked: missing, or a file?

        Checked once per assembler (a warning is worth one look, not one per invocation).
        """
        listed = {index for index, _ in rule_paths}
        probe = [
            folder
            for index, folder in enumerate(self.rule_folders)
            if index not in listed and folder not in self._probed_folders
        ]
        self._probed_folders.update(probe)
        return probe

    def _cached_listing(
        self,
    ) -> tuple[list[tuple[int, str]], list[Any], tuple[str, ...]] | None:
        """The rule listing without a backend call when nothing can have changed it."""
        if not self.rule_folders:
            return [], [], ()
        if self._listing_cache is not None:
            cached = self._listing_cache.get(self._listing_cache.signatures())
            if cached is not None:
                return cached  # type: ignore[no-any-return]
        return None

    def _listing_signatures(self) -> tuple[DirSignatures | None, int]:
        # Taken before listing: a folder changed while the backend lists it is re-listed later.
        if self._listing_cache is None:
            return None, 0
        return self._listing_cache.signatures(), now_ns()

    def _remember_listing(
        self,
        taken: DirSignatures | None,
        listing: tuple[list[Any], list[Any], tuple[str, ...]],
        started: int,
    ) -> None:
        if self._listing_cache is not None and not listing[1]:
            self._listing_cache.put(taken, listing, started)

    def _snapshot(
        self,
        found: Discovered,
        listing: tuple[Sequence[tuple[int, str]], Iterable[Any], tuple[str, ...]],
        session: SessionEntry | None,
        session_problem: SourceProblem | None = None,
        *,
        earlier: Mapping[str, Unrestored],
        layer_files: Sequence[str],
    ) -> MemorySnapshot:
        rule_paths, listing_problems, other_files = listing
        result = found.first
        layer_paths = set(layer_files)
        configured = layer_paths | {path for _, path in rule_paths}
        files = {p: t for p, t in result.texts.items() if p in layer_paths}
        rule_files = {p: result.texts[p] for _, p in rule_paths if p in result.texts}
        unreadable = {
            problem.path: problem.reason
            for problem in result.problems
            if problem.unreadable and problem.path in layer_paths
        }
        for path, entry in earlier.items():
            for kept in (files, rule_files):
                kept.pop(path, None)
            if path in layer_paths:
                unreadable[path] = entry.reason()
        extras = found.extras.without(earlier)
        problems = [
            *(
                problem
                for problem in result.problems
                if problem.path in configured and problem.path not in earlier
            ),
            *(problem for problem in found.problems if problem.path not in earlier),
            *(
                SourceProblem(path, entry.reason(), unreadable=True)
                for path, entry in earlier.items()
            ),
            *(
                SourceProblem(importer, f"imports @{ref}, which names no file", used=True)
                for importer, refs in extras.missing.items()
                for ref in refs
            ),
            *(SourceProblem(path, TOO_DEEP_REASON, used=True) for path in extras.too_deep),
            *(SourceProblem(problem.path, problem.reason) for problem in listing_problems),
            *(
                problem
                for problem in self._configuration_problems(result, bool(rule_files))
                if problem.path not in earlier
            ),
        ]
        report_problems(problems, strict=self.strict, already_logged=self._logged)
        if session_problem is not None:  # logged when the read failed
            problems.append(session_problem)
        session_text = _session_text(session)
        session_id = session.key if session else None
        parts = (files, rule_files, session_id, session_text, unreadable, *extras.digest_parts())
        digest = self._reused_digest(parts)
        if digest is None:
            digest = digest_texts(*parts)
        self._last_load = (parts, digest)
        return MemorySnapshot(
            files,
            rule_files,
            session,
            tuple(problems),
            digest,
            unreadable,
            extras,
            rule_listing=tuple(rule_paths),
            other_files=other_files,
            modes=result.modes,
        )

    def _left_out_since_earlier_runs(
        self,
        io: Any,
        found: Discovered,
        rule_paths: Sequence[tuple[int, str]],
        access: Mapping[str, loading.Access],
    ) -> dict[str, Unrestored]:
        if not recorded_unrestored():
            return {}  # the usual case: one `stat` of a file that does not exist
        result = found.first
        # Read-only folder layers' files of this load count as read-only layer files.
        listed = {path for _, path in rule_paths} | {
            path
            for path, kind in access.items()
            if kind == "read-only" and path not in self._layer_set
        }
        texts: dict[str, str | None] = {
            path: text
            for path, text in result.texts.items()
            if path in listed or path in self._read_only_paths
        }
        texts.update(found.extras.nested)
        texts.update(found.extras.imports)
        for problem in (*result.problems, *found.problems):
            if problem.unreadable and (
                problem.path in listed or problem.path in self._read_only_paths
            ):
                texts[problem.path] = None
        missing = [path for path in self._read_only_paths if path in result.missing]
        return left_out(io, texts, missing)

    def _configuration_problems(
        self, result: DownloadResult, found_rules: bool
    ) -> list[SourceProblem]:
        """Missing files that are configuration mistakes rather than normal absence.

        A missing writable file is normal (the agent creates it); a missing read-only file
        is a wrong path or a wrong backend root. In `sources=` mode a missing file is skipped
        as deepagents skips it, noted at INFO level.
        """
        if self.compat:
            for path in sorted(result.missing):
                if ("missing", path) not in self._logged:
                    self._logged.add(("missing", path))
                    logger.info("memory source %s not found: skipped", path)
            return []
        problems: list[SourceProblem] = []
        read_only = [
            (layer, path) for layer in self.layers if not layer.writable for path in layer.files
        ]
        for layer, path in read_only:
            if path in result.missing:
                problems.append(
                    SourceProblem(
                        path,
                        f"the read-only layer {layer.name!r} has no file at this path "
                        f"(backend root: {_root_label(self.backend)}); fix the path or "
                        "remove the layer",
                    )
                )
        nothing_found = not result.texts and not found_rules and not result.problems
        if read_only and nothing_found:
            problems.append(
                SourceProblem(
                    _root_label(self.backend),
                    "the backend root holds none of the configured memory files "
                    f"({', '.join(self.layer_paths)}): is the backend's root_dir right?",
                )
            )
        return problems

    def _reused_digest(self, parts: tuple[Mapping[str, str] | str | None, ...]) -> str | None:
        """The previous load's digest when this load holds the same parts.

        The digest is a function of the parts' values (`digest_texts` sorts each mapping), so
        equal parts have it. One `==` of the tuples compares in C, without a Python call: the
        disk cache hands back the very same strings while nothing changed, which compare by
        identity. (A loop of `isinstance(part, Mapping)` checks cost about 1,900 Python calls
        per 20-turn conversation, `benchmarks/run.py --only end_to_end`.)
        """
        last = self._last_load
        return last[1] if last is not None and last[0] == parts else None

    def _read_session(self, key: str | None) -> tuple[SessionEntry | None, SourceProblem | None]:
        if self.session_store is None or key is None:
            return None, None
        try:
            data = self.session_store.get(key)
        except Exception as exc:  # a store outage must not stop the run
            return None, self._session_failure(key, exc)
        return (SessionEntry(key, data) if data else None), None

    async def _aread_session(
        self, key: str | None
    ) -> tuple[SessionEntry | None, SourceProblem | None]:
        if self.session_store is None or key is None:
            return None, None
        try:
            data = await self.session_store.aget(key)
        except Exception as exc:  # a store outage must not stop the run
            return None, self._session_failure(key, exc)
        return (SessionEntry(key, data) if data else None), None

    def _session_failure(self, key: str, exc: Exception) -> SourceProblem:
        """Log a failed session read (raise it in strict mode); the problem for the snapshot.

        The problem's path is the store's repr (the stores mask a URL's password in it), so
        `inspect` lists the outage instead of "no session".
        """
        if self.strict:
            msg = f"session store read failed for key {key!r}: {exc}"
            raise SessionStoreError(msg, key=key) from exc
        logger.warning("session layer skipped: reading key %s failed: %s", key, exc)
        reason = f"{SESSION_READ_FAILED}: reading key {key!r} failed: {type(exc).__name__}: {exc}"
        return SourceProblem(session_store_label(self.session_store), reason)

    # -- rendering --------------------------------------------------------------------------

    def render(
        self,
        snapshot: MemorySnapshot,
        *,
        keys: Iterable[str] = (),
        query: RecallQuery | None = None,
    ) -> str:
        """The prompt block for `snapshot`, with the rules matching `keys` (cached); `query`
        chooses the entries of a `recall=True` layer's file over its share."""
        return self.render_parts(
            snapshot.files,
            snapshot.rule_files,
            snapshot.session,
            keys,
            digest=snapshot.digest,
            unreadable=snapshot.unreadable,
            extras=snapshot.extras,
            query=query,
        )

    def render_parts(
        self,
        files: Mapping[str, str],
        rule_files: Mapping[str, str],
        session: SessionEntry | None,
        keys: Iterable[str],
        *,
        digest: str | None = None,
        unreadable: Mapping[str, str] | None = None,
        extras: MemoryExtras | None = None,
        query: RecallQuery | None = None,
    ) -> str:
        """`render` from the parts kept in agent state; cached on (digest, keys, query).

        Args:
            files: Layer path -> text.
            rule_files: Rule file path -> text.
            session: The session layer, if any.
            keys: Rule match keys.
            digest: The snapshot's digest of exactly these parts (a cache key computed once
                per load); without it, one is computed from every part.
            unreadable: Layer path -> reason, for files that could not be read.
            extras: Nested memory files and `@path` imports.
            query: The latest user message and the paths touched (`recall=True` layers).

        Returns:
            The block to append to the system message.
        """
        return self.render_call(
            files,
            rule_files,
            session,
            keys,
            digest=digest,
            unreadable=unreadable,
            extras=extras,
            query=query,
        )[0]

    def render_call(
        self,
        files: Mapping[str, str],
        rule_files: Mapping[str, str],
        session: SessionEntry | None,
        keys: Iterable[str],
        *,
        digest: str | None = None,
        unreadable: Mapping[str, str] | None = None,
        extras: MemoryExtras | None = None,
        query: RecallQuery | None = None,
        model: object | None = None,
    ) -> tuple[str, MemoryReport]:
        """`render_parts`, with what the block's record is built from (`core.report`); both
        cached together, so a call that reuses the block reuses the record too.

        Args:
            files: Layer path -> text.
            rule_files: Rule file path -> text.
            session: The session layer, if any.
            keys: Rule match keys.
            digest: As for `render_parts`.
            unreadable: Layer path -> reason, for files that could not be read.
            extras: Nested memory files and `@path` imports.
            query: The latest user message and the paths touched (`recall=True` layers).
            model: The call's chat model, whose counter measures a token budget
                (`max_tokens=`, `Layer(max_tokens=...)`); unused without one.

        Returns:
            The block and its report (`MemoryReport.record()`: built on first use, shared).
        """
        # Without a recall layer the query cannot change the block: not part of the key.
        query = query if self.recalls else None
        # Keys only select rules: without rule folders they cannot change the block.
        key_tuple = tuple(keys) if self.rule_folders else ()
        unreadable = unreadable or {}
        extras = extras or MemoryExtras()
        if digest is None:
            digest = digest_texts(
                files,
                rule_files,
                session.key if session else None,
                _session_text(session),
                unreadable,
                *extras.digest_parts(),
            )
        counter = token_counter(model) if self.counts_tokens else None
        cache_key = (digest, key_tuple, query, counter.key if counter is not None else None)
        rendered_call = self._blocks.get(cache_key)
        if rendered_call is None:
            report = self._rendered_call(
                files,
                rule_files,
                session,
                key_tuple,
                unreadable=unreadable,
                extras=extras,
                query=query,
                counter=counter,
            )
            rendered_call = (report.rendered.block, report)
            self._blocks.put(cache_key, rendered_call)
        return rendered_call

    def _rendered_call(
        self,
        files: Mapping[str, str],
        rule_files: Mapping[str, str],
        session: SessionEntry | None,
        keys: tuple[str, ...],
        *,
        unreadable: Mapping[str, str],
        extras: MemoryExtras,
        query: RecallQuery | None,
        counter: TokenCounter | None,
    ) -> MemoryReport:
        """The block and what its record is built from; with a token counter, within the
        token budgets (`core.tokens.fit_block`)."""
        match = self.match_rules(rule_files, keys)

        def render_at(
            layers: Sequence[Layer],
            max_chars: int,
            tokens: CutCount = CHARS,
            budget_in_tokens: bool = False,
        ) -> RenderedMemory:
            return self._rendered(
                files,
                match,
                session,
                unreadable=unreadable,
                extras=extras,
                query=query,
                layers=layers,
                max_chars=max_chars,
                tokens=tokens,
                budget_in_tokens=budget_in_tokens,
            )

        if counter is None:
            rendered = render_at(self.layers, self.max_chars)
            return MemoryReport(rendered, match, self.layers, extras, budget=self.max_chars)
        fit = fit_block(
            render_at,
            self.layers,
            files,
            counter,
            max_tokens=self.max_tokens,
            max_chars=self.max_chars,
            least=minimum_budget(self.system_prompt),
        )
        return MemoryReport(
            fit.rendered,
            match,
            self.layers,
            extras,
            budget=fit.budget,
            unit=fit.unit,
            total=fit.total,
            counter=counter.name,
            reworded=fit.reworded,
        )

    def match_rules(self, rule_files: Mapping[str, str], keys: Iterable[str]) -> RuleMatch | None:
        """Which rules apply to `keys` (None when no rule folders are configured)."""
        rule_set = self.rule_set(rule_files)
        if rule_set is None:
            return None
        return rule_set.match(keys, root=self.rule_root, list_unmatched=self.list_unmatched_rules)

    def rule_set(self, rule_files: Mapping[str, str]) -> RuleSet | None:
        """The parsed rules for these texts: parsed once per distinct content, per process."""
        if not self.rule_folders:
            return None
        rule_set = rule_set_for(rule_files, self.rule_folders, self.folder_index)
        if self.strict:
            rule_set.raise_on_error()
        self._report_rule_problems(rule_set)
        return rule_set

    def render_report(
        self,
        snapshot: MemorySnapshot,
        *,
        keys: Iterable[str] = (),
        query: RecallQuery | None = None,
    ) -> RenderedMemory:
        """The block `render` gives, with what happened to each part of it (uncached; for
        `layered-memory inspect` and `doctor`, which show why a file is cut or left out)."""
        # Without a model, a token budget is counted with LangChain's approximation.
        counter = token_counter(None) if self.counts_tokens else None
        return self._rendered_call(
            snapshot.files,
            snapshot.rule_files,
            snapshot.session,
            tuple(keys) if self.rule_folders else (),
            unreadable=snapshot.unreadable,
            extras=snapshot.extras,
            query=query,
            counter=counter,
        ).rendered

    def _rendered(
        self,
        files: Mapping[str, str],
        match: RuleMatch | None,
        session: SessionEntry | None,
        *,
        unreadable: Mapping[str, str],
        extras: MemoryExtras,
        query: RecallQuery | None,
        layers: Sequence[Layer],
        max_chars: int,
        tokens: CutCount,
        budget_in_tokens: bool,
    ) -> RenderedMemory:
        rules_renderer = None
        if match is not None and (match.applied or match.requested):

            def rules_renderer(limit: int) -> str:
                # Cut by the block's budget (in tokens, with one) or by the rules' own cap.
                counted = tokens if budget_in_tokens and limit < self.max_rules_chars else CHARS
                return render_rules(
                    match, max_chars=min(limit, self.max_rules_chars), counted=counted
                )

        return render_memory_report(
            layers,
            files,
            template=self.system_prompt,
            max_chars=max_chars,
            compat=self.compat,
            rules=rules_renderer,
            session=session,
            unreadable=unreadable,
            extras=extras,
            query=query,
            tokens=tokens,
            budget_in_tokens=budget_in_tokens,
        )

    def _report_rule_problems(self, rule_set: RuleSet) -> None:
        for problem in rule_set.problems:
            key = (problem.path, problem.reason)
            level = logging.DEBUG if key in self._logged else logging.WARNING
            self._logged.add(key)
            logger.log(
                level, "rule file %s: %s: %s", problem.path, problem.severity, problem.reason
            )

    def folder_index(self, path: str) -> int:
        """Precedence of a rule file: the highest listed folder containing it (as the listing)."""
        containing = [
            index
            for index, folder in enumerate(self.rule_folders)
            if path.startswith(folder.rstrip("/") + "/")
        ]
        return max(containing, default=0)

    # -- tool-call checks -------------------------------------------------------------------

    def access_of(self, tool_path: str) -> tuple[PathAccess | None, Layer | None]:
        """Whether a path named in a tool call is a memory file, and how the agent may use it."""
        return self._paths.access_of(tool_path)

    def same_file(self, configured: str, tool_path: str) -> bool:
        """Whether a path named in a tool call is the configured layer path (any alias)."""
        return self._paths.same_file(configured, tool_path)


def _modes_of(
    io: Any,
    files: Iterable[str],
    folders: Sequence[str],
    known: Mapping[str, tuple[str, int]],
    chains: Sequence[str] | None = None,
) -> dict[str, int]:
    """`disk_modes(io, files, folders)`, the bits of the files this load's read cache stat'ed
    taken from that `lstat`: a second one per file cost 200 rule files ~25 Python calls each
    at every invocation (1.05x -> 1.33x deepagents' calls in the 200-rule conversation,
    `benchmarks/run.py --only end_to_end`). `chains`: `folder_chains(io, folders)`, when the
    caller remembers it."""
    rest = [path for path in files if path not in known]
    if rest or (folders and chains is None):
        modes = disk_modes(io, rest, folders)
    else:
        modes = modes_at(chains) if chains else {}
    modes.update([known[path] for path in files if path in known])
    return modes


def _writable_in(access: Mapping[str, loading.Access]) -> Callable[[str], bool]:
    """Whether a loaded path is a writable layer file (its entries may be marked stale)."""
    return lambda path: access.get(path) == "writable"


def _citable(io: Any, cited: list[str]) -> list[str]:
    """The cited paths a load may read: a cite planted in memory by hand was never checked,
    and a credential file it names must not be read (`writeback.cites.citable`)."""
    # Imported here: only a load whose memory cites something pays for the credential rules.
    from layered_memory.writeback.cites import citable

    return citable(io, cited)


def _with_stale_marked(
    found: Discovered, citing: Mapping[str, str], current: Mapping[str, str]
) -> Discovered:
    """`found` with the stale entries of the citing files marked (`core.staleness`)."""
    texts = staleness.marked_texts(found.first.texts, citing, current)
    return replace(found, first=replace(found.first, texts=texts))


def _session_text(session: SessionEntry | None) -> str | None:
    """The session data as it is hashed (a change of any value changes the digest)."""
    return json.dumps(dict(session.data), sort_keys=True, default=str) if session else None


def _root_label(backend: Any) -> str:
    """The backend's root in words for a message: a disk folder, or the kind of backend."""
    root = getattr(backend, "cwd", None)
    return str(root) if root is not None else f"the {type(backend).__name__}"


def _probe_rule_folders(backend: Any, folders: Sequence[str]) -> list[SourceProblem]:
    try:
        responses = download_files_safely(backend, list(folders))
    except Exception:  # only a diagnosis: a failing probe must not stop the run
        return []
    return rule_folder_problems(folders, responses)


async def _aprobe_rule_folders(backend: Any, folders: Sequence[str]) -> list[SourceProblem]:
    try:
        responses = await adownload_files_safely(backend, list(folders))
    except Exception:  # see _probe_rule_folders
        return []
    return rule_folder_problems(folders, responses)


def rule_folder_problems(folders: Sequence[str], responses: Sequence[Any]) -> list[SourceProblem]:
    """Rule folders that are missing or are files, from `download_files(folders)`'s answers."""
    problems: list[SourceProblem] = []
    for folder, response in zip(folders, responses, strict=False):
        error = getattr(response, "error", None)
        if error == "file_not_found":
            reason = "rules folder not found: fix the path in rules=[...] or create the folder"
        elif error is None and getattr(response, "content", None) is not None:
            reason = "rules folder is a file: rules=[...] takes folders (every *.md below)"
        else:
            continue
        problems.append(SourceProblem(folder, reason))
    return problems


def _rule_root(backend: Any) -> str:
    """The folder rule globs are relative to: the disk root of a real-path backend, else `/`."""
    if isinstance(backend, FilesystemBackend) and not backend.virtual_mode:
        return str(backend.cwd)
    return "/"
