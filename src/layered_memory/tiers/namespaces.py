"""Where a user's memory lives in the store: the checked prefix, the checked user id and
the hashed namespace (`user_namespace`). Public: the CLI and the tests name a user's
namespace with `check_prefix` / `user_namespace`."""

from __future__ import annotations

import hashlib
import re
from typing import Final

from layered_memory.errors import TierUserIdError

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_USER_ID_CHARS",
    "check_prefix",
    "check_user_id",
    "is_user_namespace",
    "listed_user",
    "user_namespace",
]

DEFAULT_NAMESPACE: Final = ("layered_memory", "tiers")
MAX_USER_ID_CHARS: Final = 1024
_SURROGATE_RE: Final = re.compile(r"[\ud800-\udfff]")
_USER_PART: Final = re.compile(r"u[0-9a-f]{32}")


def check_prefix(prefix: tuple[str, ...]) -> tuple[str, ...]:
    """A namespace prefix, checked: non-empty strings without `.` (PostgresStore's separator)."""
    if not isinstance(prefix, tuple) or not prefix:
        msg = f"namespace must be a non-empty tuple of strings, got {prefix!r}"
        raise ValueError(msg)
    for part in prefix:
        if not isinstance(part, str) or not part or "." in part or "*" in part:
            msg = (
                f"namespace part {part!r} must be a non-empty string without '.' "
                "(PostgresStore's separator) or '*'"
            )
            raise ValueError(msg)
    return prefix


def check_user_id(user_id: object) -> str:
    """The user id, checked: a non-empty string of at most 1,024 characters, without NUL or
    surrogate code points.

    The state record keeps the id as it is, and PostgreSQL stores neither NUL nor a lone
    surrogate in a JSON value: such an id would have every write refused (every page lost),
    so it is refused here, before any, with the reason.
    """
    if not isinstance(user_id, str):
        raise TierUserIdError(user_id, f"must be a string, not {type(user_id).__name__}")
    if not user_id.strip():
        raise TierUserIdError(user_id, "must not be empty")
    if len(user_id) > MAX_USER_ID_CHARS:
        raise TierUserIdError(user_id, f"longer than {MAX_USER_ID_CHARS} characters")
    if "\x00" in user_id:
        raise TierUserIdError(user_id, "user_id contains NUL (\\x00): PostgreSQL cannot store it")
    if _SURROGATE_RE.search(user_id):
        reason = "user_id contains a surrogate (\\ud800-\\udfff): PostgreSQL cannot store it"
        raise TierUserIdError(user_id, reason)
    return user_id


def user_namespace(prefix: tuple[str, ...], user_id: str) -> tuple[str, ...]:
    """The namespace of one user's memory: `prefix + ("u" + 32 hex digits of a hash,)`.

    The id is hashed, never used as it is: PostgresStore joins namespace parts with `.` and
    lists by prefix, so a raw `ada` would prefix `ada.x`, and `/`, control characters or a
    megabyte-long id would reach the store's keys. A fixed-length hex digest cannot prefix
    another one, and 128 bits make collisions a non-issue.
    """
    digest = hashlib.blake2b(
        check_user_id(user_id).encode("utf-8", "surrogatepass"),
        digest_size=16,
        person=b"lm-tiers-user",
    ).hexdigest()
    return (*prefix, f"u{digest}")


def is_user_namespace(prefix: tuple[str, ...], namespace: tuple[str, ...]) -> bool:
    """Whether a listed namespace is one user's: the prefix and one `u` + 32 hex digits part.

    A store lists by prefix (PostgresStore with a pattern, where `_` is a wildcard too), so
    a neighbouring prefix's namespaces may come back: they are not users of this one.
    """
    return (
        len(namespace) == len(prefix) + 1
        and tuple(namespace[: len(prefix)]) == prefix
        and _USER_PART.fullmatch(namespace[-1]) is not None
    )


def listed_user(prefix: tuple[str, ...], namespace: tuple[str, ...], state: object) -> str | None:
    """The user id a user's namespace belongs to, from its `state` record, or None.

    The namespace holds only a hash of the id; the state record keeps the id itself. It is
    believed only when it hashes to this very namespace: a record edited (or copied from
    another user's namespace) never names a user it does not belong to.
    """
    user_id = state.get("user_id") if isinstance(state, dict) else None
    try:
        belongs = user_namespace(prefix, user_id) == tuple(namespace)  # type: ignore[arg-type]
    except TierUserIdError:
        return None
    return user_id if belongs else None  # type: ignore[return-value]
