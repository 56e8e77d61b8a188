"""Vectors: numpy arrays in memory, base64 float32 in the store.

Why numpy: retrieval scores every segment and then the pages of the best ones on each turn;
one matrix product does in microseconds what a Python loop over 10,000 pages does in tens of
milliseconds. Why base64 float32 in the store: a JSON list of floats takes ~4x the bytes and
is ~20x slower to decode.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    msg = "layered_memory.tiers needs numpy: pip install 'layered-memory[tiers]'"
    raise ImportError(msg) from exc

Vector = np.ndarray[Any, np.dtype[np.float32]]


class VectorError(ValueError):
    """An embedding is not a finite, non-empty vector of the expected length."""


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


def stack(rows: Sequence[Vector]) -> Vector:
    """Vectors of equal length as the rows of one matrix."""
    return np.stack(rows)


def zeros(dim: int) -> Vector:
    """A zero vector of length `dim` (at least 1)."""
    return np.zeros(max(dim, 1), dtype=np.float32)


def encode(vector: Vector) -> str:
    """A vector (or matrix) as base64 of its float32 bytes."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype=np.float32).tobytes()).decode()


def decode(text: object, dim: int) -> Vector | None:
    """The vector stored by `encode`, or None when `text` is not one of length `dim`."""
    if not isinstance(text, str) or dim <= 0:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 4 * dim:
        return None
    vector = np.frombuffer(raw, dtype=np.float32)
    return vector if np.isfinite(vector).all() else None


def decode_matrix(text: object, rows: int, dim: int) -> Vector | None:
    """The matrix stored by `encode`, or None when it is not `rows` x `dim`."""
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


def unit(vector: Vector) -> Vector:
    """`vector` scaled to length 1 (a zero vector stays zero)."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def cosines(matrix: Vector, query: Vector, *, unit_rows: bool = False) -> Vector:
    """Cosine of every row of `matrix` with `query` (zero rows score 0).

    `unit_rows=True`: the rows are known to have length 1 (or 0), so no norm is computed.
    """
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    if unit_rows:
        dots: Vector = matrix @ unit(query)
        return dots
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    q = unit(query)
    result: Vector = (matrix @ q) / norms
    return result


def top_indices(parts: Sequence[Vector], k: int, *, minimum: float) -> list[tuple[int, float]]:
    """`(index, score)` of the `k` best scores >= `minimum` across the concatenated `parts`,
    best first (ties: the earlier index first)."""
    if not parts or k <= 0:
        return []
    scores = np.concatenate(parts)
    above = np.nonzero(scores >= minimum)[0]
    if above.size > k:
        # The k-th best score, then every index at least that good, in a stable order.
        cut = np.partition(scores[above], above.size - k)[above.size - k]
        above = above[scores[above] >= cut]
    order = above[np.argsort(-scores[above], kind="stable")][:k]
    return [(int(i), float(scores[i])) for i in order]
