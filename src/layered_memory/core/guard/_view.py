"""The protected view of a backend: its mutating methods ask `guard.refusal()` first, and a
shell command is surrounded by a snapshot of read-only memory and a verified put-back.

Why a view and not a wrapper object: deepagents decides what a backend can do with
`isinstance` (a `StateBackend` keeps files in state, a sandbox gets `execute`, a
`CompositeBackend` routes). The view is an instance of a generated subclass of the
backend's own class holding a shallow copy of the backend's attributes, so every such check
still holds and the storage is shared. The guard methods are copied into that subclass
rather than mixed in as a first base: the subclass keeps its backend class's instance layout
(slots included).

A sandbox built on deepagents' `BaseSandbox` runs its own `ls`, `read`, `write` ... through
`execute`: only the outermost call is guarded (a context variable marks the view's own work),
so a file listing is one command, not a snapshot, a listing and a put-back each.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from deepagents.backends.protocol import (
    DeleteResult,
    EditResult,
    ExecuteResponse,
    FileUploadResponse,
    WriteResult,
    execute_accepts_timeout,
)

from layered_memory._logs import get_logger
from layered_memory.core.guard import _file_tools
from layered_memory.core.loading import (
    DownloadResult,
    adownload_texts,
    download_files_safely,
    download_texts,
)
from layered_memory.core.protection import (
    memory_file_of,
    refusal,
    refusal_message,
    unreadable_message,
    writes_memory,
)
from layered_memory.core.put_back import Outcome, restore, run_start_in_context, taken_now
from layered_memory.safety.redaction import redact_text

if TYPE_CHECKING:
    from layered_memory.core.protection import Operation, ProtectedPaths

logger = get_logger(__name__)

_BUSY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "layered_memory_guard_busy", default=False
)
"""True while the view does its own work or runs one of the backend's own methods."""

_PASS_THROUGH = (
    "ls",
    "read",
    "grep",
    "glob",
    "download_files",
    "als",
    "aread",
    "agrep",
    "aglob",
    "adownload_files",
)
"""Reading methods: not guarded, but marked busy so a sandbox's inner `execute` is plain."""


@contextmanager
def _busy() -> Iterator[None]:
    token = _BUSY.set(True)
    try:
        yield
    finally:
        _BUSY.reset(token)


class _Own:
    """The backend class's own methods, bound to the view (past the guard), marked busy."""

    def __init__(self, view: Any) -> None:
        self._view = view

    def download_files(self, paths: list[str]) -> list[Any]:
        """The own download, except that a FIFO, socket or device is never opened: a command
        can leave one where a protected file was, and opening a FIFO waits forever."""
        return download_files_safely(self._view, paths, download=self.__getattr__("download_files"))

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._view._lm_backend_class, name).__get__(self._view)
        if asyncio.iscoroutinefunction(method):

            async def async_call(*args: Any, **kwargs: Any) -> Any:
                with _busy():
                    return await method(*args, **kwargs)

            return async_call

        def call(*args: Any, **kwargs: Any) -> Any:
            with _busy():
                return method(*args, **kwargs)

        return call


def _refused(view: Any, operation: Operation, path: str) -> str | None:
    if _BUSY.get():
        return None  # the backend's own helper, run by a guarded call already checked
    reason = refusal(view, view._layered_memory_protected, operation, path)
    if reason is not None:
        logger.warning("refused %s of %s: read-only memory", operation, path)
    return reason


def _redacted(view: Any, path: str, text: str) -> str:
    """`text` with secrets redacted when it is going into a writable memory file."""
    if _BUSY.get() or not writes_memory(view, view._layered_memory_protected, path):
        return text
    result = redact_text(text)
    if result.count:
        logger.warning(
            "redacted %d secret(s) (%s) written into memory file %s",
            result.count,
            ", ".join(sorted(result.kinds)),
            redact_text(path).text,  # the agent chose the name: it may hold a secret too
        )
    return result.text


def _message(operation: str, reason: str) -> str:
    return refusal_message(operation, reason)


# A whole-file write replaces what the file holds. Over a writable memory file that exists but
# cannot be read (not UTF-8, binary, a folder, a FIFO, a backend error) that is content nobody
# has seen: the middleware refuses the parent's `write_file` from what the run loaded, and the
# view refuses here, at the write, for every caller (a subagent has no middleware).


def _memory_file(view: Any, path: str) -> str | None:
    """The configured writable memory file a whole-file write of `path` replaces, if any."""
    if _BUSY.get():
        return None  # the backend's own helper, run by a guarded call already checked
    return memory_file_of(view, view._layered_memory_protected, path)


