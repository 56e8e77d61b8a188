"""The package's exceptions: one base class, each error carrying the offending path or key."""

from __future__ import annotations

__all__ = [
    "CheckpointCacheError",
    "CliStoreError",
    "ConfigLoadError",
    "EntityNotFoundError",
    "FolderTooLargeError",
    "GlobError",
    "KnowledgeGraphError",
    "KnowledgeGraphInputError",
    "LayeredMemoryError",
    "MemoryContextError",
    "MemorySourceError",
    "MemoryWriteError",
    "PreviewError",
    "ReviewError",
    "RuleFileError",
    "SessionDataError",
    "SessionKeyError",
    "SessionStoreError",
    "StoreURLError",
    "StoreUnavailableError",
    "TierItemError",
    "TierStoreError",
    "TierUserIdError",
    "UsageError",
    "UserIdError",
    "VectorError",
]


class LayeredMemoryError(Exception):
    """Base class of every error this package raises on purpose."""


class MemorySourceError(LayeredMemoryError):
    """A memory source could not be used (raised only in strict mode; otherwise logged).

    Attributes:
        path: The source path as the user wrote it.
        reason: Why it was skipped, in words fit for a log line.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"memory source {path!r} skipped: {reason}")


class RuleFileError(LayeredMemoryError):
    """A rule file is invalid (raised only in strict mode; otherwise logged and skipped).

    Attributes:
        path: The rule file's path.
        reason: What is wrong with it.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"rule file {path!r} skipped: {reason}")


class GlobError(LayeredMemoryError, ValueError):
    """A glob of a rule file's `paths:` is invalid; the message says why, fit for a lint line.

    Attributes:
        reason: What is wrong with it.
        pattern: The glob as written (None when raised below the glob that holds the part).
    """

    def __init__(self, reason: str, *, pattern: str | None = None) -> None:
        self.reason = reason
        self.pattern = pattern
        super().__init__(reason)


class SessionKeyError(LayeredMemoryError, ValueError):
    """A session key or one of its parts is malformed.

    Attributes:
        key: The offending key or part.
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"invalid session key part {key!r}: {reason}")


class SessionStoreError(LayeredMemoryError):
    """A session store could not complete an operation.

    Attributes:
        key: The session key involved, if any.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(message)


class SessionDataError(SessionStoreError):
    """A stored session value cannot be read back (not JSON, not an object): corrupt or foreign.

    Attributes:
        key: The session key whose stored value is unreadable.
    """


class StoreUnavailableError(SessionStoreError):
    """The server behind a session store cannot be reached (URL given without its password)."""


class StoreURLError(SessionStoreError, ValueError):
    """A session store's connection URL is malformed.

    The message and `url` never hold the password; the driver's exception is not chained, since
    drivers echo the whole URL in their messages.

    Attributes:
        url: The URL with its password replaced by ``***``.
    """

    def __init__(self, message: str, *, url: str) -> None:
        self.url = url
        super().__init__(message)


class MemoryWriteError(LayeredMemoryError):
    """Writing an insight into a memory file failed; the file is left as it was.

    Attributes:
        path: The memory file's path.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"could not write memory file {path!r}: {reason}")


class ReviewError(LayeredMemoryError):
    """A review decision could not be made: no such change waits, or the queue is unreadable.

    Nothing was written.

    Attributes:
        path: The review queue file's backend path.
        change_id: The change asked for (None when the queue itself is the problem).
        reason: What is wrong, in words fit for a log line or the CLI.
    """

    def __init__(self, path: str, reason: str, *, change_id: str | None = None) -> None:
        self.path = path
        self.change_id = change_id
        self.reason = reason
        super().__init__(f"review queue {path!r}: {reason}")


class KnowledgeGraphError(LayeredMemoryError):
    """A knowledge-graph file or operation could not be used; the file is left as it was.

    Attributes:
        path: The graph file's backend path.
        reason: What went wrong, in words fit for a log line or a tool result.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"knowledge graph {path!r}: {reason}")


class EntityNotFoundError(KnowledgeGraphError, KeyError):
    """`add_observations` named an entity the graph does not hold (nothing was written).

    Attributes:
        path: The graph file's backend path.
        name: The unknown entity name.
    """

    def __init__(self, path: str, name: str) -> None:
        self.name = name
        # The MCP memory server's own wording, so a tool result reads the same from both.
        super().__init__(path, f"Entity with name {name} not found")

    def __str__(self) -> str:
        # KeyError would repr() the message; keep the plain sentence.
        return self.reason


