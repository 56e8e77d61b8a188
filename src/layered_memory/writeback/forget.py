"""Forgetting a subject in memory files: the lines that name it, and the review queue beside.

A subject is named when it appears as a whole word (or words), whatever the case, the Unicode
form (NFKC: a full-width or ligature spelling is the same name) or invisible characters inside
it (`Ac<zero-width space>me` names Acme); runs of white space count as one space. A match is
one linear regex search of the normalised line: a hostile file costs its length.

Each writable file is rewritten through `core.files.transact` (its lock, read under it, one
atomic replace), so a writer that appended a line naming the subject a moment before is seen,
and one appending after waits for the lock. The review queue (`MEMORY.pending.json`) is
changed in the same transaction as its memory file. A dry run runs the same transform under
the lock and writes nothing. Read-only files are read, never changed: the caller lists them.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layered_memory._logs import get_logger
from layered_memory.core.files import atransact, transact
from layered_memory.core.loading import adownload_files_safely, download_files_safely
from layered_memory.safety.defuse import drop_invisible
from layered_memory.writeback.review_queue import (
    Change,
    Queue,
    advance_generation,
    commit_generation,
    queue_binding,
    queue_text,
    read_queue,
    review_key,
)

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol

logger = get_logger(__name__)

__all__ = [
    "FileForgotten",
    "SubjectMatcher",
    "aforget_in_file",
    "aread_only_naming",
    "forget_in_file",
    "forget_in_queue",
    "forget_lines",
    "read_only_naming",
]

_SPACE = re.compile(r"\s+")


def _normalised(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", drop_invisible(text)).casefold())


class SubjectMatcher:
    """Whether a text names a subject (whole words, any case, Unicode-normalised).

    Args:
        subject: The name to forget (e.g. `"Acme Corp"`).

    Raises:
        ValueError: The subject is empty once normalised (only spaces or invisible characters).
    """

    def __init__(self, subject: str) -> None:
        if not isinstance(subject, str):
            msg = f"subject must be a str; got {type(subject).__name__}"
            raise TypeError(msg)
        normal = _normalised(subject).strip()
        if not normal:
            msg = f"subject {subject!r} is empty once spaces and invisible characters are removed"
            raise ValueError(msg)
        self.subject = subject
        # Word edges only where the subject itself starts or ends with a word character:
        # `C++` is named in "likes C++." although `+` is no word character.
        start = r"(?<!\w)" if re.match(r"\w", normal) else ""
        end = r"(?!\w)" if re.search(r"\w$", normal) else ""
        self._pattern = re.compile(start + re.escape(normal) + end)

    def names(self, text: str) -> bool:
        """Whether `text` names the subject.

        Args:
            text: Any text.

        Returns:
            True when the subject appears in it as a whole word.
        """
        return self._pattern.search(_normalised(text)) is not None


def forget_lines(text: str, matcher: SubjectMatcher) -> tuple[str, list[str]]:
    """`text` without the lines that name the subject.

    Args:
        text: A memory file's text.
        matcher: The subject.

    Returns:
        The new text and the removed lines (in file order).
    """
    kept: list[str] = []
    removed: list[str] = []
    for line in text.split("\n"):
        (removed if matcher.names(line) else kept).append(line)
    return "\n".join(kept), removed


def forget_in_queue(
    text: str | None,
    matcher: SubjectMatcher,
    *,
    memory_path: str,
    binding: str = "",
    dry_run: bool = False,
) -> tuple[str | None, int]:
    """The review queue's text without the queued changes that name the subject.

    The queue is read and written with its own seals (`writeback.review_queue`): the changes
    that stay keep their seals, and the list is sealed again as the package writes it. A
    change (sealed or not) or an unreadable item names the subject when any of its strings
    does. A queue that cannot be read at all is left as it is (`layered-memory review` says
    why).

    Args:
        text: The queue file's text (None: no queue).
        matcher: The subject.
        memory_path: The memory file the queue belongs to (named in the file).
        binding: Where the queue lives (`review_queue.queue_binding`): its seals bind it.
        dry_run: Nothing will be written: no new generation is announced.

    Returns:
        The new text (None: unchanged) and how many changes were removed.
    """
    if not text or not matcher.names(text):
        return None, 0  # the usual case: the key file is not even read
    key = review_key()
    queue = read_queue(text, key, binding=binding)
    if queue.problem is not None:
        return None, 0
    kept = [change for change in queue.changes if not _names_change(change, queue, matcher)]
    foreign = [item for item in queue.foreign if not _names_any(item, matcher)]
    removed = len(queue.changes) - len(kept) + len(queue.foreign) - len(foreign)
    if not removed:
        return None, 0
    queue.changes, queue.foreign = kept, foreign
    generation = None if dry_run else advance_generation(binding, len(queue.changes))
    return (
        queue_text(queue, memory_path=memory_path, key=key, binding=binding, generation=generation),
        removed,
    )


def _names_any(value: Any, matcher: SubjectMatcher) -> bool:
    if isinstance(value, str):
        return matcher.names(value)
    if isinstance(value, Mapping):
        return any(_names_any(item, matcher) for item in value.values())
    if isinstance(value, list):
        return any(_names_any(item, matcher) for item in value)
    return False


def _names_change(change: Change, queue: Queue, matcher: SubjectMatcher) -> bool:
    fields = (change.text, change.entry_text, change.reason, change.entry_id, change.thread_id)
    return any(isinstance(value, str) and matcher.names(value) for value in fields) or (
        change.id in queue.raw and _names_any(queue.raw[change.id], matcher)
    )


@dataclass(frozen=True, slots=True)
class FileForgotten:
    """What forgetting did (or would do, on a dry run) to one memory file.

    Attributes:
        path: The memory file.
        lines: The lines removed.
        queue_path: Its review queue, if one was checked.
        queued: Queued changes removed from the review queue.
    """

    path: str
    lines: tuple[str, ...]
    queue_path: str | None = None
    queued: int = 0

    def __bool__(self) -> bool:
        return bool(self.lines or self.queued)


def _transform(
    path: str, queue_path: str | None, matcher: SubjectMatcher, dry_run: bool, binding: str
) -> Callable[[Mapping[str, str | None]], tuple[dict[str, str], FileForgotten]]:
    def transform(texts: Mapping[str, str | None]) -> tuple[dict[str, str], FileForgotten]:
        writes: dict[str, str] = {}
        text = texts.get(path)
        removed: list[str] = []
        if text is not None:
            new, removed = forget_lines(text, matcher)
            if removed:
                writes[path] = new
        else:  # a typo in a path must not read as "nothing names it there"
            logger.warning(
                "forget: memory file %s does not exist: nothing was searched there (check the "
                "path given in files= / --layer)",
                path,
            )
        queued = 0
        if queue_path is not None:
            new_queue, queued = forget_in_queue(
                texts.get(queue_path), matcher, memory_path=path, binding=binding, dry_run=dry_run
            )
            if new_queue is not None:
                writes[queue_path] = new_queue
        found = FileForgotten(path, tuple(removed), queue_path, queued)
        return ({} if dry_run else writes), found

    return transform


def forget_in_file(
    backend: BackendProtocol,
    path: str,
    matcher: SubjectMatcher,
    *,
    queue_path: str | None = None,
    dry_run: bool = False,
) -> FileForgotten:
    """Remove the lines of a writable memory file (and the queued changes of its review queue)
    that name the subject, in one locked transaction.

    Args:
        backend: Where the file lives.
        path: The writable memory file.
        matcher: The subject.
        queue_path: Its review queue (`MEMORY.pending.json`), changed in the same transaction.
        dry_run: Read under the lock, write nothing.

    Returns:
        What was (or would be) removed.

    Raises:
        MemoryWriteError: The file could not be locked, read or written, or is read-only
            memory of a protected backend; nothing was written.
    """
    paths = [path] if queue_path is None else [path, queue_path]
    binding = queue_binding(backend, queue_path) if queue_path is not None else ""
    found = transact(backend, paths, _transform(path, queue_path, matcher, dry_run, binding))
    if found.queued and not dry_run:
        commit_generation(binding)  # only once the queue file holds the new generation
    return found


async def aforget_in_file(
    backend: BackendProtocol,
    path: str,
    matcher: SubjectMatcher,
    *,
    queue_path: str | None = None,
    dry_run: bool = False,
) -> FileForgotten:
    """Async twin of `forget_in_file`.

    Args:
        backend: Where the file lives.
        path: The writable memory file.
        matcher: The subject.
        queue_path: Its review queue.
        dry_run: Write nothing.

    Returns:
        What was (or would be) removed.
    """
    paths = [path] if queue_path is None else [path, queue_path]
    # The binding resolves the backend's folder on the disk: off the event loop.
    binding = (
        await asyncio.to_thread(queue_binding, backend, queue_path)
        if queue_path is not None
        else ""
    )
    found = await atransact(backend, paths, _transform(path, queue_path, matcher, dry_run, binding))
    if found.queued and not dry_run:
        await asyncio.to_thread(commit_generation, binding)
    return found


def read_only_naming(
    backend: BackendProtocol, paths: Sequence[str], matcher: SubjectMatcher
) -> list[str]:
    """The read-only files among `paths` that name the subject (never changed: listed).

    Args:
        backend: Where the files live.
        paths: Read-only memory files (and rule files).
        matcher: The subject.

    Returns:
        The paths whose text names it, in the order given.
    """
    if not paths:
        return []
    return _naming(paths, download_files_safely(backend, list(paths)), matcher)


async def aread_only_naming(
    backend: BackendProtocol, paths: Sequence[str], matcher: SubjectMatcher
) -> list[str]:
    """Async twin of `read_only_naming` (the files are read off the event loop).

    Args:
        backend: Where the files live.
        paths: Read-only memory files (and rule files).
        matcher: The subject.

    Returns:
        The paths whose text names it, in the order given.
    """
    if not paths:
        return []
    return _naming(paths, await adownload_files_safely(backend, list(paths)), matcher)


def _naming(paths: Sequence[str], responses: Sequence[Any], matcher: SubjectMatcher) -> list[str]:
    found: list[str] = []
    for path, response in zip(paths, responses, strict=True):
        content = getattr(response, "content", None)
        if content is None:
            logger.warning(
                "forget: read-only file %s could not be read (%s): not searched (check the path "
                "given in read_only= / --layer)",
                path,
                getattr(response, "error", None) or "no such file",
            )
            continue
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content)
        if any(matcher.names(line) for line in text.split("\n")):
            found.append(path)
    return found
