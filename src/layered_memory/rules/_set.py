"""A set of rules ready to match: overrides resolved, globs compiled and indexed once."""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterable, Sequence

from layered_memory._logs import get_logger
from layered_memory.errors import RuleFileError
from layered_memory.rules._glob import CompiledGlob, GlobIndex, nfc
from layered_memory.rules._parse import cached_compile_glob, default_rule_name
from layered_memory.rules._types import Rule, RuleDecision, RuleHit, RuleMatch, RuleProblem

logger = get_logger(__name__)

_MEMO_LIMIT = 16_384
"""Keys remembered per rule set; a thread touches far fewer paths, so this only caps abuse."""

MAX_KEY_CHARS = 4096
"""Longer match keys are ignored: no file has such a path (Linux's PATH_MAX), and a key is
kept in every memo and tested at every model call."""


@functools.lru_cache(maxsize=4096)
def _key_forms(key: str, root: str) -> tuple[str, ...]:
    """The strings a key is tested as: itself (normalized, NFC) and, if under `root`, relative.

    Remembered: the same touched paths are matched again at every model call of a thread.
    """
    text = key.strip()
    if not text:
        return ()
    text = nfc(text)
    if "/" in text:
        text = posixpath.normpath(text)
        if text.startswith("//"):
            text = "/" + text.lstrip("/")
        if text == ".":
            return ()
    forms = [text]
    if text.startswith("/"):
        if root == "/":
            relative = text[1:]
        elif text.startswith(root + "/"):
            relative = text[len(root) + 1 :]
        else:
            relative = ""
        if relative:
            forms.append(relative)
    return tuple(forms)


def _normalize_root(root: str) -> str:
    root = posixpath.normpath(root.strip() or "/")
    return "/" + root.lstrip("/") if root.startswith("//") else root


