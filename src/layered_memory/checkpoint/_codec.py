"""Pure helpers: Redis key names, tokens, the signed payload format and in-process snapshots.

Nothing here does I/O, so the sync and async halves of the saver share all of it.
"""

from __future__ import annotations

import hashlib
import hmac
import pickle
import secrets
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from layered_memory.errors import CheckpointCacheError

__all__ = [
    "SAFE_SERDE_TYPES",
    "Keys",
    "decode_payload",
    "encode_payload",
    "new_token",
    "restore",
    "snapshot",
]

# Serializer type tags whose decoding never runs pickle. `EncryptedSerializer` appends
# "+<cipher>"; only the part before it names the format. JsonPlusSerializer decodes "pickle"
# with `pickle.loads` when built with pickle_fallback=True: such bytes are never stored in,
# nor accepted from, Redis.
SAFE_SERDE_TYPES = frozenset({"msgpack", "json", "null", "bytes", "bytearray"})
_MAC_BYTES = 32
_SEP = b"\n"


def new_token() -> str:
    """A random token suffix (the scripts prefix it with the server's replication id)."""
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class Keys:
    """The Redis keys of one thread under a prefix.

    Attributes:
        epoch: The global epoch token (bumped by `delete_for_runs` and after outages).
        thread: Hash with the thread's version token ``v`` and one payload per namespace.
        pending: Sorted set of the thread's writes in progress (score: lease end, ms).
        global_pending: Sorted set of writes in progress that touch unknown threads.
    """

    epoch: bytes
    thread: bytes
    pending: bytes
    global_pending: bytes

    @classmethod
    def of(cls, prefix: str, thread_id: str) -> Keys:
        """Keys of ``thread_id``; the id is kept readable (``redis-cli --scan`` by prefix)."""
        base = prefix.encode()
        # surrogatepass: a thread id with a lone surrogate must not make Redis calls fail.
        tid = thread_id.encode("utf-8", "surrogatepass")
        return cls(base + b"epoch", base + b"t:" + tid, base + b"p:" + tid, base + b"pending")

    def as_list(self) -> list[bytes]:
        """KEYS of every script, in the order the scripts expect."""
        return [self.epoch, self.thread, self.pending, self.global_pending]


def payload_field(checkpoint_ns: str) -> bytes:
    """The hash field holding the latest tuple of one namespace."""
    return b"d:" + checkpoint_ns.encode("utf-8", "surrogatepass")


def _mac(key: bytes, parts: tuple[bytes, ...]) -> bytes:
    digest = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        # Length-prefixed, so no two different part lists sign the same bytes.
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.digest()


def _safe_type(type_tag: str) -> bool:
    return type_tag.split("+", 1)[0] in SAFE_SERDE_TYPES


def encode_payload(
    serde: SerializerProtocol,
    tup: CheckpointTuple,
    *,
    key: bytes,
    scope: tuple[bytes, bytes, bytes],
    version: str,
) -> bytes | None:
    """Serialize a tuple with the wrapped saver's serde, signed; None when it must not be stored.

    Args:
        serde: The wrapped saver's serializer.
        tup: The tuple as the wrapped saver returned it.
        key: The HMAC key.
        scope: Prefix, thread id and namespace (bound into the signature, so a payload cannot be
            replayed under another thread).
        version: The ``epoch|version`` the payload is valid for.

    Returns:
        ``version \\n mac type \\n data``, or None when the serde produced a type that could
        unpickle (or anything it cannot encode).
    """
    body = [tup.config, tup.checkpoint, tup.metadata, tup.parent_config, tup.pending_writes]
    try:
        type_tag, data = serde.dumps_typed(body)
    except Exception:  # the wrapped saver stored it, so only our envelope can fail
        return None
    if not _safe_type(type_tag) or "\n" in type_tag:
        return None
    head = version.encode()
    tag = type_tag.encode()
    mac = _mac(key, (*scope, head, tag, data))
    return head + _SEP + mac + tag + _SEP + data


def decode_payload(
    serde: SerializerProtocol,
    raw: bytes,
    *,
    key: bytes,
    scope: tuple[bytes, bytes, bytes],
    version: str,
) -> CheckpointTuple:
    """Check a payload read from Redis and decode it; anything odd raises.

    The signature is checked before a single byte reaches the serializer, and the type tag must
    be one whose decoding cannot unpickle (checked again after the signature, in case a signer
    was misconfigured).

    Raises:
        CheckpointCacheError: Wrong version, bad signature, unsafe type tag, or a shape that is
            not a checkpoint tuple.
    """
    thread = scope[1].decode("utf-8", "surrogatepass")
    head, sep, rest = raw.partition(_SEP)
    if not sep or head != version.encode():
        raise CheckpointCacheError(thread, "payload belongs to another version")
    mac, rest = rest[:_MAC_BYTES], rest[_MAC_BYTES:]
    tag, sep, data = rest.partition(_SEP)
    if not sep or not hmac.compare_digest(mac, _mac(key, (*scope, head, tag, data))):
        raise CheckpointCacheError(thread, "payload signature does not match")
    type_tag = tag.decode("ascii", "replace")
    if not _safe_type(type_tag):
        raise CheckpointCacheError(thread, f"payload type {type_tag!r} is not allowed")
    body = serde.loads_typed((type_tag, data))
    return _as_tuple(thread, body)


def _as_tuple(thread: str, body: Any) -> CheckpointTuple:
    if not (isinstance(body, list) and len(body) == 5):
        raise CheckpointCacheError(thread, "payload is not a checkpoint tuple")
    config, checkpoint, metadata, parent_config, writes = body
    if not (isinstance(config, dict) and isinstance(checkpoint, dict)):
        raise CheckpointCacheError(thread, "payload is not a checkpoint tuple")
    if not isinstance(metadata, dict) or not (
        parent_config is None or isinstance(parent_config, dict)
    ):
        raise CheckpointCacheError(thread, "payload is not a checkpoint tuple")
    pending = None
    if writes is not None:
        if not all(isinstance(w, list | tuple) and len(w) == 3 for w in writes):
            raise CheckpointCacheError(thread, "payload has malformed pending writes")
        pending = [(w[0], w[1], w[2]) for w in writes]
    return CheckpointTuple(config, checkpoint, metadata, parent_config, pending)  # type: ignore[arg-type]


def snapshot(tup: CheckpointTuple) -> bytes | None:
    """A private copy of a tuple, kept in this process only; None when it cannot be copied.

    Callers get their own objects on every hit, so a caller that edits a message in place
    cannot change what the next caller gets. Pickle is the fastest deep copy of a 200-message
    checkpoint (3-4x faster than `copy.deepcopy`). Safe: these bytes are made here from objects
    the wrapped saver returned, live only in this process's memory, and are never written to
    or read from Redis or disk.
    """
    try:
        return pickle.dumps(tup, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an unpicklable channel value: that thread is not kept in process
        return None


def restore(blob: bytes) -> CheckpointTuple:
    """A fresh copy of a tuple kept by `snapshot` (in-process bytes only, see there)."""
    tup: CheckpointTuple = pickle.loads(blob)
    return tup