class KnowledgeGraphInputError(KnowledgeGraphError, ValueError):
    """An argument of a knowledge-graph operation has the wrong shape.

    Attributes:
        path: The graph file's backend path.
        parameter: The offending argument, e.g. ``entities[2].observations``.
    """

    def __init__(self, path: str, parameter: str, reason: str) -> None:
        self.parameter = parameter
        super().__init__(path, f"invalid argument {parameter}: {reason}")


class TierUserIdError(LayeredMemoryError, ValueError):
    """A user id cannot name a user's tiered memory (not a string, empty, or too long).

    Attributes:
        user_id: The offending id, shortened to 80 characters for messages and logs.
        reason: What is wrong with it.
    """

    def __init__(self, user_id: object, reason: str) -> None:
        shown = repr(user_id)
        self.user_id = shown if len(shown) <= 80 else shown[:77] + "..."
        self.reason = reason
        super().__init__(f"invalid user id {self.user_id}: {reason}")


class TierItemError(LayeredMemoryError, KeyError):
    """No page, segment or fact with this id in the user's tiered memory.

    Attributes:
        item_id: The id asked for.
    """

    def __init__(self, item_id: str, reason: str) -> None:
        self.item_id = item_id
        self.reason = reason
        super().__init__(f"tiered memory item {item_id!r}: {reason}")

    def __str__(self) -> str:  # KeyError would print the repr of the whole message
        return str(self.args[0])


class TierStoreError(LayeredMemoryError):
    """A user's tiered memory in the store is in a layout this version does not read (written
    by an older or newer version of layered_memory). Nothing is read or written: a write
    would start the ids again and overwrite the pages kept.

    Attributes:
        where: The user's namespace component (a hash, never the user id).
        reason: The layout found, the one read, and what to do.
    """

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"tiered memory {where}: {reason}")


class CheckpointCacheError(LayeredMemoryError):
    """The Redis side of a `CachedCheckpointSaver` held something unusable for one thread.

    Never raised to callers: the saver logs it, drops the entry and answers from the wrapped
    saver.

    Attributes:
        thread_id: The thread whose cache entry was rejected.
        reason: What was wrong with it.
    """

    def __init__(self, thread_id: str, reason: str) -> None:
        self.thread_id = thread_id
        self.reason = reason
        super().__init__(f"checkpoint cache entry of thread {thread_id!r} rejected: {reason}")


class ConfigLoadError(LayeredMemoryError):
    """`--config module:attribute` did not lead to a memory middleware (the CLI exits with 2).

    Attributes:
        spec: The `--config` value as given.
        module: The module part (a dotted name or a `.py` file).
        attribute: The attribute part (dotted), or None when the value has no `:`.
    """

    def __init__(self, message: str, *, spec: str, module: str, attribute: str | None) -> None:
        self.spec = spec
        self.module = module
        self.attribute = attribute
        super().__init__(message)


class MemoryContextError(LayeredMemoryError, LookupError):
    """`current_memory()` was called outside a `memory_context()` block."""


class UserIdError(LayeredMemoryError, ValueError):
    """The run's context gives no usable user id, so there is no user namespace to use.

    Attributes:
        key: The context key that was looked up.
        reason: What is wrong (missing, empty, or containing a `.`).
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(
            f"per-user memory needs a user id in the run's context under {key!r} "
            f"(agent.invoke(..., context={{{key!r}: ...}})): {reason}; "
            "refusing to fall back to a shared namespace"
        )


class CliStoreError(LayeredMemoryError):
    """The store cannot be used; the message is one line, fit to print, without a password."""


class PreviewError(LayeredMemoryError):
    """The middleware's own code failed on the given input (a `match_keys` callable, a backend
    factory); the message names the part and the exception."""


class UsageError(Exception):
    """A bad option value; printed as one line, exit status 2."""


class VectorError(ValueError):
    """An embedding is not a finite, non-empty vector of the expected length."""


class FolderTooLargeError(Exception):
    """A folder holds more than the guard's `MAX_FOLDER_ENTRIES` entries: too many to check
    them all (internal: the guard turns it into a refusal, it never reaches the user)."""
