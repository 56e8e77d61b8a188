"""STUB — being written (issue 4). MemoryWriter and register_write_back."""

from __future__ import annotations

from typing import Any


class MemoryWriter:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError


def register_write_back(*args: Any, **kwargs: Any) -> None:
    raise NotImplementedError
