"""`MemoryOptions`: the settings the main use case leaves at their defaults.

`MemoryMiddleware`, `MemoryAssembler` and `MemoryMiddleware.read_only()` take these as one
value (`options=MemoryOptions(...)`) instead of re-listing each keyword; the constructors keep
only what a user sets to wire memory in (backend, layers or sources, rules, budget, hooks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from layered_memory.core.render import DEFAULT_MAX_RULES_CHARS
from layered_memory.core.validation import check_bool, check_imports, check_int, describe

__all__ = ["MemoryOptions", "check_options"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOptions:
    """What the agent may edit besides writable layers, and the smaller budgets.

    Args:
        max_rules_chars: Upper bound on the matched rules inside the memory block.
        rules_writable: Let the agent edit rule files (read-only by default).
        nested_writable: Let the agent edit nested memory files (read-only by default).
        list_unmatched_rules: List the scoped rules no key matched as well (name,
            description, path, for the agent to read), as VS Code lists every instructions
            file, and let a match key name one to inject it. Off by default: a scoped rule
            costs nothing until it matches.
        imports: Follow `@path` imports in memory files (at most 5 hops, each file once):
            `True` within the backend's root (host-path backends: its folder and the folders
            of layer files outside it), `"anywhere"` any file the backend can read, `False`
            none. `None` (the default): `True` with `layers=`, `False` with `sources=` (as
            deepagents, which reads no imports).

    Raises:
        TypeError: A flag that is not a bool, a budget that is not an int, or an `imports`
            value other than True, False, "anywhere" or None.
        ValueError: A negative `max_rules_chars`.

    Example:
        MemoryMiddleware(backend=backend, layers=[...], rules=["/.agents/rules"],
                         options=MemoryOptions(rules_writable=True, imports=False))
    """

    max_rules_chars: int = DEFAULT_MAX_RULES_CHARS
    rules_writable: bool = False
    nested_writable: bool = False
    list_unmatched_rules: bool = False
    imports: bool | Literal["anywhere"] | None = None

    def __post_init__(self) -> None:
        check_int(self.max_rules_chars, parameter="MemoryOptions.max_rules_chars")
        check_bool(self.rules_writable, parameter="MemoryOptions.rules_writable")
        check_bool(self.nested_writable, parameter="MemoryOptions.nested_writable")
        check_bool(self.list_unmatched_rules, parameter="MemoryOptions.list_unmatched_rules")
        if self.imports is not None:
            check_imports(self.imports, parameter="MemoryOptions.imports")

    def follow_imports(self, *, sources: bool) -> bool | Literal["anywhere"]:
        """Whether loads follow `@path` imports.

        Args:
            sources: The middleware was built with `sources=` (the deepagents drop-in).

        Returns:
            `imports`, or its default for the mode when it is None.
        """
        return (not sources) if self.imports is None else self.imports


def check_options(value: object) -> MemoryOptions:
    """`options=`: a `MemoryOptions`, or None for the defaults.

    Args:
        value: What the caller passed.

    Returns:
        The options to use.

    Raises:
        TypeError: Anything else (a dict of keywords, say), named with the fix.
    """
    if value is None:
        return MemoryOptions()
    if not isinstance(value, MemoryOptions):
        msg = f"options must be a MemoryOptions(...) or None; got {describe(value)}"
        raise TypeError(msg)
    return value
