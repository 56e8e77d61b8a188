"""Cites as writers take them, and the stale entries of a memory file, found, dropped or
refreshed.

A lesson may cite the files (or line ranges) it is about; the digest of each cited span is kept
with the entry and a load marks it stale when a span changed, moved or vanished
(`core.staleness`). The cites of `record_insight` and of the consolidator's `update_memory`
are model output, so hostile: each goes through `checked_cites` and `digested` before anything
is stored, and a bad one is skipped with a logged reason naming it (the lesson still lands):

- at most `MAX_CITES_PER_ENTRY` cites of at most `MAX_CITE_CHARS` characters each;
- a path starting with `/`, inside the backend's root (`layers.normalize_backend_path`, the
  check of every path the package reads), naming no credential file (`~/.ssh`, `.env`,
  `*.pem`, ...) and holding no secret itself;
- a file that exists, lines that exist, and a cited span holding no secret: a digest is short,
  and the digest of a short secret could be searched for, so none is ever stored.

`stale_lessons` is the one list of stale entries `layered-memory doctor` and
`layered-memory review` print; `decide_stale` drops or refreshes them (refresh: a person says
the lesson still holds, so the current spans are digested again and the entry's `date=` becomes
today, which counts as re-confirming it for the consolidator's `expire_after_days`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from layered_memory._logs import get_logger
from layered_memory.core.files import Texts, strategy_for
from layered_memory.core.layers import normalize_backend_path
from layered_memory.core.loading import download_texts
from layered_memory.core.staleness import (
    CITES_FIELD,
    STALE_MARK,
    Cite,
    StaleEntry,
    cited_paths,
    digest_span,
    find_stale,
    parse_cite,
    shares,
)
from layered_memory.safety.redaction import find_secrets
from layered_memory.writeback._lesson_words import CREDENTIAL_PATHS

__all__ = [
    "MAX_CITES_PER_ENTRY",
    "MAX_CITE_CHARS",
    "StaleDecision",
    "StaleLesson",
    "checked_cites",
    "citable",
    "cites_field",
    "current_texts",
    "decide_stale",
    "digested",
    "is_fresh",
    "stale_lessons",
]

logger = get_logger(__name__)

MAX_CITES_PER_ENTRY: Final = 8
"""Cites one lesson keeps; more are skipped (a lesson about everything is about nothing)."""
MAX_CITE_CHARS: Final = 300
"""The longest cite taken (a path and its line range)."""

_MAX_LOOKED_AT: Final = MAX_CITES_PER_ENTRY * 2
"""Cites of one lesson read at all (each skipped one is a warning)."""
_SECRET_SUFFIXES: Final = (
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".kdbx",
    ".tfstate",  # Terraform keeps every resource's secrets in it, in plain text
)
_DATE_FIELD = re.compile(r"\bdate=\d{4}-\d{2}-\d{2}\b")
_ID_CHARS: Final = 12
_LEAST_PREFIX: Final = 6  # of an id given to `review drop|refresh` (12 digits are listed)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text if len(text) <= 80 else text[:79] + "…")


def checked_cites(raw: Any, backend: Any) -> tuple[list[Cite], list[str]]:
    """The well-formed cites of `raw` (model output: anything), and why each other one is
    skipped.

    Args:
        raw: A list of cites (`/src/app.py`, `/src/app.py#L10-24`); a single string is one
            cite; None is none.
        backend: The backend the cited files are read through.

    Returns:
        The cites, each once, in order (no digest yet), and the reasons of the skipped ones,
        each naming the cite.
    """
    if raw is None:
        return [], []
    specs = [raw] if isinstance(raw, str) else raw
    if not isinstance(specs, (list, tuple)):
        return [], [f"cites {_shown(raw)}: expected a list of file paths"]
    cites: dict[Cite, None] = {}
    skipped: list[str] = []
    for spec in specs[:_MAX_LOOKED_AT]:
        if len(cites) >= MAX_CITES_PER_ENTRY:
            skipped.append(
                f"cite {_shown(spec)}: a lesson keeps {MAX_CITES_PER_ENTRY} cites at most"
            )
            continue
        reason = _spec_problem(spec)
        if reason is None:
            try:
                cite = parse_cite(spec)
            except ValueError as exc:
                skipped.append(str(exc))
                continue
            reason = _path_problem(cite.path, backend)
            if reason is None:
                cites.setdefault(cite, None)
                continue
        shown = "(it holds a secret)" if reason.startswith("the path holds") else _shown(spec)
        skipped.append(f"cite {shown}: {reason}")
    if len(specs) > _MAX_LOOKED_AT:  # one line for the rest: a million cites, one warning
        skipped.append(f"{len(specs) - _MAX_LOOKED_AT} more cites not looked at")
    return list(cites), skipped


def _spec_problem(spec: Any) -> str | None:
    if not isinstance(spec, str):
        return f"a cite is a path string, not {type(spec).__name__}"
    if len(spec) > MAX_CITE_CHARS:
        return f"longer than {MAX_CITE_CHARS} characters"
    kinds = sorted({finding.kind for finding in find_secrets(spec)})
    if kinds:
        return f"the path holds a secret ({', '.join(kinds)}); a cite never stores one"
    if not spec.strip().startswith("/"):
        return "a cite is a backend path starting with / (e.g. /src/app.py#L10-24)"
    return None


def _path_problem(path: str, backend: Any) -> str | None:
    """Why `path` is never cited nor read for a cite: outside the root, or a credential file
    by its name or, through a symlink or a trailing `/`, by the name of the file it reads."""
    if _credential(path):
        return _CREDENTIAL
    normalized, reason = normalize_backend_path(path, backend)
    if normalized is None:
        return reason or "not a path the backend may read"
    return _CREDENTIAL if _credential(normalized) else None


_CREDENTIAL: Final = "a credential file is never cited (its digest would be stored)"


def _credential(path: str) -> bool:
    lowered = path.casefold()
    name = posixpath.basename(lowered.rstrip("/"))
    return (
        any(part in lowered for part in CREDENTIAL_PATHS)
        or name == ".env"
        or name.startswith(".env.")
        or name.endswith(_SECRET_SUFFIXES)
    )


def citable(backend: Any, paths: Iterable[str]) -> list[str]:
    """The paths a cite may read (`_path_problem`): a cite planted in a memory file by hand
    never makes a load, `doctor` or `review` read a credential file, whose digest compared
    with a guessed one would confirm the guess. A refused path reads as gone (`moved`)."""
    return [path for path in paths if _path_problem(path, backend) is None]


def digested(
    backend: Any, cites: Sequence[Cite], texts: Mapping[str, str] | None = None
) -> tuple[list[Cite], list[str]]:
    """`cites` with the digest of each span now, and why each other one is skipped (a file
    that does not exist or cannot be read, lines past its end, a span holding a secret).

    Args:
        backend: The backend the cited files are read through (one batched download).
        cites: Checked cites (`checked_cites`).
        texts: The cited files' texts when the caller read them already.

    Returns:
        The digested cites and the reasons of the skipped ones, each naming the cite.
    """
    if not cites:
        return [], []
    if texts is None:
        texts = current_texts(backend, [cite.path for cite in cites])
    done: list[Cite] = []
    skipped: list[str] = []
    for cite in cites:
        text = texts.get(cite.path)
        if text is None:
            skipped.append(f"cite {cite.spec()!r}: no such file (or it cannot be read as text)")
            continue
        digest = digest_span(text, cite.start, cite.end)
        if not digest:
            count = text.count("\n") + (not text.endswith("\n"))
            skipped.append(f"cite {cite.spec()!r}: the file has {count} lines")
            continue
        span = (
            text if cite.start is None else "\n".join(text.split("\n")[cite.start - 1 : cite.end])
        )
        if find_secrets(span):
            skipped.append(
                f"cite {cite.spec()!r}: the cited lines hold a secret; a digest of them is never "
                "stored (cite other lines)"
            )
            continue
        done.append(dataclasses.replace(cite, digest=digest))
    return done, skipped


def current_texts(backend: Any, paths: Iterable[str]) -> dict[str, str]:
    """The cited files' texts now (one batched download; a missing one, or one no cite may
    read, is absent)."""
    unique = citable(backend, dict.fromkeys(paths))
    return dict(download_texts(backend, unique).texts) if unique else {}


def cites_field(cites: Sequence[Cite]) -> str:
    """`cites=a@d1,b#L3-5@d2`: the field a learned entry's comment keeps them in ("" for
    none)."""
    return f"{CITES_FIELD}{','.join(cite.spec() for cite in cites)}" if cites else ""


def is_fresh(line: str, current: Mapping[str, str]) -> bool:
    """Whether an entry's line cites something and every cited span is as it was cited.

    Args:
        line: The entry's line.
        current: Cited path -> its text now (absent: gone).
    """
    return CITES_FIELD in line and bool(cited_paths([line])) and not find_stale(line, current)


# --- Stale entries: listed, dropped, refreshed -------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class StaleLesson:
    """A stale entry of a memory file, as `doctor` and `review` list it.

    Attributes:
        id: 12 hex digits naming the entry's line (what `review drop|refresh` take).
        path: The memory file.
        entry: The entry's line without its comment.
        cites: Each stale cite (`path#La-b`) with why: `changed`, `shorter` (the lines are
            past the file's end) or `moved` (the file moved or was deleted).
        reasons: The same in words.
        since: The day the entry was written or last confirmed ("" when it does not say).
    """

    id: str
    path: str
    entry: str
    cites: tuple[tuple[str, str], ...]
    reasons: tuple[str, ...]
    since: str


def stale_lessons(
    backend: Any, texts: Mapping[str, str], *, current: Mapping[str, str] | None = None
) -> list[StaleLesson]:
    """The stale entries of memory files: the one list `doctor` and `review` print.

    Args:
        backend: The backend the cited files are read through.
        texts: Memory path -> its text (as written, or as a load marked it).
        current: The cited files' texts when the caller read them already.

    Returns:
        The stale entries, file by file, in file order.
    """
    if current is None:
        current = current_texts(backend, cited_paths(texts.values()))
    return [
        _lesson(path, text.split("\n")[entry.line], entry)
        for (path, text), limit in zip(texts.items(), shares(texts.values()), strict=True)
        for entry in find_stale(text, current, limit=limit)
    ]


def _lesson(path: str, line: str, entry: StaleEntry) -> StaleLesson:
    return StaleLesson(
        id=_entry_id(line, entry),
        path=path,
        entry=entry.entry,
        cites=tuple((cite.spec().split("@")[0], _kind(why)) for cite, why in entry.cites),
        reasons=tuple(why for _cite, why in entry.cites),
        since=entry.since,
    )


def _kind(why: str) -> str:
    if why.endswith("changed"):
        return "changed"
    return "moved" if why.endswith("deleted") else "shorter"


def _entry_id(line: str, entry: StaleEntry) -> str:
    """The same for the line as written and as a load marked it (the marker left out)."""
    comment = line[line.rfind("<!--", 0, line.find(CITES_FIELD)) :].rstrip("\r")
    spelled = f"{entry.entry}\x00{comment}"
    return hashlib.sha256(spelled.encode("utf-8", "surrogatepass")).hexdigest()[:_ID_CHARS]


@dataclasses.dataclass(frozen=True, slots=True)
class StaleDecision:
    """What `decide_stale` did with one id: `dropped`, `refreshed` or `not done` (why)."""

    id: str
    outcome: str
    entry: str | None = None
    reason: str | None = None


def decide_stale(
    backend: Any, path: str, ids: Sequence[str], *, action: str, today: str
) -> list[StaleDecision]:
    """Drop or refresh stale entries of `path`, in one locked transaction of the file.

    Args:
        backend: The memory file's backend.
        path: The memory file.
        ids: The entries' ids (`StaleLesson.id`; a unique prefix of 6 digits or more).
        action: `drop` (the line goes) or `refresh` (the current spans are digested again and
            `date=` becomes `today`: a person said the lesson still holds).
        today: ISO date.

    Returns:
        One decision per id, in order.
    """
    first = download_texts(backend, [path]).texts.get(path)
    current = current_texts(backend, cited_paths([first or ""]))
    decisions: list[StaleDecision] = []

    def transform(files: Texts) -> tuple[dict[str, str], None]:
        decisions.clear()
        text = files[path]
        if text is None:
            decisions.extend(StaleDecision(i, "not done", reason="no memory file") for i in ids)
            return {}, None
        lines = text.split("\n")
        found = {
            lesson.id: (entry, lesson)
            for entry in find_stale(text, current)
            for lesson in [_lesson(path, lines[entry.line], entry)]
        }
        gone: set[int] = set()
        for wanted in ids:
            prefix = wanted.strip().lower()
            named = [key for key in found if key.startswith(prefix)]
            if len(prefix) < _LEAST_PREFIX or len(named) != 1:
                why = "ambiguous" if len(named) > 1 else "no stale entry has this id"
                if len(prefix) < _LEAST_PREFIX:
                    why = f"an id prefix needs at least {_LEAST_PREFIX} digits, got {wanted!r}"
                decisions.append(StaleDecision(wanted, "not done", reason=why))
                continue
            entry, lesson = found[named[0]]
            if action == "drop":
                gone.add(entry.line)
                decisions.append(StaleDecision(lesson.id, "dropped", lesson.entry))
                continue
            refreshed, reason = _refreshed(backend, lines[entry.line], current, today)
            if refreshed is None:
                decisions.append(StaleDecision(lesson.id, "not done", lesson.entry, reason))
            else:
                lines[entry.line] = refreshed
                decisions.append(StaleDecision(lesson.id, "refreshed", lesson.entry))
        kept = [line for index, line in enumerate(lines) if index not in gone]
        new = "\n".join(kept)
        return ({path: new} if new != text else {}), None

    strategy_for(backend, [path]).transact(transform)
    _log_decisions(path, decisions)
    return list(decisions)


def _refreshed(
    backend: Any, line: str, current: Mapping[str, str], today: str
) -> tuple[str | None, str | None]:
    """The entry's line with every cite digested again and `date=` today, or why not."""
    at = line.find(CITES_FIELD)
    opened = line.rfind("<!--", 0, at)
    closed = line.find("-->", at)
    stop = line.find(" ", at, closed)
    stop = closed if stop < 0 else stop
    specs = line[at + len(CITES_FIELD) : stop].split(",")
    try:
        cites = [parse_cite(spec.rsplit("@", 1)[0]) for spec in specs if "@" in spec]
    except ValueError as exc:
        return None, f"{exc}: edit the cite or drop the entry"
    # A cite planted by hand was never checked: refreshing it would store what it reads.
    refused = [
        f"cite {cite.spec()!r}: {why}"
        for cite in cites
        if (why := _path_problem(cite.path, backend)) is not None
    ]
    if refused:
        return None, f"{'; '.join(refused)}: edit the cite or drop the entry"
    done, skipped = digested(backend, cites, current)
    if skipped:
        return None, f"{'; '.join(skipped)}: edit the cite or drop the entry"
    comment = f"{line[opened:at]}{cites_field(done)}{line[stop:closed]}"
    if _DATE_FIELD.search(comment):
        comment = _DATE_FIELD.sub(f"date={today}", comment, count=1)
    else:
        comment = f"{comment.rstrip()} date={today} "
    head = line[:opened]
    marked = head.find(STALE_MARK)
    head = head[:marked] if marked >= 0 else head
    return f"{head.rstrip()} {comment}{line[closed:]}", None


def _log_decisions(path: str, decisions: Sequence[StaleDecision]) -> None:
    for decision in decisions:
        if decision.outcome == "not done":
            logger.warning("stale entry %s of %s: %s", decision.id, path, decision.reason)
