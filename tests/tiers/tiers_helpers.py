"""Helpers of the tiered-memory tests: a settable clock, controllable embeddings, a driver
that calls the sync or the async half of `TieredMemory` from one test body."""

from __future__ import annotations

import math
from typing import Any

from langchain_core.embeddings import Embeddings

from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import TieredMemory


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class TableEmbeddings(Embeddings):
    """Vectors chosen by the test: the first table key found in a text gives its vector."""

    def __init__(self, table: dict[str, list[float]], default: list[float] | None = None) -> None:
        self.table = table
        self.default = default or [0.0] * len(next(iter(table.values())))

    def _vector(self, text: str) -> list[float]:
        for key, vector in self.table.items():
            if key in text:
                return vector
        return self.default

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class FlakyEmbeddings(LexicalEmbeddings):
    """Lexical embeddings that raise while `broken` is true."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.broken:
            raise ConnectionError("embedding service down")
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        if self.broken:
            raise ConnectionError("embedding service down")
        return super().embed_query(text)


def unit_at(angle_degrees: float) -> list[float]:
    """A 2-d unit vector at this angle: cos between two is cos of the angle between them."""
    rad = math.radians(angle_degrees)
    return [math.cos(rad), math.sin(rad)]


async def call(memory: TieredMemory, name: str, *args: Any, use_async: bool, **kwargs: Any) -> Any:
    """`memory.<name>(...)` or `await memory.a<name>(...)`."""
    if use_async:
        return await getattr(memory, f"a{name}")(*args, **kwargs)
    return getattr(memory, name)(*args, **kwargs)
