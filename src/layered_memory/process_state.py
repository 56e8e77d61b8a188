"""Every piece of state this package keeps for a whole process, in one list, and one function
that clears it.

Agents are often built per request; what one agent worked out (parsed rules, compiled globs,
files read from disk, a generated class) is kept for the next in module-level caches and
registries. Each is listed here with what it holds, its bound and how it is cleared, so a
reader sees the package's memory footprint in one place and `clear_process_caches()` gives a
benchmark or a long-running server a cold process. `tests/test_process_state.py` fails when a
module-level cache or mutable container is added without an entry here.

None of these can serve stale data (each is keyed by content or checked against the disk:
docs/development.md, "Caches on the memory path"); clearing one is never needed for
correctness. Lock registries are listed but never cleared: they hold no data, each entry
lives only while someone uses its lock, and dropping a lock in use would let two writers in.

This module imports nothing of the package: it finds each cache in `sys.modules` when asked to
clear it, so a module never imported (whose caches are empty) is not imported for nothing, and
any module may be listed without an import edge.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["PROCESS_STATE", "ProcessState", "clear_process_caches"]

Kind = Literal["lru_cache", "cache", "registry", "lock registry"]


@dataclass(frozen=True, slots=True)
class ProcessState:
    """One module-level cache or registry: where it is, what it holds, how far it grows.

    Attributes:
        module: The dotted name of the module holding it.
        name: Its name in the module (`Class.attribute` for a class attribute).
        kind: `lru_cache` (a `functools.lru_cache` function), `cache` (a map or object
            remembering results), `registry` (objects made once and shared, such as generated
            classes) or `lock registry` (never cleared: see the module docstring).
        holds: What one entry is, keyed by what.
        bound: How far it grows, in words.
        maxsize: The entry count of a `lru_cache` (checked against `cache_info()` by the tests).
        clear: The module-level function that clears it, when the object's own `clear()` or
            `cache_clear()` is not the way (a lock to take, a byte count to reset).
        lock: The module-level lock its users hold while they change it, held while it is
            cleared.
    """

    module: str
    name: str
    kind: Kind
    holds: str
    bound: str
    maxsize: int | None = None
    clear: str | None = None
    lock: str | None = None


_CORE = "layered_memory.core"

PROCESS_STATE: tuple[ProcessState, ...] = (
    # -- core: loading memory files ----------------------------------------------------------
    ProcessState(
        f"{_CORE}.disk_cache",
        "_read_caches",
        "cache",
        "a DiskReadCache per disk folder: texts read, by path and stat signature",
        "64 folders, least recently used dropped; per folder one entry per file read, 16,384",
        clear="clear_shared_caches",
    ),
    ProcessState(
        f"{_CORE}.disk_cache",
        "_listing_caches",
        "cache",
        "a ListingCache per (disk folder, rule folders): the last listing and its signatures",
        "64, least recently used dropped",
        clear="clear_shared_caches",
    ),
    ProcessState(
        f"{_CORE}.loading",
        "_lexical_plans",
        "cache",
        "the normalized paths of one requested path list (virtual backends)",
        "256 plans, emptied when full",
    ),
    ProcessState(
        f"{_CORE}.loading",
        "_references",
        "lru_cache",
        "the @imports of one memory text",
        "4,096 texts",
        maxsize=4096,
    ),
    ProcessState(
        f"{_CORE}.layers",
        "_path_problem",
        "lru_cache",
        "why a backend path is refused (or None)",
        "8,192 paths",
        maxsize=8192,
    ),
    ProcessState(
        f"{_CORE}.layers",
        "_normalize_virtual",
        "lru_cache",
        "a virtual path normalized",
        "8,192 paths",
        maxsize=8192,
    ),
    # -- core: rendering -----------------------------------------------------------------------
    ProcessState(
        f"{_CORE}.render",
        "_redacted",
        "lru_cache",
        "the redacted head of a memory text shown in the block",
        "256 texts",
        maxsize=256,
    ),
    ProcessState(
        f"{_CORE}.render",
        "_cleaned",
        "lru_cache",
        "a memory text without its HTML comments, outer blank lines trimmed",
        "256 texts",
        maxsize=256,
    ),
    ProcessState(
        f"{_CORE}.render",
        "_recall_body",
        "lru_cache",
        "a recall layer's file, redacted and defused",
        "32 texts",
        maxsize=32,
    ),
    ProcessState(
        f"{_CORE}.tokens",
        "_WARNED",
        "cache",
        "the models whose own token counter failed, and the max_tokens= too small for the "
        "template, each warned about once",
        "one per model class and name whose counter failed, and per too small max_tokens",
        lock="_WARNED_LOCK",
    ),
    ProcessState(
        f"{_CORE}.staleness",
        "digest_span",
        "lru_cache",
        "the digest of a cited span of a memory file",
        "1,024 spans",
        maxsize=1024,
    ),
    ProcessState(
        f"{_CORE}.render_cache",
        "_RULE_SETS",
        "cache",
        "parsed rule sets by the digest of their texts and folders",
        "32 sets, least recently used dropped",
        clear="clear_rule_sets",
    ),
    ProcessState(
        f"{_CORE}.render_cache",
        "_parse_rule",
        "lru_cache",
        "one rule file parsed, by (path, text, folder index)",
        "8,192 rule files",
        maxsize=8192,
    ),
    # -- core: the run-start snapshot, the unrestored record, the put-back, the guard --------
    ProcessState(
        f"{_CORE}.unrestored",
        "_ledger_in",
        "lru_cache",
        "the unrestored record's path for a state folder",
        "16 folders",
        maxsize=16,
    ),
    ProcessState(
        f"{_CORE}.unrestored",
        "_cached",
        "cache",
        "the unrestored record as last read, by its file's stat signature",
        "1 record (the state folder in use)",
        lock="_cache_lock",
    ),
    ProcessState(
        f"{_CORE}.put_back",
        "_REBUILT",
        "registry",
        "read-only folders the guard built again, accepted as the run's own by later checks",
        "one per read-only folder layer that was removed during a run",
    ),
    ProcessState(
        f"{_CORE}.guard._view",
        "_VIEW_CLASSES",
        "registry",
        "the generated protected subclass of a backend class",
        "one per backend class",
    ),
    ProcessState(
        f"{_CORE}.files",
        "_file_locks",
        "lock registry",
        "the in-process lock of one memory file on disk, by real path",
        "weak: only the locks a writer holds or will use",
    ),
    ProcessState(
        f"{_CORE}.files",
        "_backend_locks",
        "lock registry",
        "the in-process lock of one key of a backend or store object",
        "weak: only live backends, and only the locks a writer holds or will use",
    ),
    # -- the middleware ----------------------------------------------------------------------
    ProcessState(
        "layered_memory.writeback.end_of_run",
        "_WITH_END_OF_RUN",
        "registry",
        "the subclass `__new__` picks for a MemoryMiddleware with an end of run, per class",
        "one per MemoryMiddleware subclass",
        lock="_WITH_END_OF_RUN_LOCK",
    ),
    ProcessState(
        "layered_memory.writeback.hooks",
        "_UNFIRED_WRITE_BACKS",
        "registry",
        "a HookRegistry holding a write-back that no EndOfRun fires yet -> the file it writes",
        "weak: only live registries, each until it is fired or reported once",
    ),
    # -- rules and text safety ---------------------------------------------------------------
    ProcessState(
        "layered_memory.rules._glob",
        "compile_glob",
        "lru_cache",
        "a rule glob compiled",
        "4,096 globs",
        maxsize=4096,
    ),
    ProcessState(
        "layered_memory.rules._set",
        "_key_forms",
        "lru_cache",
        "the forms a match key is compared in",
        "4,096 keys",
        maxsize=4096,
    ),
    ProcessState(
        "layered_memory.safety.defuse",
        "_patterns",
        "lru_cache",
        "the defusing patterns of one set of options",
        "16 option sets",
        maxsize=16,
    ),
    ProcessState(
        "layered_memory.safety.defuse",
        "defuse_attribute",
        "lru_cache",
        "an attribute value made inert",
        "4,096 values",
        maxsize=4096,
    ),
    ProcessState(
        "layered_memory.safety.defuse",
        "defuse_name",
        "lru_cache",
        "a name or path made inert",
        "4,096 names",
        maxsize=4096,
    ),
    # -- write-back ----------------------------------------------------------------------------
    ProcessState(
        "layered_memory.writeback._lesson_reading",
        "variants",
        "lru_cache",
        "a word's other spellings, for the lesson hold",
        "65,536 words",
        maxsize=65536,
    ),
    ProcessState(
        "layered_memory.writeback.lesson_effects",
        "_built_images",
        "lru_cache",
        "the images a lesson builds itself (`docker build -t`), by its words",
        "256 lessons",
        maxsize=256,
    ),
    ProcessState(
        "layered_memory.writeback.lesson_effects",
        "_effects",
        "lru_cache",
        "the effect classes of one lesson text",
        "4,096 texts",
        maxsize=4096,
    ),
    ProcessState(
        "layered_memory.writeback.review_queue",
        "_keys",
        "cache",
        "the review queue's sealing key, by its file",
        "one per state folder (the key never changes once made)",
        lock="_key_lock",
    ),
    # -- checkpoint, views, graph ------------------------------------------------------------
    ProcessState(
        "layered_memory.checkpoint.saver",
        "_CLASSES",
        "registry",
        "the CachedCheckpointSaver subclass with a set of capabilities",
        "one per set of capability methods a wrapped saver overrides",
    ),
    ProcessState(
        "layered_memory.views._view",
        "_kept",
        "cache",
        "the last views built over a conversation, by person and first messages",
        "the message references they hold (see views/_view.py)",
        clear="clear_cache",
    ),
    ProcessState(
        "layered_memory.views._view",
        "_label",
        "lru_cache",
        "the label a speaker or tool is shown with",
        "512 labels",
        maxsize=512,
    ),
    ProcessState(
        "layered_memory.graph.knowledge_graph",
        "_snapshots",
        "cache",
        "parsed graph versions by content digest, with the indexes each builds on first use "
        "(names, search, the recall index of the entities in focus)",
        "SNAPSHOT_CACHE_BYTES (64 MiB) of files (their indexes in proportion), least "
        "recently used dropped",
        clear="clear_caches",
    ),
    ProcessState(
        "layered_memory.graph.knowledge_graph",
        "_signatures",
        "cache",
        "a graph file's stat signature and the digest it had",
        "4,096 files, least recently used dropped",
        clear="clear_caches",
    ),
    ProcessState(
        "layered_memory.graph.knowledge_graph",
        "_warned",
        "cache",
        "(file, line) pairs already warned about",
        "256, oldest dropped",
        lock="_lock",
    ),
    # -- tiers -------------------------------------------------------------------------------
    ProcessState(
        "layered_memory.tiers.memory",
        "_LOCKS",
        "lock registry",
        "one lock per (store, user) so a user's writes never interleave",
        "10,000; idle locks dropped past it",
    ),
    ProcessState(
        "layered_memory.tiers.records",
        "_READ",
        "cache",
        "a user's long-term record as last read, by its revision",
        "256 records, oldest dropped",
        lock="_READ_LOCK",
    ),
    ProcessState(
        "layered_memory.tiers.vectors",
        "DECODED",
        "cache",
        "decoded vector matrices by the revision their record was written with",
        "1,024 matrices, least recently used dropped",
    ),
    ProcessState(
        "layered_memory.tiers.records",
        "MIDTERMS",
        "cache",
        "a user's mid-term tier as this process last wrote it, by store, user and revision",
        "64 users, least recently used dropped (writers take an entry out while they work)",
    ),
    ProcessState(
        "layered_memory.tiers.vectors",
        "BY_REVISION",
        "cache",
        "one page's or segment's vector and its unit copy, by the revision it was written with",
        "64 MiB of vectors, least recently used dropped",
    ),
    ProcessState(
        "layered_memory.tiers.page_index",
        "INDEXES",
        "cache",
        "every user's in-process page index, by store and namespace",
        "MAX_INDEX_BYTES of vectors, least recently used dropped",
    ),
    # -- recall --------------------------------------------------------------------------------
    ProcessState(
        "layered_memory.recall.text",
        "_normalize",
        "lru_cache",
        "a word normalized for search",
        "65,536 words",
        maxsize=65536,
    ),
    ProcessState(
        "layered_memory.recall.text",
        "word_counts",
        "lru_cache",
        "the word counts of a text",
        "8,192 texts",
        maxsize=8192,
    ),
    ProcessState(
        "layered_memory.recall.entries",
        "_prepared",
        "lru_cache",
        "a memory file's entries with their word counts and postings",
        "64 texts",
        maxsize=64,
    ),
)
"""Every module-level cache and registry of the package (docs/development.md shows it)."""


def _target(entry: ProcessState) -> Any:
    """The listed object, or None when its module was never imported (nothing to clear)."""
    module = sys.modules.get(entry.module)
    if module is None:
        return None
    found: Any = module
    for part in entry.name.split("."):
        found = getattr(found, part)
    return found


def clear_process_caches() -> None:
    """Forget everything this process's agents share: parsed rules, files read, built views.

    Clears every cache and registry of `PROCESS_STATE` but the lock registries. Nothing needs
    this for correctness; it gives a benchmark the first load of a fresh process, and a
    long-running server a way to give the memory back.

    Example:
        ```python
        from layered_memory.process_state import clear_process_caches

        clear_process_caches()  # the next agent loads and parses as a fresh process would
        ```
    """
    for entry in PROCESS_STATE:
        if entry.kind == "lock registry":
            continue
        target = _target(entry)
        if target is None:
            continue
        module = sys.modules[entry.module]
        if entry.clear is not None:
            getattr(module, entry.clear)()
        elif entry.kind == "lru_cache":
            target.cache_clear()
        elif entry.lock is not None:
            with getattr(module, entry.lock):
                target.clear()
        else:
            target.clear()