class RuleSet:
    """Valid rules after overrides, with their globs compiled into one `GlobIndex`.

    Build one with `build_rule_set`; it is immutable apart from a private per-key memo, so one
    instance can serve every run until a rule file changes.

    Attributes:
        rules: Active rules, ordered by folder (lowest precedence first), then name.
        problems: Every problem found (file errors and warnings, duplicates, listing errors),
            ordered by path.
        replaced: `(loser, winner)` pairs: a rule overridden by a same-named rule of a higher
            folder, or a same-folder duplicate name (the first file by path wins).
        invalid: `(path, reason)` of each file skipped for errors, ordered by path.
    """

    __slots__ = (
        "_globs",
        "_index",
        "_memo",
        "_modes",
        "_rule_globs",
        "_warned_long_key",
        "invalid",
        "problems",
        "replaced",
        "rules",
    )

    def __init__(
        self,
        rules: Sequence[Rule],
        problems: Sequence[RuleProblem],
        replaced: Sequence[tuple[Rule, Rule]] = (),
        invalid: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Prefer `build_rule_set`, which resolves overrides and orders everything."""
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.problems: tuple[RuleProblem, ...] = tuple(problems)
        self.replaced: tuple[tuple[Rule, Rule], ...] = tuple(replaced)
        self.invalid: tuple[tuple[str, str], ...] = tuple(invalid)
        # `Rule.mode` is a property: worked out once here, not per rule at every match.
        self._modes: tuple[str, ...] = tuple([rule.mode for rule in self.rules])
        # Each distinct glob string once, however many rules share it.
        glob_ids: dict[str, int] = {}
        self._rule_globs: tuple[tuple[int, ...], ...] = tuple(
            tuple(glob_ids.setdefault(glob, len(glob_ids)) for glob in rule.paths)
            if rule.mode == "paths"
            else ()
            for rule in self.rules
        )
        self._globs: tuple[str, ...] = tuple(glob_ids)
        compiled: list[CompiledGlob] = []
        owners: list[int] = []
        for glob_id, glob in enumerate(self._globs):
            for part in cached_compile_glob(glob):
                compiled.append(part)
                owners.append(glob_id)
        self._index = (GlobIndex(compiled), tuple(owners))
        self._memo: dict[str, frozenset[int]] = {}
        self._warned_long_key = False

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        errors = sum(p.severity == "error" for p in self.problems)
        return f"RuleSet({len(self.rules)} rules, {errors} invalid files)"

    def raise_on_error(self) -> None:
        """Raise `RuleFileError` for the first error problem (for `strict=True`).

        Raises:
            RuleFileError: Naming the file and the reason.
        """
        for problem in self.problems:
            if problem.severity == "error":
                raise RuleFileError(problem.path, problem.reason)

    def _glob_ids(self, form: str) -> frozenset[int]:
        found = self._memo.get(form)
        if found is None:
            index, owners = self._index
            found = frozenset(owners[pos] for pos in index.matches(form))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[form] = found
        return found

    def _first_hits(self, keys: Iterable[str], root: str) -> tuple[list[str], dict[int, int]]:
        """Distinct keys in order, and for each matched glob id the index of its first key."""
        root = _normalize_root(root)
        ordered: list[str] = []
        seen: set[str] = set()
        first: dict[int, int] = {}
        for key in keys:
            if key in seen:
                continue
            if key[MAX_KEY_CHARS:]:  # longer than any path (slicing: no call per key)
                self._warn_long_key(key)
                continue
            seen.add(key)
            position = len(ordered)
            ordered.append(key)
            for form in _key_forms(key, root):
                for glob_id in self._glob_ids(form):
                    first.setdefault(glob_id, position)
        return ordered, first

    def _warn_long_key(self, key: str) -> None:
        if not self._warned_long_key:
            self._warned_long_key = True
            logger.warning(
                "match key %r... (%d characters) ignored: no path is longer than %d",
                key[:40],
                len(key),
                MAX_KEY_CHARS,
            )

    def _hit(self, rule_pos: int, first: dict[int, int]) -> tuple[int, int] | None:
        """(key position, glob id) of the earliest key matching the rule, or None."""
        best: tuple[int, int] | None = None
        for glob_id in self._rule_globs[rule_pos]:
            position = first.get(glob_id)
            if position is not None and (best is None or position < best[0]):
                best = (position, glob_id)
        return best

    def match(self, keys: Iterable[str], *, root: str = "/") -> RuleMatch:
        """Select the rules for a set of match keys.

        Args:
            keys: File paths the agent touched (absolute or relative) and context strings
                (an entity name, a task tag). Each is tested as given (normalized) and, when it
                is an absolute path under `root`, also relative to `root`.
            root: The project root that relative globs like `src/**` are anchored at.

        Returns:
            The `always` rules and the matched `paths` rules, the `requested` rules, and the
            key and glob behind each match.

        Example:
            `rule_set.match(["/src/app.py", "acme_corp"]).applied`
        """
        ordered, first = self._first_hits(keys, root)
        applied: list[Rule] = []
        requested: list[Rule] = []
        hits: list[RuleHit] = []
        modes = self._modes
        for rule_pos, rule in enumerate(self.rules):
            mode = modes[rule_pos]
            if mode == "always":
                applied.append(rule)
            elif mode == "requested":
                requested.append(rule)
            elif mode == "paths":
                hit = self._hit(rule_pos, first) if first else None
                if hit is not None:
                    applied.append(rule)
                    hits.append(RuleHit(rule.name, ordered[hit[0]], self._globs[hit[1]]))
        return RuleMatch(tuple(applied), tuple(requested), tuple(hits))

    def explain(self, keys: Iterable[str], *, root: str = "/") -> list[RuleDecision]:
        """Say, for every rule file, whether it applies for these keys and why.

        Args:
            keys: As for `match`.
            root: As for `match`.

        Returns:
            One decision per active rule (in `rules` order), then per replaced rule, then per
            invalid file.
        """
        ordered, first = self._first_hits(keys, root)
        decisions: list[RuleDecision] = []
        for rule_pos, rule in enumerate(self.rules):
            decisions.append(self._decide(rule_pos, rule, ordered, first))
        for loser, winner in self.replaced:
            if winner.folder_index == loser.folder_index:
                reason = f"duplicate name {loser.name!r} in the same folder: {winner.path} is used"
            else:
                reason = f"replaced by {winner.path} (same name {loser.name!r}, higher folder)"
            decisions.append(RuleDecision(loser.name, loser.path, "replaced", reason, loser.mode))
        for path, reason in self.invalid:
            decisions.append(RuleDecision(default_rule_name(path), path, "invalid", reason))
        return decisions

    def _decide(
        self, rule_pos: int, rule: Rule, ordered: list[str], first: dict[int, int]
    ) -> RuleDecision:
        mode = rule.mode
        if mode == "always":
            why = "alwaysApply: true" if rule.always_apply else "no paths"
            return RuleDecision(rule.name, rule.path, "applied", f"always applies ({why})", mode)
        if mode == "requested":
            reason = "agent-requested: listed by name, description and path only"
            return RuleDecision(rule.name, rule.path, "listed", reason, mode)
        if mode == "manual":
            reason = "alwaysApply: false with no paths and no description: never injected"
            return RuleDecision(rule.name, rule.path, "skipped", reason, mode)
        hit = self._hit(rule_pos, first)
        if hit is None:
            globs = ", ".join(repr(glob) for glob in rule.paths)
            reason = (
                f"no key matched any of [{globs}]" if ordered else f"no match keys for [{globs}]"
            )
            return RuleDecision(rule.name, rule.path, "skipped", reason, mode)
        key, glob = ordered[hit[0]], self._globs[hit[1]]
        reason = f"key {key!r} matched glob {glob!r}"
        return RuleDecision(rule.name, rule.path, "applied", reason, mode, key, glob)


def build_rule_set(
    parsed: Iterable[tuple[Rule | None, Sequence[RuleProblem]]], *, log: bool = True
) -> RuleSet:
    """Resolve overrides among parsed rule files and compile their globs once.

    A rule in a higher folder (`folder_index`) replaces a same-named rule of a lower one. Two
    files of one folder with the same name are an error: the first by path is kept, the other
    skipped. Problems not tied to a parsed file (a folder listing error) may be passed as
    `(None, [problem])`.

    Args:
        parsed: `parse_rule_file` / `parse_loaded` results, in any order.
        log: Log each problem as a warning naming the file (the CLI turns this off and prints).

    Returns:
        The rule set.
    """
    candidates: list[Rule] = []
    problems: list[RuleProblem] = []
    invalid: dict[str, list[str]] = {}
    for rule, file_problems in parsed:
        problems.extend(file_problems)
        if rule is not None:
            candidates.append(rule)
        for problem in file_problems:
            if rule is None and problem.severity == "error":
                invalid.setdefault(problem.path, []).append(problem.reason)
    candidates.sort(key=lambda r: (r.folder_index, r.path))

    per_folder: dict[tuple[int, str], Rule] = {}
    replaced: list[tuple[Rule, Rule]] = []
    for rule in candidates:
        kept = per_folder.setdefault((rule.folder_index, rule.name), rule)
        if kept is not rule:
            reason = f"duplicate rule name {rule.name!r} in one folder (also in {kept.path})"
            problems.append(RuleProblem(rule.path, reason))
            replaced.append((rule, kept))
    winners: dict[str, Rule] = {}
    for rule in per_folder.values():  # folder order, so a later (higher) folder wins
        loser = winners.get(rule.name)
        if loser is not None:
            replaced.append((loser, rule))
        winners[rule.name] = rule

    problems.sort(key=lambda p: p.path)
    if log:
        for problem in problems:
            if problem.severity == "error":
                logger.warning("Rule file %s skipped: %s", problem.path, problem.reason)
            else:
                logger.warning("Rule file %s: %s", problem.path, problem.reason)
    rules = sorted(winners.values(), key=lambda r: (r.folder_index, r.name, r.path))
    replaced.sort(key=lambda pair: (pair[0].folder_index, pair[0].path))
    invalid_files = sorted((path, "; ".join(reasons)) for path, reasons in invalid.items())
    return RuleSet(rules, problems, replaced, invalid_files)
