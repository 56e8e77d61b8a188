"""STUB — being written (issue 5). Session keys and thread configs."""

from __future__ import annotations

from typing import Any


def build_session_key(*args: Any, **kwargs: Any) -> str:
    raise NotImplementedError


def parse_session_key(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError


def build_thread_config(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError
