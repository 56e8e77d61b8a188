"""The rule set: listing and loading rule folders, precedence, matching, explaining, rendering.

Listing is one `glob` per folder and loading one batched download, through any deepagents
backend (only the I/O call differs between the sync and async halves). A `RuleSet` resolves
precedence once and compiles every glob into one `GlobIndex`; `match` selects the rules for the
agent's match keys, `explain` says why for every file, `render_rules` writes the prompt part.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import os
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import disk_path
from layered_memory.core.internals import final_route, is_backend_class
from layered_memory.core.loading import DownloadResult, adownload_texts, download_texts
from layered_memory.core.render import CHARS, CutCount, defuse_within, truncate_text
from layered_memory.errors import RuleFileError
from layered_memory.rules._glob import CompiledGlob, GlobIndex, compile_glob, nfc
from layered_memory.rules._parse import (
    DIALECT_NAMES,
    LEGACY_RULE_FILES,
    Dialect,
    Rule,
    RuleMode,
    RuleProblem,
    default_rule_name,
    dialect_of,
    is_rule_file,
    parse_rule_file,
    unread_reason,
)
from layered_memory.safety.defuse import defuse_attribute, defuse_name

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol

logger = get_logger(__name__)

DecisionStatus = Literal["applied", "listed", "skipped", "replaced", "invalid"]

LISTING_PATTERN = "**/*"
"""Every file below a folder. Per the backends' glob contract `**` does not descend into
dot-folders, so a `.git/` or `.obsidian/` inside a rule folder is never read as rules."""

_MEMO_LIMIT = 16_384
"""Keys remembered per rule set; a thread touches far fewer paths, so this only caps abuse."""

MAX_KEY_CHARS = 4096
"""Longer match keys are ignored: no file has such a path (Linux's PATH_MAX), and a key is
kept in every memo and tested at every model call."""

RuleFileList = list[tuple[int, str]]

PARTIAL_LISTING = ("cannot list rule folder", "rule folder listing truncated")
"""How the problem of a folder listed only in part (or not at all) begins."""

MAX_RULE_FILES_PER_FOLDER = 1_000
"""Rule files read per rule folder. Past it, the files added last are left out with one
warning naming them (a flood of 100,000 files must not cost a run its rules, nor its time):
the files that were there first stay. A folder over the cap counts as listed in part, so the
put-back removes nothing from it."""

SHOWN_LEFT_OUT = 5
"""Rule files a cap warning names (then a count)."""


class RuleHit(NamedTuple):
    """Why a rule applied although its mode alone would not inject it.

    A named tuple, not a frozen dataclass: one is built per applied rule at every cold match,
    and a frozen dataclass's `__init__` pays an `object.__setattr__` per field (measured: 680 ns
    against 330 ns for this tuple; `make bench` scenario 4 builds ~140 per match).

    Attributes:
        name: The rule's name.
        path: The rule file's path.
        key: The first match key (as given) that matched a glob or named the rule.
        glob: The glob as written in the rule file; None when the key named the rule.
    """

    name: str
    path: str
    key: str
    glob: str | None


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """The rules selected for one set of match keys (hashable, so renders can be cached).

    Attributes:
        applied: Rules whose bodies go into the prompt, in `RuleSet.rules` order (lower
            folder first, then by name): `always` rules, matched `paths` rules, and
            `requested` or `manual` rules a key names.
        requested: The other `requested` rules, listed by name/description/path, same order.
        hits: The key (and glob) behind each applied rule that is not `always`, same order.
    """

    applied: tuple[Rule, ...] = ()
    requested: tuple[Rule, ...] = ()
    hits: tuple[RuleHit, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.applied or self.requested)


@dataclass(frozen=True, slots=True)
class RuleDecision:
    """What the engine did with one rule file for a set of match keys, and why.

    Attributes:
        name: The rule's name (the file stem for an invalid file).
        path: The rule file's path.
        status: `applied` (body injected), `listed` (requested rule, listed only), `skipped`
            (no key matched, or a `manual` rule nothing named), `replaced` (a later folder has
            a rule of the same name), `invalid` (the file could not be read as a rule).
        reason: Why, in the words of the file's dialect: e.g. `key 'src/app.py' matched glob
            '*.py' (as '**/*.py')`.
        mode: The rule's mode; None for an invalid file.
        key: The key behind an applied `paths`, `requested` or `manual` rule.
        glob: The glob that matched, as written.
        dialect: The tool whose semantics the file was read with.
    """

    name: str
    path: str
    status: DecisionStatus
    reason: str
    mode: RuleMode | None = None
    key: str | None = None
    glob: str | None = None
    dialect: Dialect | None = None

    def __str__(self) -> str:
        read_as = f" [{DIALECT_NAMES[self.dialect]}]" if self.dialect else ""
        return f"{self.status}: {self.name} ({self.path}){read_as}: {self.reason}"


# -- matching --------------------------------------------------------------------------------


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


_NAMED_MODES = frozenset({"requested", "manual"})
"""Modes a key can apply by naming the rule (`deploy`, `@deploy` as an @-mention in Cursor and
Windsurf, `#deploy` as a steering reference in Kiro)."""

