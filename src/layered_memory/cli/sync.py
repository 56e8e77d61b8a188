"""`layered-memory sync push|pull`: copy a memory folder into a store namespace and back.

What is copied: every file below DIR, keyed by its path from DIR (`/AGENTS.md`,
`/.claude/rules/python.md`), byte for byte (UTF-8 text as `utf-8` items, anything else as
`base64` items, the way deepagents' `StoreBackend` keeps files). Left out, on both sides:

- dot-folders and dotfiles (`.git/`, `.venv/`, `.env`, `.DS_Store`), except the rule folders
  `.agents/rules/`, `.claude/rules/` and `.cursor/rules/` (without dot-folders inside them);
- `__pycache__/`, `node_modules/`, and editor or OS junk (`*~`, `*.swp`, `*.swo`, `*.tmp`,
  `*.pyc`, `Thumbs.db`, `desktop.ini`);
- symlinks, files over 8 MB and file names that are not valid UTF-8 (reported as skipped).

`--pattern GLOB` (repeatable) narrows that selection, on both sides, to the paths from DIR
matching one of the globs (`AGENTS.md`, `.claude/rules/*.md`, `**/*.md`), in the glob dialect of
rule files (`layered_memory.rules`).

Store items outside that selection, and items that are not file items, are never written to
disk nor deleted. On pull, an item key that is not a plain `/a/b` path (a `..` or `.` segment,
a backslash, an empty segment) or that would land outside DIR through a symlink is refused.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import sys
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from layered_memory.cli._output import Painter, dumps_json, printable, printable_url, use_colour
from layered_memory.cli._store import (
    FileItem,
    file_value,
    list_file_items,
    open_store,
    parse_namespace,
)
from layered_memory.core.files import replace_unless_changed
from layered_memory.core.loading import MAX_FILE_BYTES
from layered_memory.errors import CliStoreError, MemoryWriteError
from layered_memory.rules import GlobError, compile_glob
from layered_memory.sessions.stores.urls import redact_url

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

Direction = Literal["push", "pull"]
Status = Literal["added", "updated", "unchanged", "deleted", "kept", "skipped", "refused", "failed"]

RULE_DOT_FOLDERS = (".agents/rules", ".claude/rules", ".cursor/rules")
JUNK_FOLDERS = frozenset({"__pycache__", "node_modules"})
JUNK_FILES = ("*~", "*.swp", "*.swo", "*.tmp", "*.pyc", "Thumbs.db", "desktop.ini")

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE = 0, 1, 2
_SUMMARY_ORDER: tuple[Status, ...] = (
    "added",
    "updated",
    "unchanged",
    "deleted",
    "kept",
    "skipped",
    "refused",
    "failed",
)


@dataclass(frozen=True, slots=True)
class Action:
    """What sync does (or did) with one file; `detail` says why when it is not obvious."""

    key: str
    status: Status
    detail: str = ""


def excluded(parts: Sequence[str]) -> bool:
    """Whether a relative path (its segments) is outside what sync copies (see the module)."""
    if not parts:
        return True
    relative = "/".join(parts)
    in_rule_folder = any(relative.startswith(folder + "/") for folder in RULE_DOT_FOLDERS)
    checked = parts[2:] if in_rule_folder else parts
    if any(part.startswith(".") or part in JUNK_FOLDERS for part in checked):
        return True
    return any(fnmatch.fnmatchcase(parts[-1], pattern) for pattern in JUNK_FILES)


@dataclass(frozen=True, slots=True)
class Patterns:
    """The `--pattern` globs: a key (`/AGENTS.md`) is selected when its path from DIR
    (`AGENTS.md`) matches one of them; no globs select everything."""

    globs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for glob in self.globs:
            try:
                compile_glob(glob.lstrip("/"))
            except GlobError as exc:
                raise CliStoreError(f"--pattern {glob}: invalid glob: {exc}") from None

    def __call__(self, key: str) -> bool:
        if not self.globs:
            return True
        path = unicodedata.normalize("NFC", key.lstrip("/"))  # as rule globs match keys
        return any(
            part.regex.fullmatch(path) is not None
            for glob in self.globs
            for part in compile_glob(glob.lstrip("/"))
        )


def _folder_wanted(parts: Sequence[str]) -> bool:
    """Whether a walk should enter this folder: it may hold selected files."""
    relative = "/".join(parts)
    if any(folder == relative or folder.startswith(relative + "/") for folder in RULE_DOT_FOLDERS):
        return True
    return not excluded([*parts, "x"])


def scan_folder(root: Path) -> tuple[dict[str, bytes], list[Action]]:
    """The selected files below `root` as `{key: bytes}`, and the files skipped with a reason."""
    files: dict[str, bytes] = {}
    skipped: list[Action] = []
    for current, folders, names in os.walk(root, followlinks=False):
        base = Path(current).relative_to(root).parts
        folders[:] = sorted(name for name in folders if _folder_wanted([*base, name]))
        for name in sorted(names):
            parts = [*base, name]
            if excluded(parts):
                continue
            key = "/" + "/".join(parts)
            path = Path(current, name)
            try:
                key.encode("utf-8")
            except UnicodeEncodeError:
                shown = key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                skipped.append(Action(shown, "skipped", "file name is not valid UTF-8"))
                continue
            if path.is_symlink():
                skipped.append(Action(key, "skipped", "symlink"))
                continue
            if not path.is_file():
                continue
            if path.stat().st_size > MAX_FILE_BYTES:
                skipped.append(Action(key, "skipped", "larger than 8 MB"))
                continue
            try:
                files[key] = path.read_bytes()
            except OSError as exc:
                skipped.append(Action(key, "failed", f"cannot read: {exc.strerror or exc}"))
    return files, skipped


def local_target(root: Path, key: str) -> tuple[Path | None, str]:
    """Where a store key lands below `root`, or why it must not be written (pull)."""
    if not key.startswith("/"):
        return None, "key is not an absolute /path"
    if "\\" in key or "\x00" in key:
        return None, "key contains a backslash or NUL"
    parts = key[1:].split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None, "key has an empty, '.' or '..' segment"
    if os.name == "nt" and any(":" in part for part in parts):  # pragma: no cover - Windows
        return None, "key has a drive or stream separator"
    real_root = root.resolve()
    target = real_root.joinpath(*parts)
    if not target.resolve().is_relative_to(real_root):
        return None, "key leads outside DIR (through a symlink)"
    return target, ""


def _compare(
    source: Mapping[str, bytes],
    destination: Mapping[str, FileItem | bytes],
    *,
    delete: bool,
    skipped_locally: Collection[str] = (),
) -> list[Action]:
    """What to do for each key. A key whose local file was skipped (a symlink, over 8 MB,
    unreadable) is left alone on both sides: pushing, its store copy is not deleted; pulling,
    the local file is not overwritten (its `skipped` line says why)."""
    actions: list[Action] = []
    for key in sorted((source.keys() | destination.keys()) - set(skipped_locally)):
        there = destination.get(key)
        there_bytes = there.data if isinstance(there, FileItem) else there
        if key not in source:
            if isinstance(there, FileItem) and there.data is None:
                actions.append(Action(key, "skipped", "not a file item"))
            elif delete:
                actions.append(Action(key, "deleted"))
            else:
                actions.append(Action(key, "kept", "not in the source; --delete removes it"))
        elif there is None:
            actions.append(Action(key, "added"))
        elif there_bytes == source[key]:
            actions.append(Action(key, "unchanged"))
        else:
            actions.append(Action(key, "updated"))
    return actions


def _split_store_items(items: Sequence[FileItem]) -> tuple[dict[str, FileItem], list[Action]]:
    """Store items sync manages, and the ones it leaves alone (outside the selection)."""
    managed: dict[str, FileItem] = {}
    ignored: list[Action] = []
    for item in items:
        parts = item.key[1:].split("/") if item.key.startswith("/") else []
        if parts and not any(p in ("", ".", "..") for p in parts) and excluded(parts):
            ignored.append(Action(item.key, "skipped", "dot-folder or junk name: not synced"))
        else:
            managed[item.key] = item
    return managed, ignored


def _selected(
    wanted: Patterns, files: dict[str, bytes], skipped: list[Action]
) -> tuple[dict[str, bytes], list[Action]]:
    """The scanned files and skipped lines `--pattern` selects: the others are not mentioned."""
    return {k: v for k, v in files.items() if wanted(k)}, [a for a in skipped if wanted(a.key)]


def _push(
    store: BaseStore,
    namespace: tuple[str, ...],
    root: Path,
    *,
    dry_run: bool,
    delete: bool,
    wanted: Patterns,
) -> list[Action]:
    from langgraph.store.base import PutOp

    files, skipped = _selected(wanted, *scan_folder(root))
    if not dry_run:
        store.setup()  # type: ignore[attr-defined]
    existing = _existing_items(store, namespace, missing_ok=dry_run)
    items = [item for item in existing if wanted(item.key)]
    managed, ignored = _split_store_items(items)
    left_alone = {action.key for action in skipped}
    actions = _compare(files, managed, delete=delete, skipped_locally=left_alone)
    _refuse_emptying(files, actions, f"DIR {root}")
    ops = []
    for action in actions:
        if action.status in ("added", "updated"):
            created = managed[action.key].created_at if action.key in managed else None
            value = file_value(files[action.key], created_at=created)
            ops.append(PutOp(namespace, action.key, value))
        elif action.status == "deleted":
            ops.append(PutOp(namespace, action.key, None))
    if ops and not dry_run:
        store.batch(ops)
    return [*actions, *skipped, *ignored]


def _pull(
    store: BaseStore,
    namespace: tuple[str, ...],
    root: Path,
    *,
    dry_run: bool,
    delete: bool,
    wanted: Patterns,
) -> list[Action]:
    items = _existing_items(store, namespace, missing_ok=False)
    managed, ignored = _split_store_items([item for item in items if wanted(item.key)])
    source: dict[str, bytes] = {}
    refused: list[Action] = []
    targets: dict[str, Path] = {}
    for key, item in managed.items():
        if item.data is None:
            ignored.append(Action(key, "skipped", "not a file item"))
            continue
        target, reason = local_target(root, key)
        if target is None:
            refused.append(Action(key, "refused", reason))
            continue
        source[key] = item.data
        targets[key] = target
    local, skipped = _selected(wanted, *scan_folder(root)) if root.is_dir() else ({}, [])
    left_alone = {action.key for action in skipped}
    actions = _compare(source, local, delete=delete, skipped_locally=left_alone)
    _refuse_emptying(source, actions, "namespace " + "/".join(namespace))
    done = [
        _apply_pull(action, root, targets, source, local) if not dry_run else action
        for action in actions
    ]
    return [*done, *skipped, *ignored, *refused]


def _apply_pull(
    action: Action,
    root: Path,
    targets: Mapping[str, Path],
    source: Mapping[str, bytes],
    local: Mapping[str, bytes],
) -> Action:
    """One change of a pull, made under the lock memory writers take, and only if the local
    file still holds what the comparison saw: an agent's edit or a write-back that landed
    since is never overwritten (the pull reports it; a second pull compares afresh)."""
    if action.status not in ("added", "updated", "deleted"):
        return action
    deleting = action.status == "deleted"
    path = root.joinpath(*action.key[1:].split("/")) if deleting else targets[action.key]
    try:
        replaced = replace_unless_changed(
            action.key,
            path,
            local.get(action.key),
            None if deleting else source[action.key],
        )
    except MemoryWriteError as exc:
        return Action(action.key, "failed", f"{action.status}: {exc.reason}")
    except OSError as exc:
        return Action(action.key, "failed", f"{action.status}: {exc.strerror or exc}")
    if not replaced:
        return Action(action.key, "failed", "changed locally during the pull: left as it is")
    if deleting:
        _remove_empty_parents(path.parent, root)
    return action


def _remove_empty_parents(folder: Path, root: Path) -> None:
    real_root = root.resolve()
    while folder.resolve() != real_root and folder.resolve().is_relative_to(real_root):
        _drop_orphan_locks(folder)
        try:
            folder.rmdir()
        except OSError:  # not empty
            return
        folder = folder.parent


def _drop_orphan_locks(folder: Path) -> None:
    """Remove the writers' lock files (`.NAME.lock`) of files that are gone, when nothing else
    is in the folder: a pull that deleted the folder's last file took its lock (created on
    first use) and must not keep the folder alive with it. A writer of the deleted file that
    comes later creates the lock again."""
    try:
        names = [entry.name for entry in os.scandir(folder)]
    except OSError:
        return
    locks = [
        name
        for name in names
        if name.startswith(".") and name.endswith(".lock") and name[1:-5] not in names
    ]
    if len(locks) != len(names):
        return  # something else lives here: the folder stays, and so do its locks
    for name in locks:
        with contextlib.suppress(OSError):
            (folder / name).unlink()


def _existing_items(
    store: BaseStore, namespace: tuple[str, ...], *, missing_ok: bool
) -> list[FileItem]:
    try:
        return list_file_items(store, namespace)
    except Exception as exc:
        if missing_ok and type(exc).__name__ == "UndefinedTable":
            return []  # a dry-run push into a database never set up: everything is new
        raise


def _refuse_emptying(source: Mapping[str, bytes], actions: Sequence[Action], where: str) -> None:
    if not source and any(action.status == "deleted" for action in actions):
        msg = (
            f"refusing --delete: the source {where} has no files to sync, so every file would "
            "be deleted (wrong --root or --namespace?)"
        )
        raise CliStoreError(msg)


def _summary(direction: Direction, actions: Sequence[Action], *, dry_run: bool) -> str:
    counts = dict.fromkeys(_SUMMARY_ORDER, 0)
    for action in actions:
        counts[action.status] += 1
    shown = [
        f"{counts[status]} {status}"
        for status in _SUMMARY_ORDER
        if counts[status] or status in ("added", "updated", "unchanged", "deleted")
    ]
    prefix = "dry run, nothing written: " if dry_run else ""
    return f"{prefix}{direction}: {', '.join(shown)}"


_STATUS_STYLE = {
    "added": "green",
    "updated": "cyan",
    "deleted": "yellow",
    "kept": "dim",
    "unchanged": "dim",
    "skipped": "dim",
    "refused": "red",
    "failed": "red",
}


def run_sync(
    direction: Direction,
    *,
    url: str,
    namespace: str,
    root: str,
    dry_run: bool = False,
    delete: bool = False,
    as_json: bool = False,
    patterns: Sequence[str] = (),
) -> int:
    """Copy DIR into the store namespace (`push`) or back (`pull`); one line per file. With
    `patterns`, only the files whose path from DIR matches one of these globs.

    Returns:
        0 when every file was synced, 1 when a file failed or a key was refused, 2 on a usage or
        store error (printed to stderr as one line).
    """
    try:
        parts = parse_namespace(namespace)
        wanted = Patterns(tuple(patterns))
        folder = Path(root).expanduser()
        if direction == "push" and not folder.is_dir():
            raise CliStoreError(f"--root {root}: no such folder")
        if folder.exists() and not folder.is_dir():
            raise CliStoreError(f"--root {root}: not a folder")
        with open_store(url) as store:
            run = _push if direction == "push" else _pull
            actions = run(store, parts, folder, dry_run=dry_run, delete=delete, wanted=wanted)
    except CliStoreError as exc:
        print(f"layered-memory sync: {printable(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    failed = any(action.status in ("refused", "failed") for action in actions)
    ordered = sorted(actions, key=lambda a: a.key)
    if as_json:
        counts = dict.fromkeys(_SUMMARY_ORDER, 0)
        for action in actions:
            counts[action.status] += 1
        data = {
            "version": 1,
            "direction": direction,
            "dry_run": dry_run,
            "root": str(folder),
            "store": redact_url(url),
            "namespace": list(parts),
            "patterns": list(patterns),
            "actions": [
                {"key": a.key, "status": a.status, "detail": a.detail or None} for a in ordered
            ],
            "counts": counts,
            "ok": not failed,
        }
        print(dumps_json(data))
        return EXIT_PARTIAL if failed else EXIT_OK
    paint = Painter(use_colour(sys.stdout))
    # Keys and file names are data: escaped, so a key holding a newline or an ANSI escape
    # cannot forge a line or reach the terminal.
    for action in ordered:
        detail = f"  ({printable(action.detail)})" if action.detail else ""
        status = paint(f"{action.status:<9}", _STATUS_STYLE[action.status])
        print(f"{status} {printable(action.key)}{detail}")
    arrow = "->" if direction == "push" else "<-"
    print(f"{printable(folder)} {arrow} {printable_url(url)} {printable('/'.join(parts))}")
    print(_summary(direction, actions, dry_run=dry_run))
    return EXIT_PARTIAL if failed else EXIT_OK
