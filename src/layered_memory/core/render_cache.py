"""The render caches: rendered blocks by content and parsed rule sets, shared per process.

A model call renders memory from the state it carries; the block is the same while the
snapshot's digest and the match keys are unchanged, so `MemoryAssembler` keeps the last blocks
in a `LRU` keyed by both. Rule files are parsed once per distinct content for the whole process
(`rule_set_for`): agents built per request find the rules already parsed and their globs
compiled, and one changed file re-parses only itself.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

from layered_memory.core.loading import digest_texts
from layered_memory.rules import Rule, RuleSet, build_rule_set, parse_rule_file

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class LRU(Generic[_K, _V]):
    """A tiny thread-safe LRU map (the caches are shared by every thread of one agent)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


_RULE_SETS: LRU[tuple[str, tuple[str, ...]], RuleSet] = LRU(32)
"""Parsed rule sets by content, shared by every assembler of the process."""


@functools.lru_cache(maxsize=8192)
def _parse_rule(path: str, text: str, folder_index: int) -> tuple[Rule | None, tuple[Any, ...]]:
    """One rule file parsed, remembered by content: one changed file re-parses only itself."""
    rule, problems = parse_rule_file(path, text, folder_index=folder_index)
    return rule, tuple(problems)


def rule_set_for(
    rule_files: Mapping[str, str],
    rule_folders: tuple[str, ...],
    folder_index: Callable[[str], int],
) -> RuleSet:
    """The rules parsed from these texts, once per distinct content and folders per process.

    Args:
        rule_files: Rule file path -> text.
        rule_folders: The configured rule folders, lowest to highest precedence.
        folder_index: A rule file's precedence (the highest listed folder holding it).

    Returns:
        The rule set (shared: never change it).
    """
    key = (digest_texts(rule_files), rule_folders)
    rule_set = _RULE_SETS.get(key)
    if rule_set is None:
        parsed = [
            _parse_rule(path, text, folder_index(path)) for path, text in sorted(rule_files.items())
        ]
        rule_set = build_rule_set(parsed, log=False)
        _RULE_SETS.put(key, rule_set)
    return rule_set


def clear_rule_sets() -> None:
    """Forget every parsed rule set and rule file of this process."""
    _RULE_SETS.clear()
    _parse_rule.cache_clear()
