"""The record of read-only memory that could not be put back, remembered across runs.

When the put-back (`core.put_back`) fails (a full disk, a permission, or a nested file the run
never loaded, whose text the snapshot does not keep), what the file holds now is recorded here
by its fingerprint. Every later load leaves that file out of the prompt, with one warning
naming it, until the file changes (the user fixed it, and the entry is dropped) or the user
deletes the record. `layered-memory doctor` reports the same through its load.

The record is one small JSON file in the user's state folder (`LAYERED_MEMORY_STATE_DIR`,
else `$XDG_STATE_HOME/layered-memory`, else `~/.local/state/layered-memory`), never in the
project: the disk a command filled, or the folder it broke, need not be able to hold it.
Writers take a file lock and replace the file atomically; readers cache it by its stat
signature, so a load with nothing recorded costs one `stat`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepagents.backends.filesystem import FilesystemBackend
from filelock import FileLock

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import disk_path
from layered_memory.core.files import atomic_write
from layered_memory.core.internals import final_route
from layered_memory.core.layers import expand_user, lexical_path

# The guard's `disk_path(backend, path)` (a path as the backend's tools read it), beside the
# loader's `disk_path(root, key, virtual=)` (a path as the loader keys it).

logger = get_logger(__name__)

# -- read-only memory that could not be put back --------------------------------------------------

STATE_DIR_ENV = "LAYERED_MEMORY_STATE_DIR"
LEDGER_NAME = "unrestored.json"

MISSING = "missing"
UNREADABLE = "unreadable"

LEFT_OUT_START = "left out: an agent changed it during an earlier run"
LEFT_OUT_REASON = (
    LEFT_OUT_START + " and it could not be put back "
    "({why}); it stays out of the prompt until the file changes: check it (e.g. `git diff`), "
    "fix it, and run again (`layered-memory doctor` lists these)"
)


@dataclass(frozen=True, slots=True)
class Unrestored:
    """One file the guard could not put back.

    Attributes:
        path: The backend path, as the run named it.
        found: The fingerprint of what the file held after the failed put-back.
        why: Why it could not be put back.
    """

    path: str
    found: str
    why: str

    def reason(self) -> str:
        """The load problem's reason (the prompt's note says the same)."""
        return LEFT_OUT_REASON.format(why=self.why)


def state_dir() -> str:
    """The folder of the package's per-user state (see the module docstring)."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return configured
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(xdg, "layered-memory")


@functools.lru_cache(maxsize=16)
def _ledger_in(configured: str | None) -> str:
    return os.path.join(state_dir() if configured is None else configured, LEDGER_NAME)


def ledger_path() -> str:
    """Where the record lives. Every load looks: one environment read (the variable may
    change, tests set it), then a remembered answer (without it, the XDG default is worked
    out once per process)."""
    return _ledger_in(os.environ.get(STATE_DIR_ENV) or None)


def fingerprint(text: str | None, *, missing: bool = False) -> str:
    """What a file holds, in a form the record keeps: a digest of its decoded text,
    `missing`, or `unreadable` (exists, cannot be decoded)."""
    if missing:
        return MISSING
    if text is None:
        return UNREADABLE
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def place_of(backend: Any, path: str) -> str:
    """A path's place, the record's key: the file on disk for a local backend (through
    composite routes), else the backend's kind and the path within it."""
    target, key = final_route(backend, path)
    if isinstance(target, FilesystemBackend):
        key = key if target.virtual_mode else expand_user(key)
        return os.path.normpath(disk_path(str(target.cwd), key, virtual=target.virtual_mode))
    return f"{type(target).__name__}:{lexical_path(key) or key}"


_cache_lock = threading.Lock()
_cached: dict[str, tuple[tuple[int, int, int], dict[str, Unrestored]]] = {}
"""The record as last read, by its file's stat signature."""


def entries() -> Mapping[str, Unrestored]:
    """Place -> entry, as recorded now (empty when nothing is; a damaged record is logged and
    read as empty: it only ever adds caution)."""
    path = ledger_path()
    try:
        info = os.stat(path)
    except OSError:
        return {}
    signature = (info.st_mtime_ns, info.st_size, info.st_ino)
    with _cache_lock:
        known = _cached.get(path)
    if known is not None and known[0] == signature:
        return known[1]
    found = _read(path)
    with _cache_lock:
        _cached.clear()  # one state folder at a time (tests switch it)
        _cached[path] = (signature, found)
    return found


def _read(path: str) -> dict[str, Unrestored]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {
            str(place): Unrestored(str(item["path"]), str(item["found"]), str(item["why"]))
            for place, item in data.items()
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        logger.warning("cannot read the record of unrestored memory %s: %s", path, exc)
        return {}


def record(found: Mapping[str, Unrestored]) -> bool:
    """Add entries (place -> entry); False when the record could not be written (logged)."""
    return _update(dict(found), ())


def forget(places: Iterable[str]) -> None:
    """Drop the entries of files that changed since (the user fixed them)."""
    gone = tuple(places)
    if gone:
        _update({}, gone)


def _update(added: dict[str, Unrestored], removed: tuple[str, ...]) -> bool:
    path = ledger_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with FileLock(path + ".lock", timeout=30):
            current = dict(_read(path)) if os.path.exists(path) else {}
            current.update(added)
            for place in removed:
                current.pop(place, None)
            document = {
                place: {"path": entry.path, "found": entry.found, "why": entry.why}
                for place, entry in sorted(current.items())
            }
            atomic_write(Path(path), json.dumps(document, indent=1).encode("utf-8"))
    except Exception as exc:  # the state folder is full or unwritable too: say so, go on
        logger.error("cannot record unrestored read-only memory in %s: %s", path, exc)
        return False
    return True


def left_out(
    backend: Any, texts: Mapping[str, str | None], missing: Iterable[str] = ()
) -> dict[str, Unrestored]:
    """The files a load found that stay out of the prompt: those recorded with what they hold
    now. `texts` is path -> text (None: exists but unreadable); `missing` are read-only paths
    not found. Entries of files that changed since are dropped (the user fixed them)."""
    recorded = entries()
    if not recorded:
        return {}
    hits: dict[str, Unrestored] = {}
    stale: list[str] = []
    for path in [*texts, *missing]:
        place = place_of(backend, path)
        entry = recorded.get(place)
        if entry is None:
            continue
        now = fingerprint(texts.get(path), missing=path not in texts)
        if entry.found == now:
            hits[path] = entry
        else:
            stale.append(place)
    forget(stale)
    return hits
