"""Vectors of the tiers: checked float32 matrices in memory, base64 of float32 in the store,
and the process's cache of decoded ones.

numpy in memory: a retrieval scores every page on each turn, and one matrix product does in
microseconds what a Python loop over 10,000 pages does in tens of milliseconds. Base64 of
float32 in the store: a JSON list of floats takes ~4x the bytes and is ~20x slower to decode.
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from layered_memory.errors import VectorError

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    msg = "layered_memory.tiers needs numpy: pip install 'layered-memory[tiers]'"
    raise ImportError(msg) from exc

__all__ = [
    "BY_REVISION",
    "DECODED",
    "MAX_DIM",
    "Vector",
    "as_matrix",
    "decode_matrix",
    "encode",
    "unit",
    "zeros",
]

MAX_DIM = 65_536
"""Embedding dimensions past this are refused: a record claiming `10**12` must not make a
zero vector of that size (a few real models reach 4,096; none comes near this)."""

Vector = np.ndarray[Any, np.dtype[np.float32]]


def as_matrix(rows: object, *, count: int, dim: int | None) -> Vector:
    """Embeddings as a float32 matrix, checked: `count` rows, `dim` columns, finite values."""
    try:
        matrix = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        msg = f"embeddings are not a list of equal-length float lists ({exc})"
        raise VectorError(msg) from None
    if matrix.ndim != 2 or matrix.shape[0] != count or matrix.shape[1] == 0:
        msg = f"expected {count} embeddings, got an array of shape {matrix.shape}"
        raise VectorError(msg)
    if dim is not None and matrix.shape[1] != dim:
        msg = f"embeddings have {matrix.shape[1]} dimensions, the stored ones {dim}"
        raise VectorError(msg)
    if not np.isfinite(matrix).all():
        msg = "embeddings contain NaN or infinite values"
        raise VectorError(msg)
    return matrix


def unit(vector: Vector) -> Vector:
    """`vector` scaled to length 1 (a zero vector stays zero)."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def zeros(dim: int) -> Vector:
    """A zero vector of length `dim` (at least 1)."""
    return np.zeros(max(dim, 1), dtype=np.float32)


def encode(vector: Vector) -> str:
    """A vector (or matrix) as base64 of its float32 bytes."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype=np.float32).tobytes()).decode()


def decode_matrix(text: object, rows: int, dim: int) -> Vector | None:
    """The matrix stored by `encode`, or None when it is not `rows` x `dim` of finite values."""
    if rows == 0:
        return np.zeros((0, max(dim, 1)), dtype=np.float32)
    if not isinstance(text, str) or dim <= 0:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 4 * rows * dim:
        return None
    matrix = np.frombuffer(raw, dtype=np.float32).reshape(rows, dim)
    return matrix if np.isfinite(matrix).all() else None


class _DecodedMatrices:
    """Decoded matrices by the random revision their record was written with.

    Every write of a record with vectors draws a new revision, and the revision is read from
    the store in the same call that uses the cache, so an entry can never be older than its
    record (in this process or any other). Decoding dominated retrieval time before this cache
    (base64 of every searched matrix on every turn); bounded by entry count.
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, int, int, int, str, str], Vector] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(rev: object, text: object, rows: int, dim: int) -> tuple[Any, ...] | None:
        if isinstance(rev, str) and rev and isinstance(text, str):
            # The text's length and ends too: a hand edit that kept the revision is not served.
            return (rev, rows, dim, len(text), text[:32], text[-32:])
        return None

    def _cached(self, key: tuple[Any, ...] | None) -> Vector | None:
        if key is None:
            return None
        with self._lock:
            found = self._entries.get(key)  # type: ignore[call-overload]
            if found is not None:
                self._entries.move_to_end(key)  # type: ignore[arg-type]
            return found  # type: ignore[no-any-return]

    def get(self, value: Mapping[str, Any], rows: int, dim: int) -> Vector | None:
        text = value.get("vectors")
        key = self._key(value.get("rev"), text, rows, dim)
        matrix = self._cached(key)
        if matrix is None:
            matrix = decode_matrix(text, rows, dim)
            if matrix is not None and key is not None:
                self._remember(key, matrix)
        return matrix

    def put(self, rev: str, matrix: Vector) -> str:
        """Encode `matrix`, remember it under `rev` (saves decoding it back); the text."""
        text = encode(matrix)
        key = self._key(rev, text, int(matrix.shape[0]), int(matrix.shape[1]))
        assert key is not None
        self._remember(key, matrix)
        return text

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _remember(self, key: tuple[Any, ...], matrix: Vector) -> None:
        matrix.flags.writeable = False  # shared by every reader: nobody may change it
        with self._lock:
            self._entries[key] = matrix  # type: ignore[index]
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


DECODED = _DecodedMatrices()


class _ByRevision:
    """Vectors of `vectors/<id>` records (one page or one segment each) by the random revision
    they were written with, with their unit-length copy.

    The record that lists a vector (the mid-term record lists each segment's) names its
    revision and is read in the same call that uses this cache, so a vector is read from the
    store only when its revision is new to this process, and never served older than the
    listing (in this process or any other): a writer draws a new revision for every change.
    Bounded by bytes: a consolidation at 5,000 dimensions reads no vector it already holds.
    """

    def __init__(self, max_bytes: int = 64 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[Vector, Vector]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, rev: str, dim: int) -> tuple[Vector, Vector] | None:
        """(vector, unit vector) of revision `rev` when known and of `dim` values."""
        with self._lock:
            found = self._entries.get(rev)
            if found is None or found[0].shape != (dim,):
                return None
            self._entries.move_to_end(rev)
            return found

    def put(self, rev: str, vector: Vector) -> tuple[Vector, Vector]:
        """Remember `vector` under `rev`; (vector, unit vector), both read-only."""
        pair = (vector.astype(np.float32, copy=True), unit(vector).astype(np.float32))
        for array in pair:
            array.flags.writeable = False  # shared by every reader: nobody may change it
        with self._lock:
            old = self._entries.pop(rev, None)
            if old is not None:
                self._bytes -= 2 * old[0].nbytes
            self._entries[rev] = pair
            self._bytes += 2 * pair[0].nbytes
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= 2 * dropped[0].nbytes
        return pair

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


BY_REVISION = _ByRevision()
