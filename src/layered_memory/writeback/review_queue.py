"""The review queue: changes to a learned section that wait for a person, each bound to its
exact text and sealed by this package.

A change the consolidator may not apply on its own (a lesson held for review, `review=True`,
an entry another writer changed) waits in a JSON file beside the memory file
(`MEMORY.pending.json`), in the same backend, so another process or a person with
`layered-memory review` lists and decides it. Three things make what a reviewer approves the
thing the reviewer saw:

- **The id is the text.** A change's id is the full SHA-256 of what it does (operation, entry,
  exact text): 256 bits, computed again whenever the queue is read, never read from the file.
  A text changed in the file has another id, so `approve ID` can never apply a text nobody
  listed; the CLI shows a 12-digit prefix and resolves a prefix to exactly one full id, as
  git does (`resolve`).
- **The seal.** Each queued change carries an HMAC-SHA256 of all its fields (the id, the
  texts, the reason, the provenance) under a key that lives in the user's state folder
  (`review_key`), outside the project and outside any backend the agent is given. A change
  whose seal is missing or wrong was written or edited by something other than this package:
  it is listed as untrusted, with why (`Change.untrusted`), never approved, and only a
  person's `reject` removes it. The list as a whole is sealed too (`Queue.tampered`): a held
  change removed or reordered behind the package's back is reported.
- **Bound to its place and its generation.** Every seal also covers where the queue lives (the
  project folder and the queue's path, `queue_binding`) and the queue's generation: a number
  the package raises at each write and records in the user's state folder, beside the key
  (`advance_generation`). A copy restored from before a later write (save the file, `reject
  --all`, put it back), a copy from another project, or a queue deleted while the record says
  it held changes is reported (`Queue.tampered`) and its changes are untrusted: replaying an
  old file brings nothing back. (On a backend without a folder, a store, the seals bind the
  path and no generation is kept: the store's own history is the record.)
- **Out of the agent's reach.** `MemoryMiddleware(consolidator=...)` makes the queue
  read-only memory for the agent (its file tools, subagents, Anthropic's memory tool), so the
  guard refuses a write before it happens; the seal catches the routes the guard cannot stop
  in advance (a shell command, a process the agent left running, a hand edit).

The key is what an agent must not read: an agent with a shell running as the user, on the
user's machine, can read it, as it can read anything of the user's. Run such an agent in a
sandbox that does not mount the state folder (a container over the project) and the seal
holds. Reviewing a queue kept in a shared store from another machine needs the same key there
(copy `review.key` from the state folder).

Pure text apart from `review_key` (the key file's one read, or its creation).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, Final

from layered_memory.core.unrestored import state_dir

__all__ = [
    "GENERATIONS_FOLDER",
    "KEY_NAME",
    "MAX_QUEUE_CHARS",
    "MIN_PREFIX",
    "OPS",
    "QUEUE_OWNER",
    "QUEUE_VERSION",
    "SHOWN_ID_CHARS",
    "Change",
    "Generation",
    "Provenance",
    "Queue",
    "advance_generation",
    "change_id",
    "commit_generation",
    "generation_of",
    "new_change",
    "provenance_of",
    "queue_binding",
    "queue_text",
    "read_queue",
    "resolve",
    "review_key",
]

OPS: Final = ("add", "update", "delete")

QUEUE_VERSION: Final = 3
"""3: seals bound to the queue's place and generation. 2: full SHA-256 ids and sealed changes.
An older queue is read, its changes listed as untrusted (their seals bind no place): a reviewer
rejects them (approving needs a seal)."""
GENERATIONS_FOLDER: Final = "review-queues"
"""The folder in the user's state folder that records each queue's generation."""
MAX_QUEUE_CHARS: Final = 1_000_000
"""A review queue larger than this is not parsed (a runaway writer, or a hostile file)."""
SHOWN_ID_CHARS: Final = 12
"""Digits of an id `layered-memory review` shows (the full id is what is checked)."""
MIN_PREFIX: Final = 8
"""The shortest prefix `resolve` accepts: shorter ones name too many ids to mean one."""
KEY_NAME: Final = "review.key"
QUEUE_OWNER: Final = (
    "the review queue of learned lessons, read-only for the agent (a person decides it with "
    "`layered-memory review`)"
)
"""How the guard names the queue when it refuses an agent's write."""

