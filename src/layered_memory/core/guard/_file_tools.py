"""The agent's file tools on a memory file, locked and atomic: what the protected view calls.

`write_file`, `edit_file` and `upload_files` of a memory file go through `core.files`' lock and
atomic replace instead of deepagents' own methods (which truncate and rewrite in place). Each
returns None when the file is kept in the graph state (`StateBackend`): the view then lets the
backend's own method run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from deepagents.backends.protocol import (
    EditResult,
    FileUploadResponse,
    WriteResult,
)
from deepagents.backends.state import StateBackend
from deepagents.backends.utils import perform_string_replacement

from layered_memory.core.files import (
    INSIGHT_ENTRY,
    LEARNED_MARK,
    FileLockStrategy,
    InProcessLockStrategy,
    Texts,
    Transform,
    WriteStrategy,
    learned_entry,
    strategy_for,
)
from layered_memory.core.internals import (
    final_route,
)
from layered_memory.errors import MemoryWriteError

if TYPE_CHECKING:
    pass


def write_memory_file(view: Any, path: str, file: str, content: str) -> WriteResult | None:
    """`write_file` of memory file `file` (named `path` by the agent), locked and atomic."""
    strategy = _agent_strategy(view, file)
    if strategy is None:
        return None
    try:
        strategy.transact(_whole_file(path, file, content))
    except MemoryWriteError as exc:
        return WriteResult(error=_tool_error("writing", path, exc))
    return WriteResult(path=path)


async def awrite_memory_file(view: Any, path: str, file: str, content: str) -> WriteResult | None:
    """The async form of `write_memory_file`."""
    strategy = await asyncio.to_thread(_agent_strategy, view, file)  # pins on disk: off the loop
    if strategy is None:
        return None
    try:
        await strategy.atransact(_whole_file(path, file, content))
    except MemoryWriteError as exc:
        return WriteResult(error=_tool_error("writing", path, exc))
    return WriteResult(path=path)


def edit_memory_file(
    view: Any, path: str, file: str, *, old: str, new: str, replace_all: bool
) -> EditResult | None:
    """`edit_file` of memory file `file` (named `path` by the agent), locked and atomic."""
    strategy = _agent_strategy(view, file)
    if strategy is None:
        return None
    try:
        return strategy.transact(
            _edit(strategy, path, file, old=old, new=new, replace_all=replace_all)
        )
    except MemoryWriteError as exc:
        return EditResult(error=_tool_error("editing", path, exc))


async def aedit_memory_file(
    view: Any, path: str, file: str, *, old: str, new: str, replace_all: bool
) -> EditResult | None:
    """The async form of `edit_memory_file`."""
    strategy = await asyncio.to_thread(_agent_strategy, view, file)  # pins on disk: off the loop
    if strategy is None:
        return None
    try:
        return await strategy.atransact(
            _edit(strategy, path, file, old=old, new=new, replace_all=replace_all)
        )
    except MemoryWriteError as exc:
        return EditResult(error=_tool_error("editing", path, exc))


def upload_memory_file(view: Any, path: str, file: str, data: bytes) -> FileUploadResponse | None:
    """One `upload_files` entry over memory file `file`: a whole-file write of text."""
    text = _uploaded_text(data)
    if text is None:
        return FileUploadResponse(path=path, error="permission_denied")
    result = write_memory_file(view, path, file, text)
    return None if result is None else _upload_response(path, result)


async def aupload_memory_file(
    view: Any, path: str, file: str, data: bytes
) -> FileUploadResponse | None:
    """The async form of `upload_memory_file`."""
    text = _uploaded_text(data)
    if text is None:
        return FileUploadResponse(path=path, error="permission_denied")
    result = await awrite_memory_file(view, path, file, text)
    return None if result is None else _upload_response(path, result)


def _agent_strategy(view: Any, file: str) -> WriteStrategy | None:
    """The strategy for an agent's write of `file`; None when the graph state keeps it."""
    strategy = strategy_for(view, [file], checked=True)  # the view asked its guard already
    if isinstance(strategy, InProcessLockStrategy) and isinstance(
        final_route(view._layered_memory_base, file)[0], StateBackend
    ):
        return None
    return strategy


def _whole_file(path: str, file: str, content: str) -> Transform[None]:
    def transform(texts: Texts) -> tuple[dict[str, str], None]:
        dropped = _dropped_entries(texts[file], content)
        if dropped:
            raise MemoryWriteError(file, _dropped_message(path, dropped))
        return {file: content}, None

    return transform


# A quick first look before the entry patterns (the bullets `files.learned_entry` accepts).
_BULLETS: Final = frozenset(("- ", "* ", "+ "))


def _dropped_entries(old: str | None, new: str) -> list[str]:
    """The dated insight entries and learned entries of `old` that `new` lacks, in file order."""
    if not old or ("\n- " not in f"\n{old}" and LEARNED_MARK not in old):
        return []
    kept = set(new.replace("\r\n", "\n").split("\n"))
    return [
        line
        for line in old.replace("\r\n", "\n").split("\n")
        if line[:2] in _BULLETS
        and line not in kept
        and (INSIGHT_ENTRY.match(line) or learned_entry(line))
    ]


_SHOWN_ENTRY_CHARS = 200


def _dropped_message(path: str, dropped: Sequence[str]) -> str:
    first = dropped[0][:_SHOWN_ENTRY_CHARS]
    learned = sum(1 for line in dropped if learned_entry(line))
    kind = "learned" if learned == len(dropped) else "insight" if not learned else "memory"
    entries = f"1 {kind} entry" if len(dropped) == 1 else f"{len(dropped)} {kind} entries"
    return (
        f"this write would remove {entries} the file holds now (the first: {first!r}); "
        "write-back, consolidation or another run may have added them after you last read it. "
        "Read "
        f"{path} again and keep them, or remove entries on purpose with edit_file"
    )


def _edit(
    strategy: WriteStrategy, path: str, file: str, *, old: str, new: str, replace_all: bool
) -> Transform[EditResult]:
    # deepagents' `FilesystemBackend.edit` reads the file in text mode (universal newlines) and
    # writes it back with `\n`; its store and state backends keep the text as it is.
    universal = isinstance(strategy, FileLockStrategy)
    if universal:
        old, new = _lf(old), _lf(new)

    def transform(texts: Texts) -> tuple[dict[str, str], EditResult]:
        text = texts[file]
        if text is None:
            return {}, EditResult(error=f"Error: File '{path}' not found")
        replaced = perform_string_replacement(
            _lf(text) if universal else text, old, new, replace_all
        )
        if isinstance(replaced, str):
            return {}, EditResult(error=replaced)
        new_text, occurrences = replaced
        return {file: new_text}, EditResult(path=path, occurrences=int(occurrences))

    return transform


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _tool_error(doing: str, path: str, exc: MemoryWriteError) -> str:
    return f"Error {doing} file '{path}': {exc.reason}. The file was not modified."


def _uploaded_text(data: bytes) -> str | None:
    """An upload's text; None for bytes that are not UTF-8 (a memory file holds text)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _upload_response(path: str, result: WriteResult) -> FileUploadResponse:
    error = None if result.error is None else "permission_denied"
    return FileUploadResponse(path=path, error=error)
