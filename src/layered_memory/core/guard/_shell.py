"""Read-only memory around a shell command: it cannot be checked before it runs, so the
protected files are read before and after it, and whatever changed is put back.

Both checks use these functions: the protected backend around each `execute` (its own
before/after snapshot, so any subagent's command is covered) and the middleware after each
shell tool call of its agent (against the content the run loaded, so a change a leftover
background process made later is undone too).

Putting back is verified: a file the command replaced with a folder or a symlink is removed
first, the bytes are written, and the result is read again. What still could not be put back is
reported as such, to the model and in the log, never as restored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layered_memory._logs import get_logger
from layered_memory.core.guard._places import backend_path
from layered_memory.core.loading import decode_content

logger = get_logger(__name__)

MAX_SNAPSHOT_FILES = 10_000
"""Files of the protected folders read around one command (a bound for huge folders)."""

Snapshot = dict[str, bytes | None]
"""Backend path -> bytes, or None when the file does not exist."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a check found and did.

    Attributes:
        restored: Paths put back as they were (or removed, when the command created them).
        failed: Paths that could not be put back, with the reason.
    """

    restored: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.restored or self.failed)

    def note(self) -> str:
        """What the model is told."""
        parts = []
        if self.restored:
            parts.append(
                "this command changed read-only memory, which was put back as it was: "
                + ", ".join(self.restored)
            )
        if self.failed:
            lost = ", ".join(f"{path} ({why})" for path, why in self.failed.items())
            parts.append(f"read-only memory it changed could NOT be put back: {lost}")
        return (
            f"\n[layered-memory: {'; '.join(parts)}. Do not modify read-only memory; tell the "
            "user what should change instead.]"
        )


def read_snapshot(paths: Sequence[str], responses: Sequence[Any]) -> Snapshot:
    """Path -> bytes from a `download_files` answer; unreadable paths (a folder, a permission
    error) are left out of a *before* snapshot: there is nothing to put back."""
    found: Snapshot = {}
    for path, response in zip(paths, responses, strict=False):
        error = getattr(response, "error", None)
        if error == "file_not_found":
            found[path] = None
        elif error is None:
            found[path] = getattr(response, "content", None)
    return found


def changed_paths(
    before: Snapshot, after_paths: Sequence[str], responses: Sequence[Any]
) -> list[str]:
    """Paths whose bytes differ after the command, and paths that appeared in a protected
    folder (present after, unknown before)."""
    answers = dict(zip(after_paths, responses, strict=False))
    changed = []
    for path in dict.fromkeys([*before, *after_paths]):
        response = answers.get(path)
        error = getattr(response, "error", None) if response is not None else "file_not_found"
        now = getattr(response, "content", None) if error is None else None
        missing_now = error == "file_not_found"
        if path not in before:
            if not missing_now:
                changed.append(path)  # created in a protected folder
        elif before[path] is None:
            if not missing_now:
                changed.append(path)  # a missing read-only file was created
        elif error is not None or now != before[path]:
            changed.append(path)
    return changed


def loaded_snapshot(
    state: Mapping[str, Any],
    files: Sequence[str],
    folders: Sequence[str],
    backend: Any,
    *,
    discovered: Sequence[str] = (),
) -> dict[str, str | None]:
    """The read-only files as the run last loaded them (backend path -> text, None when it did
    not exist); unreadable files are left out (nothing to put back).

    `files` are the configured ones: the run's load looked for each, so one it did not find
    did not exist. `discovered` are the nested and imported files any load of the process
    found: only those this run's load knows are compared (a nested file another run loaded
    is absent from this run's state, which does not mean it did not exist: it is left alone).
    """
    memory = state.get("memory_loaded") or {}
    extras = memory.get("extras") or {}
    contents = {
        **(extras.get("imports") or {}),
        **(extras.get("nested") or {}),
        **(state.get("memory_contents") or {}),
    }
    # Import targets this run looked for and did not find (None: put back as absent).
    looked_for = {target for targets in (extras.get("edges") or {}).values() for target in targets}
    rules = memory.get("rule_files") or {}
    unreadable = memory.get("unreadable") or {}
    baseline: dict[str, str | None] = {}
    known = set(files)
    for path in [*files, *(p for p in discovered if p not in known)]:
        if path in unreadable or (path not in known and path not in contents.keys() | looked_for):
            continue
        where = backend_path(backend, path)
        if where is not None:
            baseline[where] = contents.get(path)
    for path, text in rules.items():
        where = backend_path(backend, path)
        if where is not None and any(where.startswith(f.rstrip("/") + "/") for f in folders):
            baseline[where] = text
    return baseline


def drifted_from_loaded(baseline: Mapping[str, str | None], responses: Sequence[Any]) -> list[str]:
    """Paths whose current text differs from what the run loaded (decoded the loader's way,
    so a byte-order mark or other encoding detail is not a change)."""
    changed = []
    for (path, text), response in zip(baseline.items(), responses, strict=False):
        error = getattr(response, "error", None)
        if text is None:
            if error != "file_not_found":
                changed.append(path)
            continue
        content = getattr(response, "content", None)
        decoded = decode_content(content)[0] if error is None and content is not None else None
        if decoded != text:
            changed.append(path)
    return changed


def put_back(
    backend: Any,
    before: Mapping[str, bytes | None],
    changed: Sequence[str],
    *,
    delete: Callable[[str], Any],
    clear: Callable[[str], bool] = lambda _path: False,
) -> Outcome:
    """Write `changed` files back as `before` has them (None: remove what appeared), removing
    whatever now occupies a path first (a symlink or a folder swapped in, or whatever made a
    plain write fail), then read them all again.

    Args:
        backend: Answers `upload_files` / `download_files` without the guard.
        before: The bytes to put back.
        changed: The paths to put back.
        delete: Removes a path without the guard.
        clear: Removes a symlink or folder swapped in on local disk (see
            `_guard_places.clear_swapped_on_disk`).
    """
    for path in changed:
        if before.get(path) is not None:
            clear(path)
    uploads = [(path, content) for path in changed if (content := before.get(path)) is not None]
    if uploads:
        answers = backend.upload_files(uploads)
        for (path, _content), answer in zip(uploads, answers, strict=False):
            if getattr(answer, "error", None) is not None:
                delete(path)  # a folder or a symlink stands there now: clear it, then retry
        retry = [item for item, answer in zip(uploads, answers, strict=False) if answer.error]
        if retry:
            backend.upload_files(retry)
    for path in changed:
        if before.get(path) is None and not clear(path):
            delete(path)  # a plain file that appeared (a link is cleared, never followed)
    return _verify(backend, before, changed)


def _verify(backend: Any, before: Mapping[str, bytes | None], changed: Sequence[str]) -> Outcome:
    answers = backend.download_files(list(changed))
    restored: list[str] = []
    failed: dict[str, str] = {}
    for path, answer in zip(changed, answers, strict=False):
        error = getattr(answer, "error", None)
        wanted = before.get(path)
        if wanted is None:
            ok = error == "file_not_found"
        else:
            ok = error is None and getattr(answer, "content", None) == wanted
        if ok:
            restored.append(path)
        else:
            failed[path] = f"still {error or 'different'}"
    if failed:
        logger.error("read-only memory could not be put back: %s", ", ".join(failed))
    if restored:
        logger.warning("a shell command changed read-only memory; restored %s", ", ".join(restored))
    return Outcome(tuple(restored), failed)