_MENTION_MARKS = ("@", "#")


class RuleSet:
    """Usable rules after precedence, with their globs compiled into one `GlobIndex`.

    Build one with `build_rule_set`; it is immutable apart from a private per-key memo, so one
    instance can serve every run until a rule file changes.

    Attributes:
        rules: Active rules, ordered by folder (lowest precedence first), then name, then path.
        problems: Every problem found (file errors and warnings, listing errors), by path.
        replaced: `(loser, winner)` pairs: a rule replaced by a same-named rule of a later
            folder (the winner named is the first by path of that folder's).
        invalid: `(path, reason)` of each file that could not be read as a rule, by path.
    """

    __slots__ = (
        "_globs",
        "_index",
        "_memo",
        "_modes",
        "_named",
        "_named_all",
        "_rule_globs",
        "_rules_of_glob",
        "_twins",
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
        """Prefer `build_rule_set`, which resolves precedence and orders everything."""
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.problems: tuple[RuleProblem, ...] = tuple(problems)
        self.replaced: tuple[tuple[Rule, Rule], ...] = tuple(replaced)
        self.invalid: tuple[tuple[str, str], ...] = tuple(invalid)
        self._modes: tuple[RuleMode, ...] = tuple([rule.mode for rule in self.rules])
        # Each distinct (pattern, case) once, however many rules share it; a rule's ids are
        # in the order of its `paths`, so an id's position names the glob as written.
        glob_ids: dict[tuple[str, bool], int] = {}
        self._rule_globs: tuple[tuple[int, ...], ...] = tuple(
            tuple(
                glob_ids.setdefault((pattern, rule.ignore_case), len(glob_ids))
                for pattern in rule.patterns
            )
            if rule.mode == "paths"
            else ()
            for rule in self.rules
        )
        self._globs: tuple[tuple[str, bool], ...] = tuple(glob_ids)
        # The reverse: a match only looks at the rules of the globs some key matched, not at
        # every `paths` rule (scenario 4: ~150 of 900 per cold match).
        rules_of_glob: list[list[int]] = [[] for _ in self._globs]
        for rule_pos, ids in enumerate(self._rule_globs):
            for glob_id in ids:
                rules_of_glob[glob_id].append(rule_pos)
        self._rules_of_glob = tuple(map(tuple, rules_of_glob))
        compiled: list[CompiledGlob] = []
        owners: list[int] = []
        for glob_id, (pattern, ignore_case) in enumerate(self._globs):
            for part in compile_glob(pattern, ignore_case=ignore_case):
                compiled.append(part)
                owners.append(glob_id)
        self._index = (GlobIndex(compiled), tuple(owners))
        named: dict[str, list[int]] = {}
        named_all: dict[str, list[int]] = {}
        for position, rule in enumerate(self.rules):
            if rule.mode in _NAMED_MODES:
                named.setdefault(rule.name, []).append(position)
            if rule.mode != "always":
                named_all.setdefault(rule.name, []).append(position)
        self._named = named
        self._named_all = named_all
        # Two tools' copies of one rule (a `.cursor/rules` file linked to its `.claude/rules`
        # twin) both apply, but the same body is shown once: each position's earlier twins.
        first_with_body: dict[str, list[int]] = {}
        twins: dict[int, tuple[int, ...]] = {}
        for position, rule in enumerate(self.rules):
            if rule.body:
                earlier = first_with_body.setdefault(rule.body, [])
                if earlier:
                    twins[position] = tuple(earlier)
                earlier.append(position)
        self._twins = twins
        self._memo: dict[str, frozenset[int]] = {}
        self._warned_long_key = False

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"RuleSet({len(self.rules)} rules, {len(self.invalid)} invalid files)"

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
            found = frozenset(map(owners.__getitem__, index.matches(form)))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[form] = found
        return found

    def _first_hits(
        self, keys: Iterable[str], root: str, *, list_unmatched: bool = False
    ) -> tuple[list[str], dict[int, int], dict[int, int]]:
        """Distinct keys in order; for each matched glob id the position of its first key; for
        each rule a key names (`requested`/`manual`, and `paths` with `list_unmatched`), the
        position of the first such key."""
        root = _normalize_root(root)
        by_name = self._named_all if list_unmatched else self._named
        ordered: list[str] = []
        seen: set[str] = set()
        first: dict[int, int] = {}
        named: dict[int, int] = {}
        for key in keys:
            if key in seen:
                continue
            if key[MAX_KEY_CHARS:]:  # longer than any path (slicing: no call per key)
                self._warn_long_key(key)
                continue
            seen.add(key)
            position = len(ordered)
            ordered.append(key)
            if by_name:
                stripped = key.strip()
                if stripped[:1] in _MENTION_MARKS:
                    stripped = stripped[1:]
                for rule_pos in by_name.get(stripped, ()):
                    named.setdefault(rule_pos, position)
            for form in _key_forms(key, root):
                for glob_id in self._glob_ids(form):
                    first.setdefault(glob_id, position)
        return ordered, first, named

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
        """(key position, index in the rule's globs) of its earliest matching key, or None."""
        best: tuple[int, int] | None = None
        for glob_index, glob_id in enumerate(self._rule_globs[rule_pos]):
            position = first.get(glob_id)
            if position is not None and (best is None or position < best[0]):
                best = (position, glob_index)
        return best

    def _select(
        self,
        ordered: list[str],
        first: dict[int, int],
        named: dict[int, int],
        list_unmatched: bool,
    ) -> tuple[list[int], list[int], dict[int, RuleHit], dict[int, int]]:
        """Positions applied and listed, the hit of each applied non-`always` rule, and each
        applied or listed rule left out because an earlier twin with its body was shown."""
        applied: list[int] = []
        requested: list[int] = []
        hits: dict[int, RuleHit] = {}
        twins_shown: dict[int, int] = {}
        shown: set[int] = set()
        modes, twins = self._modes, self._twins
        candidates: set[int] = set()
        for glob_id in first:
            candidates.update(self._rules_of_glob[glob_id])
        for rule_pos, rule in enumerate(self.rules):
            mode = modes[rule_pos]
            hit: RuleHit | None = None
            if mode == "always":
                target = applied
            elif rule_pos in named:
                target = applied
                hit = RuleHit(rule.name, rule.path, ordered[named[rule_pos]], None)
            elif mode == "paths":
                found = self._hit(rule_pos, first) if rule_pos in candidates else None
                if found is not None:
                    target = applied
                    hit = RuleHit(rule.name, rule.path, ordered[found[0]], rule.paths[found[1]])
                elif list_unmatched:
                    target = requested
                else:
                    continue
            elif mode == "requested":
                target = requested
            else:
                continue
            earlier = twins.get(rule_pos) if twins else None
            if earlier is not None:
                seen = next((twin for twin in earlier if twin in shown), None)
                if seen is not None:
                    twins_shown[rule_pos] = seen
                    continue
            if twins:
                shown.add(rule_pos)
            target.append(rule_pos)
            if hit is not None:
                hits[rule_pos] = hit
        return applied, requested, hits, twins_shown

    def match(
        self, keys: Iterable[str], *, root: str = "/", list_unmatched: bool = False
    ) -> RuleMatch:
        """Select the rules for a set of match keys.

        Args:
            keys: File paths the agent touched (absolute or relative) and context strings
                (an entity name, a task tag). Each is tested as given (normalized) and, when it
                is an absolute path under `root`, also relative to `root`; a key equal to the
                name of a `requested` or `manual` rule (or `@` or `#` and the name) applies it.
            root: The project root that relative globs like `src/**` are anchored at.
            list_unmatched: List the `paths` rules no key matched too (name, description,
                path), as VS Code lists every instructions file, and let a key name them.

        Returns:
            The applied rules, the listed rules, and the key behind each applied rule that is
            not `always`. A rule whose body an earlier applied or listed rule already has is
            left out (shown once).

        Example:
            `rule_set.match(["/src/app.py", "acme_corp"]).applied`
        """
        ordered, first, named = self._first_hits(keys, root, list_unmatched=list_unmatched)
        applied, requested, hits, _ = self._select(ordered, first, named, list_unmatched)
        rules = self.rules
        return RuleMatch(
            tuple(map(rules.__getitem__, applied)),
            tuple(map(rules.__getitem__, requested)),
            tuple(hits[pos] for pos in applied if pos in hits),
        )

    def explain(
        self, keys: Iterable[str], *, root: str = "/", list_unmatched: bool = False
    ) -> list[RuleDecision]:
        """Say, for every rule file, whether it applies for these keys and why.

        Args:
            keys: As for `match`.
            root: As for `match`.
            list_unmatched: As for `match`.

        Returns:
            One decision per active rule (in `rules` order), then per replaced rule, then per
            invalid file.
        """
        ordered, first, named = self._first_hits(keys, root, list_unmatched=list_unmatched)
        _, _, _, twins_shown = self._select(ordered, first, named, list_unmatched)
        decisions = []
        for rule_pos, rule in enumerate(self.rules):
            decision = self._decide(
                rule_pos, rule, ordered, first, named, list_unmatched=list_unmatched
            )
            twin = twins_shown.get(rule_pos)
            if twin is not None:
                shown_as = self.rules[twin].path
                reason = f"{decision.reason}; the same body as {shown_as}: shown once"
                decision = replace(decision, reason=reason)
            decisions.append(decision)
        for loser, winner in self.replaced:
            others = sum(
                rule.name == loser.name
                and rule.dialect == winner.dialect
                and rule.folder_index == winner.folder_index
                for rule in self.rules
            )
            more = f" and {others - 1} more" if others > 1 else ""
            reason = f"replaced by {winner.path}{more} (same name {loser.name!r}, later folder)"
            decisions.append(
                RuleDecision(
                    loser.name, loser.path, "replaced", reason, loser.mode, dialect=loser.dialect
                )
            )
        for path, reason in self.invalid:
            decisions.append(
                RuleDecision(
                    default_rule_name(path), path, "invalid", reason, dialect=dialect_of(path)
                )
            )
        return decisions

    def _decide(
        self,
        rule_pos: int,
        rule: Rule,
        ordered: list[str],
        first: dict[int, int],
        named: dict[int, int],
        *,
        list_unmatched: bool = False,
    ) -> RuleDecision:
        mode, why = rule.mode, rule.why
        hit = self._hit(rule_pos, first) if mode == "paths" else None
        status: DecisionStatus
        if mode == "always":
            status, reason, key = "applied", f"always applies: {why}", None
        elif rule_pos in named:
            key = ordered[named[rule_pos]]
            status, reason = "applied", f"key {key!r} names the rule; {why}"
        elif mode == "requested":
            status, reason, key = "listed", f"{why}: listed by name, description and path", None
        elif mode == "manual":
            shown = f"{rule.name!r} or '@{rule.name}'"
            status, key = "skipped", None
            reason = f"{why}: injected only when a match key names it ({shown})"
        elif not rule.paths:
            status, reason, key = "skipped", f"{why}: no valid glob (see lint), never applies", None
        elif hit is None:
            globs = ", ".join(repr(glob) for glob in rule.paths)
            what = "no key matched any of" if ordered else "no match keys for"
            status, reason, key = "skipped", f"{what} [{globs}]", None
            if list_unmatched:
                status, reason = "listed", f"{reason}: listed by name, description and path"
        else:
            key, glob, pattern = ordered[hit[0]], rule.paths[hit[1]], rule.patterns[hit[1]]
            read_as = f" (as {pattern!r})" if pattern != glob else ""
            case = ", ignoring case" if rule.ignore_case else ""
            reason = f"key {key!r} matched glob {glob!r}{read_as}{case}"
            return RuleDecision(
                rule.name, rule.path, "applied", reason, mode, key, glob, rule.dialect
            )
        return RuleDecision(rule.name, rule.path, status, reason, mode, key, None, rule.dialect)


def build_rule_set(
    parsed: Iterable[tuple[Rule | None, Sequence[RuleProblem]]], *, log: bool = True
) -> RuleSet:
    """Resolve precedence among parsed rule files and compile their globs once.

    The rules of a later folder (`folder_index`) replace the same-named rules of earlier ones;
    within one folder every file is its own rule, whatever its name (Cursor and Claude Code
    load every file they find). Problems not tied to a parsed file (a folder listing error)
    may be passed as `(None, [problem])`.

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
            continue
        for problem in file_problems:
            if problem.severity == "error":
                invalid.setdefault(problem.path, []).append(problem.reason)
    candidates.sort(key=lambda r: (r.folder_index, r.path))

    # Precedence is between folders of one tool: each tool reads only its own folders, so a
    # Cursor rule and a Claude Code rule of the same name both apply (`RuleSet` shows an
    # identical body once). A rule in this package's own dialect is written for this package,
    # whose precedence it asks for: it replaces the same-named rules of earlier folders of
    # any tool.
    top_folder: dict[tuple[str, Dialect], int] = {}
    first_of: dict[tuple[str, Dialect, int], Rule] = {}
    for rule in candidates:  # folder order: the last folder seen for a name wins
        top_folder[(rule.name, rule.dialect)] = rule.folder_index
        first_of.setdefault((rule.name, rule.dialect, rule.folder_index), rule)
    rules: list[Rule] = []
    replaced: list[tuple[Rule, Rule]] = []
    for rule in candidates:
        own = top_folder.get((rule.name, "layered-memory"), -1)
        same = top_folder[(rule.name, rule.dialect)]
        if max(own, same) <= rule.folder_index:
            rules.append(rule)
        elif same >= own:
            replaced.append((rule, first_of[(rule.name, rule.dialect, same)]))
        else:
            replaced.append((rule, first_of[(rule.name, "layered-memory", own)]))

    problems.sort(key=lambda p: p.path)
    if log:
        for problem in problems:
            if problem.path in invalid and problem.severity == "error":
                logger.warning("Rule file %s skipped: %s", problem.path, problem.reason)
            else:
                logger.warning("Rule file %s: %s", problem.path, problem.reason)
    rules.sort(key=lambda r: (r.folder_index, r.name, r.path))
    invalid_files = sorted((path, "; ".join(reasons)) for path, reasons in invalid.items())
    return RuleSet(rules, problems, replaced, invalid_files)


# -- listing and loading ---------------------------------------------------------------------


def _folder(folder: str) -> str:
    return folder.rstrip("/") or "/"


def _collect(
    results: Sequence[tuple[int, str, Any]], others: list[str] | None = None
) -> tuple[RuleFileList, list[RuleProblem]]:
    """Turn `(folder_index, folder, GlobResult or exception)` into rule files and problems
    (and the other files listed, into `others` when given)."""
    best: dict[str, int] = {}
    problems: list[RuleProblem] = []
    for folder_index, folder, result in results:
        if isinstance(result, BaseException):
            reason = f"cannot list rule folder: {type(result).__name__}: {result}"
            problems.append(RuleProblem(folder, reason, "warning"))
            continue
        if result.error:
            problems.append(
                RuleProblem(folder, f"cannot list rule folder: {result.error}", "warning")
            )
        if result.truncated:
            why = result.truncation_reason or "unknown reason"
            reason = f"rule folder listing truncated ({why}); some rule files may be missing"
            problems.append(RuleProblem(folder, reason, "warning"))
        matches = result.matches or ()
        if not matches and not result.error and posixpath.basename(folder) in LEGACY_RULE_FILES:
            # `.windsurfrules` / `.clinerules` named as a folder: the file itself, if there is
            # one (an absent or empty one is no problem, as an absent folder is none).
            best[folder] = max(folder_index, best.get(folder, folder_index))
        rules: list[tuple[int, str]] = []
        for info in matches:
            path = info.get("path", "")
            if info.get("is_dir"):
                continue
            rule = info.get(_RULE)
            if not (is_rule_file(path) if rule is None else rule):
                unread = unread_reason(path)
                if unread is not None:
                    problems.append(RuleProblem(path, unread, "warning"))
                if others is not None:
                    others.append(path)
                continue
            rules.append((info.get(_AGE, 0), path))
        if len(rules) > MAX_RULE_FILES_PER_FOLDER:
            # The oldest first (a local listing knows ages), then by path.
            kept = heapq.nsmallest(MAX_RULE_FILES_PER_FOLDER, rules)
            left_count = len(rules) - len(kept)
            chosen = {path for _age, path in kept}
            left = heapq.nsmallest(
                SHOWN_LEFT_OUT, (path for _age, path in rules if path not in chosen)
            )
            rules = kept
            problems.append(RuleProblem(folder, _over_cap(left_count, left), "warning"))
        for _age, path in rules:
            # A file below two listed folders belongs to the higher one.
            best[path] = max(folder_index, best.get(path, folder_index))
    files = sorted(((index, path) for path, index in best.items()), key=lambda item: item)
    return files, problems


def _over_cap(count: int, left: Sequence[str]) -> str:
    named = ", ".join(left[:SHOWN_LEFT_OUT])
    more = f" and {count - SHOWN_LEFT_OUT:,} more" if count > SHOWN_LEFT_OUT else ""
    return (
        f"rule folder listing truncated (more than {MAX_RULE_FILES_PER_FOLDER:,} rule files): "
        f"the {count:,} added last are left out: {named}{more}; remove what does not belong "
        "there, or split the folder"
    )


_AGE = "layered_memory_age"
"""Key of a local listing's match: the file's status-change time (`st_ctime_ns`)."""
_RULE = "layered_memory_rule"
"""Key of a local listing's match: whether it is a rule file (decided once, by name)."""


@dataclass(frozen=True, slots=True)
class _LocalListing:
    """The fields of deepagents' `GlobResult` that `_collect` reads."""

    matches: list[dict[str, Any]]
    error: str | None = None
    truncated: bool = False
    truncation_reason: str | None = None


def _local_listing(backend: Any, folder: str) -> _LocalListing | None:
    """A rule folder on local disk listed with `os.scandir`, as a virtual-mode
    `FilesystemBackend.glob` lists it (no dot names, links to folders not followed, links to
    files inside the root listed), with each file's status-change time; None when the folder
    is not on a virtual-mode `FilesystemBackend` with deepagents' own `glob`, or its path goes
    through a link (the backend's own glob lists those its way).

    deepagents' glob stats and matches every path in Python and stops after 5 s: 100,000
    files took 21.8 s with the reads and left the folder listed in part. Reading names costs
    about 0.2 s per 100,000; only the first `MAX_RULE_FILES_PER_FOLDER` files are read.
    The age is what the agent cannot forge: `touch -d` sets the modification time, while the
    status-change time only moves forward.
    """
    target, key = final_route(backend, folder)
    if not is_backend_class(target, "FilesystemBackend"):
        return None
    if not getattr(target, "virtual_mode", False):
        return None
    # Only for deepagents' own listing: a subclass with a glob of its own lists its way.
    kind: Any = type(target)
    stock: Any = next(c for c in kind.__mro__ if c.__name__ == "FilesystemBackend")
    if kind.glob is not stock.glob or kind.aglob is not stock.aglob:
        return None
    root = os.path.realpath(str(target.cwd))
    top = os.path.normpath(disk_path(root, key, virtual=True))
    if os.path.realpath(top) != top or not top.startswith(root):
        return None
    inside = root.rstrip(os.sep) + os.sep
    base = folder.rstrip("/") + "/"
    matches: list[dict[str, Any]] = []
    rules: list[tuple[os.DirEntry[str], dict[str, Any]]] = []
    pending = [(top, base)]
    while pending:
        current, prefix = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            name = entry.name
            if name[0] == ".":
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append((entry.path, f"{prefix}{name}/"))
                continue
            path = prefix + name
            try:
                listed = entry.is_file()
                if listed and entry.is_symlink():
                    # The backend lists a link to a file inside the root under the path of
                    # the file it names (a composite route would need its prefix: its glob).
                    real = os.path.realpath(entry.path)
                    if target is not backend:
                        return None
                    listed = real.startswith(inside)
                    path = "/" + os.path.relpath(real, root).replace(os.sep, "/")
            except OSError:
                listed = False  # a link loop: not a file
            if listed:
                rule = is_rule_file(path)
                match: dict[str, Any] = {"path": path, "is_dir": False, _RULE: rule}
                matches.append(match)
                if rule:
                    rules.append((entry, match))
    if len(rules) > MAX_RULE_FILES_PER_FOLDER:
        # Over the cap: which files came first decides what stays (one `stat` each, only
        # here; a folder within the cap costs none).
        for entry, match in rules:
            try:
                match[_AGE] = entry.stat().st_ctime_ns
            except OSError:
                match[_AGE] = 0
    return _LocalListing(matches)


def list_rule_files(
    backend: BackendProtocol, folders: Sequence[str], *, others: list[str] | None = None
) -> tuple[RuleFileList, list[RuleProblem]]:
    """List the rule files below each folder: one recursive `glob` call per folder (on local
    disk, one `os.scandir` walk), at most `MAX_RULE_FILES_PER_FOLDER` rule files each.

    A missing folder is not a problem (it lists nothing); a listing error is a `warning`
    naming the folder, and so is a folder over the cap. Nothing is downloaded.

    Args:
        backend: Any deepagents backend.
        folders: Rule folders, lowest precedence first (index = `folder_index`).
        others: Receives the paths of the other files the folders hold (not rule files):
            the read-only guard leaves the user's own files alone.

    Returns:
        `(folder_index, path)` of each rule file, ordered by folder then path, and the problems.
    """
    results: list[tuple[int, str, Any]] = []
    for folder_index, raw in enumerate(folders):
        folder = _folder(raw)
        try:
            listing = _local_listing(backend, folder) or backend.glob(LISTING_PATTERN, path=folder)
            results.append((folder_index, folder, listing))
        except Exception as exc:  # a backend is foreign code; one bad folder must not stop a run
            results.append((folder_index, folder, exc))
    return _collect(results, others)


async def alist_rule_files(
    backend: BackendProtocol, folders: Sequence[str], *, others: list[str] | None = None
) -> tuple[RuleFileList, list[RuleProblem]]:
    """Async `list_rule_files`."""
    results: list[tuple[int, str, Any]] = []
    for folder_index, raw in enumerate(folders):
        folder = _folder(raw)
        try:
            local = await asyncio.to_thread(_local_listing, backend, folder)
            listing = (
                local if local is not None else await backend.aglob(LISTING_PATTERN, path=folder)
            )
            results.append((folder_index, folder, listing))
        except Exception as exc:  # see list_rule_files
            results.append((folder_index, folder, exc))
    return _collect(results, others)


def parse_loaded(
    files: RuleFileList,
    loaded: DownloadResult,
    *,
    parse: Callable[[str, str, int], tuple[Rule | None, Sequence[RuleProblem]]] | None = None,
) -> list[tuple[Rule | None, list[RuleProblem]]]:
    """Parse the listed rule files from one load of the engine's one decoder.

    The middleware, `load_rule_set` and `layered-memory lint` all read rule files with
    `core.loading.download_texts` and parse them with `parse_rule_file` here, so they reach
    the same verdict on every file.

    Args:
        files: What `list_rule_files` returned.
        loaded: `download_texts(backend, [path for _, path in files])`.
        parse: `parse_rule_file` or a cached form of it (`(path, text, folder_index)`).

    Returns:
        One `(rule or None, problems)` per file, ready for `build_rule_set`.
    """
    why = {problem.path: problem.reason for problem in loaded.problems}
    parsed: list[tuple[Rule | None, list[RuleProblem]]] = []
    for folder_index, path in files:
        text = loaded.texts.get(path)
        if text is not None:
            rule, problems = (
                parse(path, text, folder_index)
                if parse is not None
                else parse_rule_file(path, text, folder_index=folder_index)
            )
            parsed.append((rule, list(problems)))
        elif posixpath.basename(path) in LEGACY_RULE_FILES and (
            path in loaded.missing or why.get(path) == "is a directory"
        ):
            continue  # a legacy file name given as a folder: none there, or an empty folder
        elif path in loaded.missing:
            reason = "cannot read: file not found (deleted after it was listed?)"
            parsed.append((None, [RuleProblem(path, reason)]))
        else:
            parsed.append((None, [RuleProblem(path, why.get(path, "unreadable"))]))
    return parsed


def _finish(
    parsed: list[tuple[Rule | None, list[RuleProblem]]],
    listing_problems: list[RuleProblem],
    *,
    strict: bool,
    log: bool,
) -> RuleSet:
    rule_set = build_rule_set([*parsed, (None, listing_problems)], log=log)
    if strict:
        rule_set.raise_on_error()
    return rule_set


def load_rule_set(
    backend: BackendProtocol,
    folders: Sequence[str],
    *,
    strict: bool = False,
    log: bool = True,
) -> RuleSet:
    """List, download (one batched call), parse and build the rules of `folders`.

    Args:
        backend: Any deepagents backend.
        folders: Rule folders, lowest precedence first.
        strict: Raise on the first error (an unreadable file, an invalid glob).
        log: Log each problem as a warning naming the file.

    Returns:
        The rule set; its `problems` say what was skipped and why.

    Raises:
        RuleFileError: In strict mode, for the first error.

    Example:
        `load_rule_set(FilesystemBackend(root_dir=".", virtual_mode=True), ["/.claude/rules"])`
    """
    files, listing_problems = list_rule_files(backend, folders)
    loaded = download_texts(backend, [path for _, path in files])
    return _finish(parse_loaded(files, loaded), listing_problems, strict=strict, log=log)


async def aload_rule_set(
    backend: BackendProtocol,
    folders: Sequence[str],
    *,
    strict: bool = False,
    log: bool = True,
) -> RuleSet:
    """Async `load_rule_set`."""
    files, listing_problems = await alist_rule_files(backend, folders)
    loaded = await adownload_texts(backend, [path for _, path in files])
    return _finish(parse_loaded(files, loaded), listing_problems, strict=strict, log=log)


# -- rendering -------------------------------------------------------------------------------
# Rule files are untrusted: bodies, names, descriptions and paths all go through the package's
# one defusing function (`safety.defuse`), so a rule cannot close the tags around it.

RULES_OPEN = "<rules>\n"
RULES_CLOSE = "</rules>"
REQUESTED_OPEN = (
    "<requested_rules>\n"
    "Rules that apply only when relevant: read_file a rule's path when the task calls for it.\n"
)
REQUESTED_CLOSE = "</requested_rules>\n"


def _rule_block(rule: Rule, room: int, counted: CutCount) -> str | None:
    """The rule's block, its body truncated to fit `room` characters; None if nothing fits.

    A cut body ends with the same marker as a cut memory file (`core.render.truncate_text`).
    """
    head = f'<rule name="{defuse_attribute(rule.name)}" path="{defuse_attribute(rule.path)}">\n'
    tail = "\n</rule>\n"
    body = defuse_within(rule.body, room)
    block = head + body + tail
    if len(block) <= room:
        return block
    kept = truncate_text(body, room - len(head) - len(tail), rule.path, counted)
    return head + kept + tail if kept else None


def _requested_line(rule: Rule) -> str:
    name, path = defuse_name(" ".join(rule.name.split())), defuse_name(" ".join(rule.path.split()))
    description = defuse_name(" ".join(rule.description.split()))
    if not description:  # VS Code lists instructions without one too
        return f"- {name} (path: {path})\n"
    return f"- {name}: {description} (path: {path})\n"


def render_rules(match: RuleMatch, *, max_chars: int, counted: CutCount = CHARS) -> str:
    """Render the rules block for the prompt: deterministic bytes, at most `max_chars` long.

    Applied rules come first, each as `<rule name="..." path="...">body</rule>` in the match's
    order; a body over the remaining budget keeps its head and ends with a marker naming its
    file and how much was cut; rules after the budget ran out are left out. Requested rules
    follow as one line each (name, description, path), as many as fit. An empty match, or a
    budget too small for anything, renders as `""`.

    Args:
        match: What `RuleSet.match` selected.
        max_chars: The budget for the whole block, tags included.
        counted: What a cut marker counts in (the model's tokens when a token budget set
            `max_chars`).

    Returns:
        The block (no trailing newline), or `""`.
    """
    if not match or max_chars <= len(RULES_OPEN) + len(RULES_CLOSE):
        return ""
    room = max_chars - len(RULES_OPEN) - len(RULES_CLOSE)
    parts: list[str] = []
    for rule in match.applied:
        block = _rule_block(rule, room, counted)
        if block is None:
            break
        parts.append(block)
        room -= len(block)
    lines: list[str] = []
    used = len(REQUESTED_OPEN) + len(REQUESTED_CLOSE)
    for rule in match.requested:
        line = _requested_line(rule)
        if used + len(line) > room:
            break
        lines.append(line)
        used += len(line)
    if lines:
        parts.append(REQUESTED_OPEN + "".join(lines) + REQUESTED_CLOSE)
    if not parts:
        return ""
    return RULES_OPEN + "".join(parts) + RULES_CLOSE