def _redacted_and_file(view: Any, path: str, text: str) -> tuple[str, str | None]:
    """`_redacted` and `_memory_file` at once: the async methods run both in one worker thread."""
    return _redacted(view, path, text), _memory_file(view, path)


def _unreadable(path: str, file: str, found: DownloadResult) -> str | None:
    """Why `file` (written as `path`) must not be replaced whole: it exists but could not be
    read (None: it was read, or it does not exist)."""
    reason = next((problem.reason for problem in found.problems if problem.unreadable), None)
    if reason is not None:
        logger.warning(
            "refused a whole-file write of %s: memory file %s exists but cannot be read (%s)",
            redact_text(path).text,
            file,
            reason,
        )
    return reason


def _unreadable_reason(view: Any, path: str) -> str | None:
    file = _memory_file(view, path)
    if file is None:
        return None
    with _busy():  # a sandbox reads through `execute`: its own command, not the model's
        found = download_texts(view, [file])
    return _unreadable(path, file, found)


async def _aunreadable_reason(view: Any, path: str) -> str | None:
    file = _memory_file(view, path)
    if file is None:
        return None
    with _busy():
        found = await adownload_texts(view, [file])
    return _unreadable(path, file, found)


def _unreadable_message(path: str, reason: str) -> str:
    return unreadable_message("write", path, reason)


class _FileGuard:
    """Guard methods for every backend (copied into the view class, never a base class)."""

    _lm_backend_class: type
    _layered_memory_protected: ProtectedPaths

    def write(self, file_path: str, content: str) -> WriteResult:
        reason = _refused(self, "write", file_path)
        if reason is not None:
            return WriteResult(error=_message("write", reason))
        unreadable = _unreadable_reason(self, file_path)
        if unreadable is not None:
            return WriteResult(error=_unreadable_message(file_path, unreadable))
        content = _redacted(self, file_path, content)
        file = _memory_file(self, file_path)
        if file is not None:  # one lock and an atomic replace (`core.files`)
            locked = _file_tools.write_memory_file(self, file_path, file, content)
            if locked is not None:
                return locked
        return _Own(self).write(file_path, content)  # type: ignore[no-any-return]

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        # The guard's checks resolve and stat paths on disk: off the event loop.
        reason = await asyncio.to_thread(_refused, self, "write", file_path)
        if reason is not None:
            return WriteResult(error=_message("write", reason))
        unreadable = await _aunreadable_reason(self, file_path)
        if unreadable is not None:
            return WriteResult(error=_unreadable_message(file_path, unreadable))
        content, file = await asyncio.to_thread(_redacted_and_file, self, file_path, content)
        if file is not None:
            locked = await _file_tools.awrite_memory_file(self, file_path, file, content)
            if locked is not None:
                return locked
        return await _Own(self).awrite(file_path, content)  # type: ignore[no-any-return]

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        reason = _refused(self, "edit", file_path)
        if reason is not None:
            return EditResult(error=_message("edit", reason))
        new_string = _redacted(self, file_path, new_string)
        file = _memory_file(self, file_path)
        if file is not None:  # deepagents' own edit truncates and rewrites in place, unlocked
            locked = _file_tools.edit_memory_file(
                self, file_path, file, old=old_string, new=new_string, replace_all=replace_all
            )
            if locked is not None:
                return locked
        return _Own(self).edit(file_path, old_string, new_string, replace_all)  # type: ignore[no-any-return]

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        reason = await asyncio.to_thread(_refused, self, "edit", file_path)  # off the loop
        if reason is not None:
            return EditResult(error=_message("edit", reason))
        new_string, file = await asyncio.to_thread(_redacted_and_file, self, file_path, new_string)
        if file is not None:
            locked = await _file_tools.aedit_memory_file(
                self, file_path, file, old=old_string, new=new_string, replace_all=replace_all
            )
            if locked is not None:
                return locked
        return await _Own(self).aedit(file_path, old_string, new_string, replace_all)  # type: ignore[no-any-return]

    def delete(self, file_path: str) -> DeleteResult:
        reason = _refused(self, "delete", file_path)
        if reason is not None:
            return DeleteResult(error=_message("delete", reason))
        return _Own(self).delete(file_path)  # type: ignore[no-any-return]

    async def adelete(self, file_path: str) -> DeleteResult:
        reason = await asyncio.to_thread(_refused, self, "delete", file_path)  # off the loop
        if reason is not None:
            return DeleteResult(error=_message("delete", reason))
        return await _Own(self).adelete(file_path)  # type: ignore[no-any-return]

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        # An upload replaces a file whole, as `write` does.
        unreadable = {i for i, (path, _) in enumerate(files) if _unreadable_reason(self, path)}
        refused, allowed = _split_uploads(self, files, unreadable)
        done = _uploaded(self, allowed)
        return _merge_uploads(files, refused, done)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        unreadable = {
            i for i, (path, _) in enumerate(files) if await _aunreadable_reason(self, path)
        }
        refused, allowed = await asyncio.to_thread(_split_uploads, self, files, unreadable)
        done = await _auploaded(self, allowed)
        return _merge_uploads(files, refused, done)


