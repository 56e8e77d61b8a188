"""Lessons that cite what they are about: stale ones marked before they reach the prompt.

An entry of a writable memory file may cite files, optionally line ranges, with the digest of
each cited span when it was written, in an HTML comment at the end of its line (the loader
strips comments before the prompt, so the model never sees it):

    - Retries are capped at 3 <!-- cites=/src/http.py#L10-24@3f2a9c1d0b7e date=2026-12-07 -->

A learned entry keeps the fields in its own provenance comment (`<!-- learned id=k3f9
cites=... -->`). At load, when the cited span's text no longer has that digest, or the file is
gone, the entry is shown with a marker before its comment: `[stale: /src/http.py lines 10-24
changed since 2026-12-07; check it before relying on this]`. The consolidator reads the same
marked text, so it can update or delete the entry.

Cost: nothing when no entry cites anything (one substring test per writable file). With cites,
one batched download of the cited files per load (local disk: the read cache, keyed on stat
signatures, reads a file again only when it changed) and one digest per cited span (cached by
text). Never on the per-model-call path: the marked text is part of the loaded memory, whose
block is rendered and cached as any other.

Input is hostile: a line is searched once, left to right (no regex with two unbounded
quantifiers); at most `MAX_CITES` cites are checked per load; a cited path goes through
`layers.normalize_backend_path` before the backend sees it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CITES_FIELD",
    "MAX_CITES",
    "STALE_MARK",
    "Cite",
    "StaleEntry",
    "cite_comment",
    "cited_paths",
    "citing_files",
    "digest_span",
    "find_stale",
    "mark_stale",
    "marked_texts",
    "parse_cite",
    "shares",
]

CITES_FIELD = "cites="
"""The field naming what an entry cites, inside an HTML comment on its line."""

STALE_MARK = "[stale: "
"""How the marker of a stale entry begins."""

MAX_CITES = 200
"""Cited spans checked per load: a file citing thousands of paths costs no more."""

_DIGEST_CHARS = 12
_CITE = re.compile(r"(?P<path>[^\s#@,<>]+)(?:#L(?P<start>\d{1,7})(?:-(?P<end>\d{1,7}))?)?")
_STORED = re.compile(
    r"(?P<path>[^\s#@,<>]+)(?:#L(?P<start>\d{1,7})(?:-(?P<end>\d{1,7}))?)?@(?P<digest>[0-9a-f]{12})"
)
_DATE = re.compile(r"\bdate=(?P<date>\d{4}-\d{2}-\d{2})\b")


@dataclass(frozen=True, slots=True)
class Cite:
    """A cited file, optionally a line range of it.

    Attributes:
        path: The file's backend path.
        start: First cited line (1-based), or None for the whole file.
        end: Last cited line (inclusive), or None for the whole file.
        digest: The span's digest when it was cited ("" before it is computed).
    """

    path: str
    start: int | None = None
    end: int | None = None
    digest: str = ""

    def spec(self) -> str:
        """`path#La-b@digest`, as stored in the comment."""
        lines = "" if self.start is None else f"#L{self.start}-{self.end}"
        return f"{self.path}{lines}@{self.digest}" if self.digest else f"{self.path}{lines}"

    def where(self) -> str:
        """The span in words (`/src/app.py lines 10-24`)."""
        if self.start is None:
            return self.path
        return f"{self.path} lines {self.start}-{self.end}"


def parse_cite(spec: str) -> Cite:
    """A cite as a tool call gives it: `path`, `path#L10` or `path#L10-24`.

    Args:
        spec: The cite.

    Returns:
        The cite (without a digest).

    Raises:
        ValueError: Not a path with an optional line range, or a range that runs backwards.
    """
    found = _CITE.fullmatch(spec.strip()) if isinstance(spec, str) else None
    if found is None:
        msg = (
            f"cite {spec!r}: expected a file path, optionally #L<first>-<last> "
            "(e.g. /src/app.py#L10-24)"
        )
        raise ValueError(msg)
    return _cite_of(found, "")


def _cite_of(found: re.Match[str], digest: str) -> Cite:
    start = found.group("start")
    if start is None:
        return Cite(found.group("path"), digest=digest)
    first = int(start)
    last = int(found.group("end") or first)
    if first < 1 or last < first:
        msg = f"cite {found.group(0)!r}: lines run from 1 up (L{first}-{last})"
        raise ValueError(msg)
    return Cite(found.group("path"), first, last, digest)


@functools.lru_cache(maxsize=1024)
def digest_span(text: str, start: int | None, end: int | None) -> str:
    """The digest of a cited span of `text` (the whole text without a range).

    Args:
        text: The cited file's text.
        start: First line (1-based), or None.
        end: Last line (inclusive), or None.

    Returns:
        12 hex digits; "" when the range runs past the end of the file (it moved).
    """
    if start is not None and end is not None:
        lines = text.split("\n")
        if text.endswith("\n"):  # the last newline ends the last line; it starts none
            lines.pop()
        if end > len(lines):
            return ""
        text = "\n".join(lines[start - 1 : end])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]


def cite_comment(cites: Sequence[Cite], texts: Mapping[str, str | None], date: str) -> str:
    """The comment an entry ends with: each cite with its span's digest now.

    Args:
        cites: What the entry cites.
        texts: Cited path -> its current text (None: missing).
        date: The day the entry was written (`YYYY-MM-DD`).

    Returns:
        `<!-- cites=a@d1,b#L3-5@d2 date=... -->`; a cite of a missing file or of lines past
        its end is stored with no digest match possible (it shows stale at once).
    """
    specs = []
    for cite in cites:
        text = texts.get(cite.path)
        digest = digest_span(text, cite.start, cite.end) if text is not None else ""
        specs.append(Cite(cite.path, cite.start, cite.end, digest or "0" * _DIGEST_CHARS).spec())
    return f"<!-- {CITES_FIELD}{','.join(specs)} date={date} -->"


@dataclass(frozen=True, slots=True)
class _Cited:
    line: int
    comment_at: int
    cites: tuple[Cite, ...]
    date: str


def _cited_lines(text: str, limit: int) -> list[_Cited]:
    """The cited entries of `text`, in file order, until `limit` cites were looked at (valid
    or not): what is past them is never parsed, so a file of 10,000 cites costs a load no
    more than one of `limit`."""
    if CITES_FIELD not in text:
        return []
    found: list[_Cited] = []
    left = limit
    for number, line in enumerate(text.split("\n")):
        if left <= 0:
            break
        at = line.find(CITES_FIELD)
        if at < 0:
            continue
        opened = line.rfind("<!--", 0, at)
        closed = line.find("-->", at)
        if opened < 0 or closed < 0:
            continue
        start = at + len(CITES_FIELD)
        stop = line.find(" ", start, closed)
        stop = closed if stop < 0 else stop
        parts = line[start:stop].split(",", left)[:left]
        left -= len(parts)
        cites = tuple(
            _cite_of(match, match.group("digest"))
            for part in parts
            if (match := _STORED.fullmatch(part)) is not None and _valid_range(match)
        )
        if not cites:
            continue
        # `date=` is outside the cites field: a search never walks a planted field's length
        dated = _DATE.search(line, opened, at) or _DATE.search(line, stop, closed)
        found.append(_Cited(number, opened, cites, dated.group("date") if dated else ""))
    return found


def _valid_range(match: re.Match[str]) -> bool:
    start, end = match.group("start"), match.group("end")
    return start is None or (int(start) >= 1 and int(end or start) >= int(start))


def cited_paths(texts: Iterable[str], *, limit: int = MAX_CITES) -> list[str]:
    """The files the entries of these texts cite (each once, at most `limit` cites read).

    Args:
        texts: Memory file texts.
        limit: Cites looked at, in file order.

    Returns:
        The cited paths, in first-cited order.
    """
    paths: dict[str, None] = {}
    seen = 0
    for text in texts:
        for cited in _cited_lines(text, limit - seen):
            for cite in cited.cites:
                if seen >= limit:
                    return list(paths)
                seen += 1
                paths.setdefault(cite.path, None)
    return list(paths)


def shares(texts: Iterable[str], *, limit: int = MAX_CITES) -> list[int]:
    """Each text's part of `limit`, in order: the cites `cited_paths` looks at in it. Checked
    with its share, a text is judged on exactly the files a caller of `cited_paths` read: one
    file citing `limit` files leaves none for the next, whose entries count as fresh (not
    checked), never as gone because their files were not read."""
    parts = []
    left = limit
    for text in texts:
        parts.append(max(left, 0))
        if left > 0:
            left -= sum(len(cited.cites) for cited in _cited_lines(text, left))
    return parts


@dataclass(frozen=True, slots=True)
class StaleEntry:
    """An entry whose cited span changed, moved or vanished.

    Attributes:
        line: Its line's index in the text (0-based, lines split on `\\n`).
        entry: Its line without the comment (and without a marker an earlier load added).
        cites: The stale cites, each with why in words (`/src/a.py lines 3-5 changed`).
        since: The day the entry was written or last confirmed (`date=`), or "".
        marker: The marker a load shows before the comment.
    """

    line: int
    entry: str
    cites: tuple[tuple[Cite, str], ...]
    since: str
    marker: str


def find_stale(
    text: str, cited: Mapping[str, str | None], *, limit: int = MAX_CITES
) -> list[StaleEntry]:
    """The entries of `text` whose cited span changed, moved or vanished: the one judgement
    behind the load's markers, `layered-memory doctor`, `review` and the consolidator.

    Args:
        text: A memory file's text (as written, or as a load marked it).
        cited: Cited path -> its current text (None or absent: the file is gone).
        limit: Cites checked, in file order (entries past it count as fresh).

    Returns:
        The stale entries, in file order.
    """
    found = _cited_lines(text, limit)
    if not found:
        return []
    lines = text.split("\n")
    stale: list[StaleEntry] = []
    seen = 0
    for entry in found:
        reasons = []
        for cite in entry.cites:
            if seen >= limit:
                break
            seen += 1
            reason = _why_stale(cite, cited.get(cite.path))
            if reason is not None:
                reasons.append((cite, reason))
        if not reasons:
            continue
        since = f" since {entry.date}" if entry.date else ""
        words = "; ".join(reason for _cite, reason in reasons)
        head = lines[entry.line][: entry.comment_at]
        marked = head.find(STALE_MARK)
        head = (head[:marked] if marked >= 0 else head).strip()
        stale.append(
            StaleEntry(
                line=entry.line,
                entry=head,
                cites=tuple(reasons),
                since=entry.date,
                marker=f"{STALE_MARK}{words}{since}; check it before relying on this]",
            )
        )
    return stale


def mark_stale(
    text: str, cited: Mapping[str, str | None], *, limit: int = MAX_CITES
) -> tuple[str, list[str]]:
    """`text` with a marker on each entry whose cited span changed, moved or vanished.

    Args:
        text: A memory file's text.
        cited: Cited path -> its current text (None or absent: the file is gone).
        limit: Cites checked, in file order (entries past it are left unmarked).

    Returns:
        The marked text (the same object when nothing is stale) and the markers added.
    """
    stale = find_stale(text, cited, limit=limit)
    if not stale:
        return text, []
    lines = text.split("\n")
    for entry in stale:
        line = lines[entry.line]
        comment_at = line.rfind("<!--", 0, line.find(CITES_FIELD))
        head = line[:comment_at].rstrip()
        lines[entry.line] = f"{head} {entry.marker} {line[comment_at:]}"
    return "\n".join(lines), [entry.marker for entry in stale]


def _why_stale(cite: Cite, text: str | None) -> str | None:
    if text is None:
        return f"{cite.path} moved or was deleted"
    now = digest_span(text, cite.start, cite.end)
    if now == cite.digest:
        return None
    if not now:
        return f"{cite.where()} no longer exist (the file is shorter)"
    return f"{cite.where()} changed"


def citing_files(
    texts: Mapping[str, str], writable: Callable[[str], bool]
) -> tuple[dict[str, str], list[str]]:
    """The writable files whose entries cite something, and the files they cite (the
    sans-IO half of a load's staleness check: the caller downloads the cited files).

    Args:
        texts: Memory path -> text, as loaded.
        writable: Whether a path is writable memory (read-only memory is shown as written).

    Returns:
        Path -> text of the citing files, and the cited paths (both empty in the usual case).
    """
    citing = {path: text for path, text in texts.items() if CITES_FIELD in text and writable(path)}
    return citing, cited_paths(citing.values()) if citing else []


def marked_texts(
    texts: Mapping[str, str], citing: Mapping[str, str], current: Mapping[str, str]
) -> dict[str, str]:
    """`texts` with each citing file's stale entries marked.

    Args:
        texts: Memory path -> text, as loaded.
        citing: The citing files (`citing_files`).
        current: Cited path -> its text now, for those that exist.

    Returns:
        Path -> text, the citing files marked.
    """
    marked = dict(texts)
    for (path, text), limit in zip(citing.items(), shares(citing.values()), strict=True):
        marked[path] = mark_stale(text, current, limit=limit)[0]
    return marked
