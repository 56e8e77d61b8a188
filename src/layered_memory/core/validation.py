"""Constructor argument checks: a wrong argument fails at construction, naming the parameter,
what was given and what to pass, instead of misbehaving silently at the first run.

The one home of these checks: every subpackage validates numbers (counts, seconds, lifetimes)
here, so one kind of argument is refused with one message wherever it is passed. The memory
options `MemoryMiddleware` and `MemoryAssembler` share are checked once, by the assembler's
constructor (the middleware hands them on unchecked): the same mistake gets the same error
from either class.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from layered_memory.core.internals import is_backend_class

MAX_PATH_CHARS = 4096
"""Longer paths are refused: no file system resolves them (Linux's PATH_MAX is 4096 bytes)."""


def describe(value: object) -> str:
    """A short description of a wrong argument for an error message (never its full repr)."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def is_backend(value: object) -> bool:
    """A deepagents backend: a `BackendProtocol`, or an object with its download methods."""
    if is_backend_class(value, "BackendProtocol"):
        return True
    if isinstance(value, type):  # the class itself, not an instance
        return False
    return callable(getattr(value, "download_files", None)) and callable(
        getattr(value, "adownload_files", None)
    )


def check_backend(value: object) -> None:
    """`backend` must be a deepagents backend or a factory `callable(runtime) -> backend`."""
    if is_backend(value) or (callable(value) and not isinstance(value, type)):
        return
    hint = " (a class: pass an instance, e.g. FilesystemBackend(root_dir='.'))"
    msg = (
        f"backend must be a deepagents backend (FilesystemBackend, StateBackend, StoreBackend, "
        f"CompositeBackend, ...) or a factory callable(runtime) -> backend; got {describe(value)}"
        f"{hint if isinstance(value, type) else ''}"
    )
    raise TypeError(msg)


def invalid_path_reason(path: str) -> str | None:
    """Why `path` can name no file, or None: a NUL byte, an unencodable character, its length.

    Every OS call raises `ValueError` on a NUL byte and `UnicodeEncodeError` on a lone
    surrogate, so such a path must be refused before it reaches one.
    """
    if "\x00" in path:
        return "contains a NUL byte"
    if len(path) > MAX_PATH_CHARS:
        return f"longer than {MAX_PATH_CHARS} characters"
    if not path.isascii():
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            return "contains a character the file system cannot encode (a lone surrogate)"
    return None


def as_path(value: object, *, parameter: str) -> str:
    """A path given as `str` or `os.PathLike[str]`, as a string.

    Raises:
        TypeError: Not a path.
        ValueError: A path no file can have (see `invalid_path_reason`).
    """
    path: object = value
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
    if not isinstance(path, str):
        msg = f"{parameter} must be a str or os.PathLike path; got {describe(value)}"
        raise TypeError(msg)
    reason = invalid_path_reason(path)
    if reason is not None:
        msg = f"{parameter} {reason}; got {describe(path)}"
        raise ValueError(msg)
    return path


def check_path_list(value: object, *, parameter: str) -> list[str] | None:
    """`sources=` / `rules=`: None, or a list (or tuple) of str / PathLike paths."""
    if value is None:
        return None
    if isinstance(value, str | bytes | os.PathLike):
        msg = f"{parameter} takes a list of paths, not a single path: pass {parameter}=[{value!r}]"
        raise TypeError(msg)
    if not isinstance(value, Sequence):
        msg = f"{parameter} must be a list of paths; got {describe(value)}"
        raise TypeError(msg)
    return [as_path(item, parameter=f"{parameter}[{index}]") for index, item in enumerate(value)]


def check_layers(value: object, layer_type: type) -> list[Any] | None:
    """`layers=`: None, or a list of `Layer` objects."""
    if value is None:
        return None
    if isinstance(value, layer_type):
        msg = "layers must be a list of Layer objects: pass layers=[Layer(...)], not one Layer"
        raise TypeError(msg)
    if isinstance(value, str | bytes | os.PathLike) or not isinstance(value, Sequence):
        msg = (
            f"layers must be a list of Layer objects; got {describe(value)}. "
            "For plain paths use sources=[...] (MemoryMiddleware) or Layer('project', path)"
        )
        raise TypeError(msg)
    for index, item in enumerate(value):
        if not isinstance(item, layer_type):
            msg = (
                f"layers[{index}] must be a Layer, got {describe(item)}. For plain paths use "
                "sources=[...] (MemoryMiddleware), or wrap it: Layer('project', '/AGENTS.md')"
            )
            raise TypeError(msg)
    layers = list(value)
    for writable in (layer for layer in layers if layer.writable):
        for path in writable.files:
            for folder_layer in (layer for layer in layers if not layer.writable):
                # A path the folder layer lists that is not one of its own file paths.
                if folder_layer.folders and path in folder_layer.files_of([path], taken=()):
                    if path in folder_layer.files:
                        continue  # one path in two layers: not this check's concern
                    msg = (
                        f"layer {writable.name!r} makes {path} writable, but it is inside the "
                        f"read-only folder layer {folder_layer.name!r}, which keeps "
                        "every file in it read-only: move the file out of the folder, or make "
                        f"layer {folder_layer.name!r} writable"
                    )
                    raise ValueError(msg)
    return layers


def check_system_prompt(value: object) -> str | None:
    """`system_prompt=`: None, or a template with an `{agent_memory}` slot."""
    if value is None:
        return None
    if not isinstance(value, str):
        msg = f"system_prompt must be str or None, got {type(value).__name__}"
        raise TypeError(msg)
    if "{agent_memory}" not in value:
        msg = "system_prompt must contain the `{agent_memory}` format slot"
        raise ValueError(msg)
    return value


def check_imports(value: object, *, parameter: str) -> bool | str:
    """`imports=` / `follow_imports=`: True, False or "anywhere" (never a truthy stand-in)."""
    if not (isinstance(value, bool) or value == "anywhere"):
        msg = f"{parameter} must be True, False or 'anywhere', got {value!r}"
        raise TypeError(msg)
    return value  # type: ignore[return-value]


def check_match_keys(value: object) -> tuple[str | Callable[..., Any], ...]:
    """`match_keys=`: names of context values or callables, never one bare string."""
    if isinstance(value, str):
        msg = (
            f"match_keys takes a list of names, not one string (it would be read letter by "
            f"letter): pass match_keys=[{value!r}]"
        )
        raise TypeError(msg)
    if not isinstance(value, Sequence):
        msg = f"match_keys must be a list of names or callables; got {describe(value)}"
        raise TypeError(msg)
    for index, item in enumerate(value):
        if not (isinstance(item, str) or callable(item)):
            msg = (
                f"match_keys[{index}] must be a context name (str) or a callable "
                f"(state, runtime) -> strings; got {describe(item)}"
            )
            raise TypeError(msg)
    return tuple(value)


def check_bool(value: object, *, parameter: str) -> bool:
    """A flag: exactly True or False. A string such as `"false"` is truthy, so taking it would
    turn the flag on: a `TypeError` naming the parameter instead (issue 36)."""
    if not isinstance(value, bool):
        msg = f"{parameter} must be True or False; got {describe(value)}"
        raise TypeError(msg)
    return value


def check_int(
    value: object, *, parameter: str, minimum: int | None = 0, unit: str = "a number of characters"
) -> int:
    """A whole number of ``unit`` (a bool or a float is a mistake, not a count), at least
    ``minimum`` (None: any)."""
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{parameter} must be an int ({unit}); got {describe(value)}"
        raise TypeError(msg)
    if minimum is not None and value < minimum:
        msg = f"{parameter} must be >= {minimum}; got {value}"
        raise ValueError(msg)
    return value


def check_budget(value: object, *, least: int) -> int:
    """`max_chars=`: an int the prompt template fits in (`least`: its minimum budget)."""
    budget = check_int(value, parameter="max_chars", minimum=None)
    if budget < least:
        msg = f"max_chars={budget} is too small for the prompt template; use at least {least}"
        raise ValueError(msg)
    return budget


def check_seconds(value: object, *, parameter: str, allow_zero: bool = False) -> float:
    """A duration: a finite number of seconds, > 0 (>= 0 with ``allow_zero``); never a bool.

    Infinity is refused: no timer, socket timeout or Redis expiry takes it.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{parameter} must be a number of seconds, got {type(value).__name__}"
        raise TypeError(msg)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = "a number of seconds >= 0" if allow_zero else "a positive number of seconds"
        msg = f"{parameter} must be {bound}, got {value!r}"
        raise ValueError(msg)
    return float(value)


def check_ttl(ttl: object, *, parameter: str = "ttl") -> float | None:
    """A lifetime: None (it never ends) or a positive finite number of seconds."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        msg = f"{parameter} must be a number of seconds or None, got {type(ttl).__name__}"
        raise TypeError(msg)
    return check_seconds(ttl, parameter=parameter)


def check_instance(value: object, expected: type, *, parameter: str, hint: str) -> None:
    """`value` is None or an `expected`; else a `TypeError` naming the parameter and the fix."""
    if value is not None and not isinstance(value, expected):
        msg = f"{parameter} must be a {expected.__name__} or None; got {describe(value)}. {hint}"
        raise TypeError(msg)


def check_names(value: object, *, parameter: str) -> tuple[str, ...]:
    """File names (`nested=("AGENTS.md", "CLAUDE.md")`): bare names, never paths."""
    if isinstance(value, str):
        msg = (
            f"{parameter} takes a list of file names, not one string: pass {parameter}=[{value!r}]"
        )
        raise TypeError(msg)
    if not isinstance(value, Sequence):
        msg = f"{parameter} must be a list of file names; got {describe(value)}"
        raise TypeError(msg)
    names = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip() or "/" in item or "\\" in item:
            msg = (
                f"{parameter}[{index}] must be a file name such as 'AGENTS.md' (no folder); "
                f"got {describe(item)}"
            )
            raise ValueError(msg)
        reason = invalid_path_reason(item)
        if reason is not None:
            msg = f"{parameter}[{index}]: {reason}"
            raise ValueError(msg)
        names.append(item)
    return tuple(names)