_ID_DOMAIN: Final = "layered-memory/change/2"
_SEAL_DOMAIN: Final = b"layered-memory/review-queue/3\x00"
_SEAL_PREFIX: Final = "hmac-sha256:"
_KEY_BYTES: Final = 32


# --- Values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One change to the learned section: proposed, applied, waiting for review or rejected.

    Attributes:
        id: The change's own id, the full SHA-256 (64 hex digits) of `op`, `entry_id` and the
            exact `text`: what `approve`, `reject` and `layered-memory review` name.
        op: `"add"`, `"update"` or `"delete"` (for a malformed operation: what the model sent).
        entry_id: The entry it changes; for an applied add, the new entry's id.
        text: The entry's new text (redacted, one line); None for a delete.
        reason: Why it waits for review or was rejected, or what else happened to it (merged
            into another entry); None when it was applied as asked.
        thread_id: The run it was learned from.
        model: The model that proposed it.
        date: When it was proposed (ISO date).
        entry_text: For an update or a delete: the entry's text when the change was proposed.
        untrusted: For a queued change: why it is not trusted (it was written or changed by
            something other than this package: no seal, a wrong seal, a text changed since
            it was queued). Such a change is never approved, only rejected. None otherwise.
        cites: For an add or update: what the lesson cites, each span with its digest when
            the change was proposed (`a@d1,b#L3-5@d2`, `core.staleness`); "" drops the
            entry's cites; None keeps them as they are.
    """

    id: str
    op: str
    entry_id: str | None
    text: str | None
    reason: str | None = None
    thread_id: str | None = None
    model: str | None = None
    date: str | None = None
    entry_text: str | None = None
    untrusted: str | None = None
    cites: str | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a lesson came from, as the entry's comment keeps it."""

    thread_id: str | None
    date: str
    model: str | None
    reviewed: str | None = None


def change_id(op: str, entry_id: str | None, text: str | None) -> str:
    """The id of a change: the full SHA-256 (hex) of what it does, its exact text included."""
    spelled = json.dumps([_ID_DOMAIN, op, entry_id, text], ensure_ascii=False)
    return hashlib.sha256(spelled.encode("utf-8", "surrogatepass")).hexdigest()


def new_change(
    op: str,
    entry_id: str | None,
    text: str | None,
    *,
    reason: str | None = None,
    provenance: Provenance,
    entry_text: str | None = None,
) -> Change:
    """A `Change` with its id computed and the run's provenance."""
    return Change(
        id=change_id(op, entry_id, text),
        op=op,
        entry_id=entry_id,
        text=text,
        reason=reason,
        thread_id=provenance.thread_id,
        model=provenance.model,
        date=provenance.date,
        entry_text=entry_text,
    )


def provenance_of(change: Change, *, reviewed: str | None = None) -> Provenance:
    """The provenance a change carries (`reviewed`: the date a person approved it)."""
    return Provenance(
        thread_id=change.thread_id, date=change.date or "", model=change.model, reviewed=reviewed
    )


# --- The key ----------------------------------------------------------------------------------

_key_lock = threading.Lock()
_keys: dict[str, bytes] = {}
"""Keys read, by file: the key never changes once made."""


def review_key() -> bytes:
    """The key that seals the review queue: `review.key` in the user's state folder, created
    (32 random bytes, readable by the user only) on first use.

    Two processes creating it at once agree on one key: each writes its own temporary file and
    links it into place, which only the first can do; the other reads the winner's key.

    Raises:
        OSError: The state folder cannot be created or the key file cannot be read.
    """
    folder = state_dir()
    path = os.path.join(folder, KEY_NAME)
    with _key_lock:
        known = _keys.get(path)
        if known is not None:
            return known  # read once per process: async callers then never wait on the disk
        try:
            _keys[path] = _read_key(path)
            return _keys[path]
        except FileNotFoundError:
            pass
        os.makedirs(folder, mode=0o700, exist_ok=True)
        temporary = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "w", encoding="ascii") as stream:
                stream.write(secrets.token_hex(_KEY_BYTES) + "\n")
                stream.flush()
                os.fsync(stream.fileno())
            with contextlib.suppress(FileExistsError):  # another process won: its key is the key
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
        _keys[path] = _read_key(path)
        return _keys[path]


def _read_key(path: str) -> bytes:
    with open(path, encoding="ascii") as stream:
        spelled = stream.read().strip()
    try:
        key = bytes.fromhex(spelled)
    except ValueError:
        key = b""
    if len(key) < 16:
        msg = f"{path}: not a review key (64 hex digits); delete it to make a new one"
        raise OSError(msg)
    return key


def _seal(key: bytes, payload: Any) -> str:
    spelled = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    mac = hmac.new(key, _SEAL_DOMAIN + spelled.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return _SEAL_PREFIX + mac.hexdigest()


def _sealed_fields(change: Change) -> dict[str, Any]:
    # A change without cites is sealed as before cites existed: queues written then still hold.
    fields = {name: getattr(change, name) for name in _QUEUED_FIELDS}
    if fields["cites"] is None:
        del fields["cites"]
    return {"id": change.id, **fields}


# --- Where a queue lives, and its generation ------------------------------------------------


def queue_binding(backend: Any, queue_path: str) -> str:
    """Where a review queue lives, as its seals bind it: the real project folder of a
    `FilesystemBackend` (a copy in another project has another one) and the queue's path.

    Args:
        backend: The backend the queue is read from.
        queue_path: The queue's path in that backend.

    Returns:
        `folder:<real folder>:<path>` for a backend on a folder (a generation is kept for it),
        `path:<path>` for any other (a store: no generation).
    """
    root = getattr(backend, "cwd", None)
    if root is None:
        return f"path:{queue_path}"
    return f"folder:{os.path.realpath(os.fspath(root))}:{queue_path}"


@dataclass(frozen=True, slots=True)
class Generation:
    """The last queue this package wrote for one binding, as the state folder records it.

    Attributes:
        number: Raised by one at each write.
        changes: How many changes that queue held.
    """

    number: int
    changes: int
    pending: tuple[int, ...] = ()
    """Writes announced by `advance_generation` and not confirmed by `commit_generation`
    (a crash came in between): the file may hold any of them."""


_generation_lock = threading.Lock()
MAX_PENDING: Final = 16


def _generation_path(binding: str) -> str:
    digest = hashlib.sha256(binding.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return os.path.join(state_dir(), GENERATIONS_FOLDER, f"{digest}.json")


def generation_of(binding: str) -> Generation | None:
    """The generation recorded for the queue at `binding`.

    Args:
        binding: Where the queue lives (`queue_binding`).

    Returns:
        The record; None when this state folder never wrote that queue, or for a binding
        without a folder.

    Raises:
        OSError: The record exists and cannot be read.
    """
    if not binding.startswith("folder:"):
        return None
    try:
        with open(_generation_path(binding), encoding="utf-8") as stream:
            data = json.load(stream)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        msg = f"{_generation_path(binding)}: not a review queue record ({exc}); delete it"
        raise OSError(msg) from exc
    number, changes = data.get("generation"), data.get("changes")
    pending, pending_changes = data.get("pending"), data.get("pending_changes")
    if not isinstance(number, int) or not isinstance(changes, int):
        msg = f"{_generation_path(binding)}: not a review queue record; delete it"
        raise OSError(msg)
    if (
        not isinstance(pending, list)
        or not all(isinstance(n, int) for n in pending)
        or not isinstance(pending_changes, int)
    ):
        return Generation(number, changes)
    return Generation(number, changes, tuple(pending))


def _write_record(binding: str, record: dict[str, Any]) -> None:
    path = _generation_path(binding)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    with open(temporary, "w", encoding="utf-8") as stream:
        json.dump({"binding": binding, **record}, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)


def advance_generation(binding: str, changes: int) -> int | None:
    """Announce the next write of the queue at `binding` and return its generation.

    Called under the queue's write lock (`core.files`), so writers of one queue take turns. The
    record keeps the last confirmed generation beside the announced one until
    `commit_generation` confirms it after the write: a crash in between leaves a queue of
    either generation, and both are trusted (a held change is never lost to a crash), while a
    copy of any earlier generation is reported as an older copy.

    Args:
        binding: Where the queue lives (`queue_binding`).
        changes: How many changes the queue about to be written holds.

    Returns:
        The new generation, to seal the queue with; None for a binding without a folder.

    Raises:
        OSError: The state folder cannot be written.
    """
    if not binding.startswith("folder:"):
        return None
    with _generation_lock:
        known = generation_of(binding)
        confirmed = known if known is not None else Generation(0, 0)
        number = max((confirmed.number, *confirmed.pending)) + 1
        _write_record(
            binding,
            {
                "generation": confirmed.number,
                "changes": confirmed.changes,
                # every unconfirmed write stays acceptable until one is confirmed: a crash
                # after any of them leaves that one in the file (at most MAX_PENDING kept)
                "pending": [*confirmed.pending, number][-MAX_PENDING:],
                "pending_changes": changes,
            },
        )
    return number


def commit_generation(binding: str) -> None:
    """Confirm the write `advance_generation` announced, once the queue file holds it.

    Args:
        binding: Where the queue lives (`queue_binding`).

    Raises:
        OSError: The state folder cannot be written.
    """
    if not binding.startswith("folder:"):
        return
    with _generation_lock:
        path = _generation_path(binding)
        try:
            with open(path, encoding="utf-8") as stream:
                data = json.load(stream)
        except (FileNotFoundError, ValueError):
            return
        pending, pending_changes = data.get("pending"), data.get("pending_changes")
        if isinstance(pending, list) and pending and isinstance(pending_changes, int):
            _write_record(binding, {"generation": pending[-1], "changes": pending_changes})


# --- The queue --------------------------------------------------------------------------------


@dataclass(slots=True)
class Queue:
    """The review queue as read.

    Attributes:
        changes: The changes waiting, oldest first (untrusted ones included, marked).
        foreign: Items that are not a readable change; written back as they were.
        problem: Why the file cannot be read (it is then left as it is: nothing is added to
            or removed from it until it is fixed or deleted).
        tampered: Why the queue as a whole is not as this package last wrote it (a change
            removed, added or reordered by something else), or None.
        raw: The items of untrusted changes as read, by id: written back unchanged, never
            sealed again (sealing would launder them).
    """

    changes: list[Change] = field(default_factory=list)
    foreign: list[Any] = field(default_factory=list)
    problem: str | None = None
    tampered: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    def trusted(self) -> list[Change]:
        """The changes this package queued and nobody changed since."""
        return [change for change in self.changes if change.untrusted is None]


_QUEUED_FIELDS: Final = (
    "op",
    "entry_id",
    "text",
    "reason",
    "thread_id",
    "model",
    "date",
    "entry_text",
    "cites",
)

_NO_SEAL: Final = (
    "it carries no seal: layered-memory did not queue it (or an older version did), so what "
    "it says cannot be trusted"
)
_BAD_SEAL: Final = (
    "its seal does not match: it was written or changed outside layered-memory after it was queued"
)


def read_queue(text: str | None, key: bytes, *, binding: str = "") -> Queue:
    """The review queue file's text (None: no file yet) as a `Queue`, each change checked
    against its seal under `key`, its place (`binding`, see `queue_binding`) and the
    generation the state folder records for that place.

    Raises:
        OSError: The generation record exists and cannot be read.
    """
    recorded = generation_of(binding) if binding else None
    if text is None or not text.strip():
        if recorded is not None and recorded.changes:
            return Queue(
                tampered=(
                    f"the review queue was deleted outside layered-memory: the last one it "
                    f"wrote (generation {recorded.number}) held {recorded.changes} change(s) "
                    "waiting for review"
                )
            )
        return Queue()
    if len(text) > MAX_QUEUE_CHARS:
        return Queue(problem=f"larger than {MAX_QUEUE_CHARS:,} characters")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Queue(problem=f"not valid JSON ({type(exc).__name__})")
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        return Queue(problem='not a review queue (no "changes" list)')
    generation = data.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool):
        generation = None
    stale = _stale(generation, recorded, binding)
    place = {"binding": binding, "generation": generation}
    queue = Queue()
    seen: set[str] = set()
    for item in data["changes"]:
        change = _queued_change(item, key, place, stale)
        if change is None or change.id in seen:
            queue.foreign.append(item)
            continue
        seen.add(change.id)
        queue.changes.append(change)
        if change.untrusted is not None:
            queue.raw[change.id] = item
    if stale is not None:
        queue.tampered = stale
    elif data.get("seal") != _list_seal(key, place, queue):
        queue.tampered = (
            "the list of changes is not as layered-memory last wrote it: a change was removed, "
            "added or reordered by something else"
        )
    return queue


def _stale(generation: int | None, recorded: Generation | None, binding: str) -> str | None:
    """Why a queue's generation is not the one the state folder records, or None."""
    if not binding.startswith("folder:"):
        return None
    if recorded is None and generation is not None:
        return (
            f"this state folder has no record of a queue written here, yet the file says "
            f"generation {generation}: it was copied from another project or machine (or "
            "the state folder was reset)"
        )
    if (
        recorded is not None
        and generation != recorded.number
        and generation not in recorded.pending
    ):
        return (
            f"it is an older copy of the queue (generation {generation}; layered-memory last "
            f"wrote generation {recorded.number} here): a restored or copied file brings "
            "nothing back"
        )
    return None


def _list_seal(key: bytes, place: dict[str, Any], queue: Queue) -> str:
    """The seal of the list: every change's id in order (trusted or not: one appended beside
    them is seen) and the number of unreadable items, at this place and generation."""
    return _seal(
        key, {**place, "ids": [change.id for change in queue.changes], "other": len(queue.foreign)}
    )


def _queued_change(
    item: Any, key: bytes, place: dict[str, Any], stale: str | None
) -> Change | None:
    if not isinstance(item, dict):
        return None
    values = {name: item.get(name) for name in _QUEUED_FIELDS}
    if values["op"] not in OPS or not all(
        value is None or isinstance(value, str) for value in values.values()
    ):
        return None
    if (values["op"] == "delete") == isinstance(values["text"], str) or (
        values["op"] != "add" and not values["entry_id"]
    ):
        return None
    # The id is never read from the file: a text edited there gets another id.
    change = Change(id=change_id(values["op"], values["entry_id"], values["text"]), **values)  # type: ignore[arg-type]
    stored_id, seal = item.get("id"), item.get("seal")
    if isinstance(stored_id, str) and stored_id != change.id:
        why = (
            f"its text was changed since it was queued (queued as {stored_id[:SHOWN_ID_CHARS]}"
            f"…, its text is now {change.id[:SHOWN_ID_CHARS]}…)"
        )
    elif not isinstance(seal, str):
        why = _NO_SEAL
    elif stale is not None:
        why = stale
    elif not hmac.compare_digest(seal, _seal(key, {**_sealed_fields(change), **place})):
        why = _BAD_SEAL
    else:
        return change
    return Change(**{**_sealed_fields(change), "untrusted": why})


def queue_text(
    queue: Queue,
    *,
    memory_path: str,
    key: bytes,
    binding: str = "",
    generation: int | None = None,
) -> str:
    """The review queue file for `queue`: trusted changes sealed (with the queue's `binding`
    and `generation`, see `advance_generation`), untrusted ones as read."""
    place = {"binding": binding, "generation": generation}
    changes: list[Any] = []
    for change in queue.changes:
        if change.untrusted is not None:
            changes.append(queue.raw.get(change.id, _sealed_fields(change)))
        else:
            fields = _sealed_fields(change)
            changes.append({**fields, "seal": _seal(key, {**fields, **place})})
    document = {
        "version": QUEUE_VERSION,
        "generation": generation,
        "about": (
            f"Changes to {memory_path} waiting for review: list, approve or reject them with "
            "`layered-memory review`. Each change is sealed by layered-memory: one edited "
            "here is never approved."
        ),
        "seal": _list_seal(key, place, queue),
        "changes": [*changes, *queue.foreign],
    }
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def resolve(queue: Queue, wanted: str) -> Change | str:
    """The one change `wanted` names (its full id or a unique prefix of at least `MIN_PREFIX`
    digits), or why none is named: unknown, too short, the prefix of several, or the id a
    change was queued with while its text has changed since (approving it is refused)."""
    wanted = wanted.strip().lower()
    exact = [change for change in queue.changes if change.id == wanted]
    if exact:
        return exact[0]
    if len(wanted) < MIN_PREFIX:
        return f"an id prefix needs at least {MIN_PREFIX} digits, got {wanted!r}"
    found = [change for change in queue.changes if change.id.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(change.id[: SHOWN_ID_CHARS + 4] for change in found[:5])
        return f"{wanted!r} is the prefix of {len(found)} changes ({shown}): give more digits"
    for change_id_now, item in queue.raw.items():
        stored = item.get("id") if isinstance(item, dict) else None
        if isinstance(stored, str) and stored.lower().startswith(wanted):
            return (
                f"the change queued as {wanted!r} has another text now (its id is "
                f"{change_id_now[:SHOWN_ID_CHARS]}… since it was changed outside layered-memory):"
                " refused; list the queue again and reject it"
            )
    return f"no change {wanted!r} waits for review"