def _split_uploads(
    view: Any, files: Sequence[tuple[str, bytes]], unreadable: set[int]
) -> tuple[set[int], list[tuple[str, bytes]]]:
    refused = unreadable | {
        i for i, (path, _) in enumerate(files) if _refused(view, "upload", path)
    }
    return refused, [
        (path, _redacted_bytes(view, path, data))
        for i, (path, data) in enumerate(files)
        if i not in refused
    ]


def _uploaded(view: Any, allowed: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
    """Each memory file one locked whole-file write (`core.files`); the rest in one call."""
    locked = {
        i: _file_tools.upload_memory_file(view, *entry)
        for i, entry in _memory_uploads(view, allowed)
    }
    rest = [i for i in range(len(allowed)) if locked.get(i) is None]
    plain = _Own(view).upload_files([allowed[i] for i in rest]) if rest else []
    return _in_order(locked, dict(zip(rest, plain, strict=True)))


async def _auploaded(view: Any, allowed: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
    uploads = await asyncio.to_thread(_memory_uploads, view, allowed)  # stats: off the loop
    locked = {i: await _file_tools.aupload_memory_file(view, *entry) for i, entry in uploads}
    rest = [i for i in range(len(allowed)) if locked.get(i) is None]
    plain = await _Own(view).aupload_files([allowed[i] for i in rest]) if rest else []
    return _in_order(locked, dict(zip(rest, plain, strict=True)))


def _memory_uploads(
    view: Any, allowed: Sequence[tuple[str, bytes]]
) -> list[tuple[int, tuple[str, str, bytes]]]:
    """(index, (path, memory file, bytes)) of the uploads that write a memory file."""
    return [
        (index, (path, file, data))
        for index, (path, data) in enumerate(allowed)
        if (file := _memory_file(view, path)) is not None
    ]


def _in_order(
    locked: dict[int, FileUploadResponse | None], plain: dict[int, FileUploadResponse]
) -> list[FileUploadResponse]:
    """The answers in upload order (a None in `locked`: the backend kept the file in state)."""
    answers = {index: answer for index, answer in locked.items() if answer is not None}
    answers.update(plain)
    return [answers[index] for index in sorted(answers)]


def _redacted_bytes(view: Any, path: str, data: bytes) -> bytes:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data  # not text: nothing a secret scanner could read
    redacted = _redacted(view, path, text)
    return data if redacted is text else redacted.encode("utf-8")


def _merge_uploads(
    files: Sequence[tuple[str, bytes]], refused: set[int], done: Sequence[FileUploadResponse]
) -> list[FileUploadResponse]:
    answers = iter(done)
    return [
        FileUploadResponse(path=path, error="permission_denied")
        if index in refused
        else next(answers)
        for index, (path, _) in enumerate(files)
    ]


# -- the shell ---------------------------------------------------------------------------------


def _guarded_run(
    view: Any, run: Callable[[], Any], output_of: Callable[[Any], ExecuteResponse]
) -> Any:
    """Run a shell command (`run`), then put read-only memory back as the running agent's
    run-start snapshot has it (outside a run: as it was just before the command);
    `output_of` finds the `ExecuteResponse` in what `run` returns."""
    if _BUSY.get():
        return run()  # the backend's own helper command, inside a guarded call
    own = _Own(view)
    start = run_start_in_context()
    raw = None
    if start is None:
        protected = view._layered_memory_protected
        start, raw = taken_now(own, view, list(protected.all_files()), list(protected.folders))
    with _busy():
        result = run()
    outcome = restore(own, view, start, raw=raw)
    if not outcome:
        return result
    return _with_note(result, output_of(result), outcome)


def _with_note(result: Any, response: ExecuteResponse, outcome: Outcome) -> Any:
    response.output = f"{response.output}{outcome.note()}"
    return result


class _ShellGuard:
    """`execute` and `execute_with_offload` between a snapshot and a put-back."""

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        own = getattr(self._lm_backend_class, "execute")  # noqa: B009 (the class's own, past the guard)

        def run() -> ExecuteResponse:
            if timeout is None:
                return own(self, command)  # type: ignore[no-any-return]
            return own(self, command, timeout=timeout)  # type: ignore[no-any-return]

        return _guarded_run(self, run, lambda response: response)  # type: ignore[no-any-return]

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        # The check around the command is file I/O either way; one implementation, run in a
        # thread that carries the run's context variables along.
        if timeout is None:
            return await asyncio.to_thread(self.execute, command)
        return await asyncio.to_thread(self.execute, command, timeout=timeout)

    def execute_with_offload(self, command: str, capture_path: str, **kwargs: Any) -> Any:
        own = getattr(self._lm_backend_class, "execute_with_offload")  # noqa: B009

        def run() -> Any:
            return own(self, command, capture_path, **kwargs)

        return _guarded_run(self, run, lambda result: result.response)

    async def aexecute_with_offload(self, command: str, capture_path: str, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.execute_with_offload, command, capture_path, **kwargs)

    _lm_backend_class: type


class _ShellGuardWithoutTimeout(_ShellGuard):
    """For a backend whose `execute` takes no `timeout` (older sandbox packages): the view must
    not claim it does, so deepagents reports the missing feature itself."""

    def execute(self, command: str) -> ExecuteResponse:  # type: ignore[override]
        return _ShellGuard.execute(self, command)

    async def aexecute(self, command: str) -> ExecuteResponse:  # type: ignore[override]
        return await asyncio.to_thread(self.execute, command)


def _marked(method: Callable[..., Any]) -> Callable[..., Any]:
    """A reading method run with the busy mark (a sandbox's inner commands stay plain)."""
    if asyncio.iscoroutinefunction(method):

        @functools.wraps(method)
        async def async_marked(self: Any, *args: Any, **kwargs: Any) -> Any:
            with _busy():
                return await method(self, *args, **kwargs)

        return async_marked

    @functools.wraps(method)
    def marked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _busy():
            return method(self, *args, **kwargs)

    return marked


_VIEW_CLASSES: dict[type, type] = {}
_VIEW_CLASSES_LOCK = threading.Lock()


def _slots_of(klass: type) -> tuple[str, ...]:
    slots = vars(klass).get("__slots__", ())
    names = (slots,) if isinstance(slots, str) else tuple(slots)
    return tuple(name for name in names if name not in ("__dict__", "__weakref__"))


def view_class(cls: type) -> type:
    """The generated protected subclass of a backend class (one per class, cached)."""
    with _VIEW_CLASSES_LOCK:
        view = _VIEW_CLASSES.get(cls)
        if view is None:
            view = _build_view_class(cls)
            _VIEW_CLASSES[cls] = view
        return view


def _build_view_class(cls: type) -> type:
    methods: dict[str, Any] = {}
    sources: list[type] = [_FileGuard]
    if callable(getattr(cls, "execute", None)):
        sources.append(_ShellGuard if execute_accepts_timeout(cls) else _ShellGuardWithoutTimeout)
    for source in sources:
        for klass in reversed(source.__mro__[:-1]):
            methods.update((name, value) for name, value in vars(klass).items() if callable(value))
    if not callable(getattr(cls, "execute_with_offload", None)):
        methods.pop("execute_with_offload", None)
        methods.pop("aexecute_with_offload", None)
    for name in _PASS_THROUGH:
        method = getattr(cls, name, None)
        if callable(method) and "execute" in methods:
            methods[name] = _marked(method)
    methods.update(__module__=__name__, _lm_backend_class=cls, _lm_is_view=True)
    return type(f"Protected{cls.__name__}", (cls,), methods)


def make_view(backend: Any, protected: ProtectedPaths) -> Any:
    """A shallow copy of `backend` built as an instance of its protected subclass: the same
    attributes (the storage is shared), created by the subclass itself, never re-classed."""
    cls: Any = view_class(type(backend))
    view = cls.__new__(cls)
    state = getattr(backend, "__dict__", None)
    if state is not None:
        view.__dict__.update(state)
    for klass in type(backend).__mro__:
        for slot in _slots_of(klass):
            if hasattr(backend, slot):
                setattr(view, slot, getattr(backend, slot))
    view._layered_memory_protected = protected
    view._layered_memory_base = backend
    return view
