"""Write-back: what a run learned becomes one line in the writable MEMORY.md.

`MemoryWriter` adds `- YYYY-MM-DD: [entity] text` at the top of the file's
`## Recent Insights` section (file and section are created when missing; every other byte of the
file stays as it was), skips a second entry for the same entity on the same day, keeps at most
`max_insights` entries and moves older ones to an archive file beside it, redacts secrets first,
and serializes concurrent writers with every other route that writes the file (see
`layered_memory.core.files`).

`register_write_back` turns that into the `PIPELINE_END` handler `memory_write_back`, and
`record_insight_tool` gives the agent a tool whose notes are written when the run ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import posixpath
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool

from layered_memory._logs import get_logger
from layered_memory.core.files import Texts, strategy_for
from layered_memory.core.run_data import is_dry_run, run_value, thread_id_of
from layered_memory.core.staleness import Cite, parse_cite
from layered_memory.writeback.cites import (
    MAX_CITE_CHARS,
    MAX_CITES_PER_ENTRY,
    checked_cites,
    cites_field,
    digested,
)
from layered_memory.writeback.hooks import HookEvent, HookRegistry, note_write_back
from layered_memory.writeback.sections import (
    RESCAN_MARGIN,
    Insight,
    InsightPlan,
    archive_path_for,
    cut_text,
    normalize_entity,
    one_line,
    plan_insight,
    redacted_line,
)

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol

__all__ = [
    "DEFAULT_MAX_INSIGHT_CHARS",
    "INSIGHT_MARKER",
    "WRITE_BACK_HANDLER_NAME",
    "InsightNotebook",
    "MemoryWriter",
    "MemoryWrittenData",
    "default_formatter",
    "record_insight_tool",
    "register_write_back",
]

logger = get_logger(__name__)

WRITE_BACK_HANDLER_NAME: Final = "memory_write_back"
DEFAULT_MAX_INSIGHT_CHARS: Final = 500
INSIGHT_MARKER: Final = "INSIGHT:"
"""A final AI message line starting with this marker is taken as the run's insight."""

Formatter = Callable[[Mapping[str, Any]], "str | None"]
Clock = Callable[[], dt.date]


class MemoryWrittenData(TypedDict):
    """The data of a `HookEvent.MEMORY_WRITTEN` event."""

    path: str
    archive_path: str
    entity: str | None
    text: str
    """The line's text as written (redacted, one line)."""
    date: str
    archived: int
    """Entries moved to the archive by this write."""
    redacted: list[str]
    """Kinds of secrets removed from the text (never the secrets)."""
    thread_id: str | None


class MemoryWriter:
    """Adds insight lines to a memory file through a deepagents backend.

    Args:
        backend: Where the file lives (`FilesystemBackend`, `StoreBackend`, `StateBackend`,
            `CompositeBackend`, ...).
        path: The memory file's backend path, e.g. `"/MEMORY.md"`.
        max_insights: Entries kept in the file's `## Recent Insights` section.
        archive_path: Where rotated-out entries go (default: `MEMORY.archive.md` beside it).
        clock: Returns today's date (default: the local date); inject one in tests.
        max_insight_chars: Longer insight texts are cut (an ellipsis marks the cut).

    Raises:
        ValueError: `path` is empty, equals `archive_path`, or `max_insights` < 1.

    Example:
        writer = MemoryWriter(FilesystemBackend(root_dir=".", virtual_mode=True), "/MEMORY.md")
        writer.add_insight("Acme wants weekly summaries", entity="acme")
    """

    def __init__(
        self,
        backend: BackendProtocol,
        path: str,
        *,
        max_insights: int = 50,
        archive_path: str | None = None,
        clock: Clock | None = None,
        max_insight_chars: int = DEFAULT_MAX_INSIGHT_CHARS,
    ) -> None:
        if not isinstance(path, str) or not path.strip():
            msg = "MemoryWriter needs a non-empty path"
            raise ValueError(msg)
        if isinstance(max_insights, bool) or not isinstance(max_insights, int) or max_insights < 1:
            msg = f"max_insights must be an int >= 1, got {max_insights!r}"
            raise ValueError(msg)
        if max_insight_chars < 20:
            msg = f"max_insight_chars must be >= 20, got {max_insight_chars!r}"
            raise ValueError(msg)
        archive = archive_path if archive_path is not None else archive_path_for(path)
        if archive == path:
            msg = f"archive_path must differ from path ({path!r})"
            raise ValueError(msg)
        self.backend = backend
        self.path = path
        self.archive_path = archive
        self.max_insights = max_insights
        self.max_insight_chars = max_insight_chars
        self._clock: Clock = clock or dt.date.today
        self._strategy = strategy_for(backend, [path, archive])

    def add_insight(
        self, text: str, *, entity: str | None = None, cites: Sequence[str] = ()
    ) -> bool:
        """Write one insight line at the top of the Recent Insights section.

        Args:
            text: What was learned; secrets are redacted and whitespace collapsed to one line.
            entity: Who or what it is about; one entry per entity per day.
            cites: Files the lesson is about (`/src/app.py`, `/src/app.py#L10-24`): the digest
                of each cited span is stored with the entry (in a comment the prompt never
                shows), and a later load marks the entry stale when a span changed, moved or
                vanished (`layered_memory.core.staleness`).

        Returns:
            True when written; False when the entity already has an entry today (for an insight
            without entity: the same text today), and nothing was written.

        Raises:
            ValueError: `text` is empty once cleaned, or a cite cannot be kept: not a path
                with an optional `#L<first>-<last>`, outside the backend's root, a credential
                file, a missing file or lines past its end, or cited lines holding a secret
                (`writeback.cites`; the message names the cite and why).
            MemoryWriteError: The backend could not read or write the files; the memory file
                is left as it was.
        """
        return self._write(text, entity, cites) is not None

    async def aadd_insight(
        self, text: str, *, entity: str | None = None, cites: Sequence[str] = ()
    ) -> bool:
        """The async form of `add_insight` (same arguments, result and errors)."""
        return await self._awrite(text, entity, cites) is not None

    # The `_write` pair also returns what the MEMORY_WRITTEN event needs.

    def _write(
        self, text: str, entity: str | None, cites: Any = (), *, hostile: bool = False
    ) -> MemoryWrittenData | None:
        insight, kinds = self._prepare(text, entity)
        if cites:
            insight = _cited(insight, self._digested(cites, hostile))
        plan = self._strategy.transact(self._transform(insight))
        return self._outcome(insight, kinds, plan)

    async def _awrite(
        self, text: str, entity: str | None, cites: Any = (), *, hostile: bool = False
    ) -> MemoryWrittenData | None:
        insight, kinds = self._prepare(text, entity)
        if cites:  # the paths are checked and the files read in a worker thread
            insight = _cited(insight, await asyncio.to_thread(self._digested, cites, hostile))
        plan = await self._strategy.atransact(self._transform(insight))
        return self._outcome(insight, kinds, plan)

    def _digested(self, cites: Any, hostile: bool) -> list[Cite]:
        """The cites checked and digested (`writeback.cites`). A bad one raises `ValueError`
        for a caller's own cites, and is a logged skip for a model's (`hostile`)."""
        if not hostile and (isinstance(cites, str) or not isinstance(cites, Sequence)):
            msg = f"cites must be a list of paths, got {type(cites).__name__}"
            raise TypeError(msg)
        checked, skipped = checked_cites(cites, self.backend)
        done, more = digested(self.backend, checked)
        skipped += more
        if skipped and not hostile:
            raise ValueError("; ".join(skipped))
        for reason in skipped:
            logger.warning("a cite of a lesson for %s skipped: %s", self.path, reason)
        return done

    def _prepare(self, text: str, entity: str | None) -> tuple[Insight, list[str]]:
        if not isinstance(text, str):
            msg = f"insight text must be a str, got {type(text).__name__}"
            raise TypeError(msg)
        clean_text, kinds = redacted_line(
            text, one_line, keep=self.max_insight_chars + RESCAN_MARGIN
        )
        clean_entity, entity_kinds = (
            redacted_line(entity, normalize_entity) if entity is not None else (None, [])
        )
        kinds = sorted({*kinds, *entity_kinds})
        if kinds:
            logger.warning(
                "redacted %s from an insight for %s before writing it", ", ".join(kinds), self.path
            )
        # Cut last: a cut must never leave a secret's unrecognizable tail behind.
        line = cut_text(clean_text, max_chars=self.max_insight_chars) if clean_text else ""
        if not line:
            msg = "insight text is empty"
            raise ValueError(msg)
        today = self._clock()
        if isinstance(today, dt.datetime):
            today = today.date()
        return Insight(date=today, entity=clean_entity, text=line), kinds

    def _transform(
        self, insight: Insight
    ) -> Callable[[Texts], tuple[dict[str, str], InsightPlan | None]]:
        source_name = posixpath.basename(self.path) or self.path

        def transform(texts: Texts) -> tuple[dict[str, str], InsightPlan | None]:
            plan = plan_insight(
                texts[self.path],
                texts[self.archive_path],
                insight,
                max_insights=self.max_insights,
                source_name=source_name,
            )
            if plan is None:
                return {}, None
            # Archive first: a crash between the two writes duplicates entries, never loses one.
            changes = {} if plan.archive is None else {self.archive_path: plan.archive}
            changes[self.path] = plan.memory
            return changes, plan

        return transform

    def _outcome(
        self, insight: Insight, kinds: list[str], plan: InsightPlan | None
    ) -> MemoryWrittenData | None:
        if plan is None:
            logger.debug("insight skipped: its entity already has one today in %s", self.path)
            return None
        if plan.archived:
            logger.info(
                "moved %d insight(s) from %s to %s", plan.archived, self.path, self.archive_path
            )
        return MemoryWrittenData(
            path=self.path,
            archive_path=self.archive_path,
            entity=insight.entity,
            text=insight.text,
            date=insight.date.isoformat(),
            archived=plan.archived,
            redacted=kinds,
            thread_id=None,
        )


def _cited(insight: Insight, cites: Sequence[Cite]) -> Insight:
    """The insight with the comment keeping its cites and their digests at its end."""
    if not cites:
        return insight
    comment = f"<!-- {cites_field(cites)} date={insight.date.isoformat()} -->"
    return dataclasses.replace(insight, text=f"{insight.text} {comment}")


# --- PIPELINE_END data helpers ----------------------------------------------------------


def _entity_of(data: Mapping[str, Any]) -> str | None:
    value = run_value(data, "entity_name")
    return normalize_entity(value) if isinstance(value, str) else None


def _final_message_insight(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if getattr(message, "type", None) != "ai":
            continue
        text = getattr(message, "text", None)
        if not isinstance(text, str):
            return None
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.upper().startswith(INSIGHT_MARKER):
                return stripped[len(INSIGHT_MARKER) :].strip() or None
        return None
    return None


def default_formatter(final_state: Mapping[str, Any]) -> str | None:
    """The insight of a finished run, or None when the run did not state one.

    Looks, in order, at the state's `insight` string, its `summary` string, and the last AI
    message's line starting with `INSIGHT:` (so an agent can be told "end with a line
    `INSIGHT: <what you learned>`"). The agent's plain final answer is never written as-is:
    memory is re-read by every later run and must hold deliberate lessons only.

    Returns None, so nothing is written, when no insight text is found: never an `unknown` or
    `?` placeholder. The entity does not matter here: without one (no `entity_name` in the
    state, `runtime_context` or `config["configurable"]`) the insight is written untagged, as
    the notes of `record_insight` are, and deduplicated by its text that day.
    """
    for key in ("insight", "summary"):
        value = final_state.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return _final_message_insight(final_state.get("messages"))


# --- record_insight: notes taken during the run, written at PIPELINE_END ---------------


class InsightNotebook:
    """Notes the agent recorded during a run, kept per thread until PIPELINE_END writes them.

    Runs without a `thread_id` share one page (key None); give concurrent runs thread ids.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pages: dict[str | None, list[str]] = {}
        self._cites: dict[str | None, list[str]] = {}

    def add(self, thread_id: str | None, note: str, cites: Sequence[str] = ()) -> None:
        """Keep `note` for `thread_id`.

        Args:
            thread_id: The run's thread (None: runs without one share a page).
            note: The lesson.
            cites: Files the lesson is about, as the model gave them (checked when written).
        """
        with self._lock:
            self._pages.setdefault(thread_id, []).append(note)
            if cites:
                self._cites.setdefault(thread_id, []).extend(cites)

    def peek(self, thread_id: str | None) -> list[str]:
        """The notes kept for `thread_id`, oldest first.

        Args:
            thread_id: The run's thread.

        Returns:
            A copy of the notes; they stay kept.
        """
        with self._lock:
            return list(self._pages.get(thread_id, []))

    def pop(self, thread_id: str | None) -> list[str]:
        """Remove and return the notes kept for `thread_id` (their cites are dropped).

        Args:
            thread_id: The run's thread.

        Returns:
            The notes, oldest first; none are kept afterwards.
        """
        return self.take(thread_id)[0]

    def take(self, thread_id: str | None) -> tuple[list[str], list[str]]:
        """Remove and return the notes kept for `thread_id` and what they cite.

        Args:
            thread_id: The run's thread.

        Returns:
            The notes, oldest first, and their cites, in order; none are kept afterwards.
        """
        with self._lock:
            return self._pages.pop(thread_id, []), self._cites.pop(thread_id, [])


def record_insight_tool(notebook: InsightNotebook) -> BaseTool:
    """A `record_insight(note, cites)` tool: the note is written to memory when the run ends.

    The tool takes `note` (a string: the lesson, one short sentence) and, optionally, `cites`
    (the files, or `#L10-24` line ranges, the lesson is about); the tool description and the
    arguments' schema name them, so a model calls `record_insight` with `{"note": "...",
    "cites": ["/src/app.py#L10-24"]}`. The cited spans' digests are stored with the entry, which
    a later load marks stale when they change (`layered_memory.core.staleness`). Cites are
    model output: each is checked when written (`writeback.cites`) and a bad one is a logged
    skip naming it; the lesson is written all the same. Pass the same notebook to
    `register_write_back(..., notebook=notebook)`.
    Several notes of one run become one line, joined with `; `; without an entity the line is
    untagged.

    Args:
        notebook: Where the notes wait, per `thread_id`, until `PIPELINE_END`.

    Returns:
        The tool, to add to the agent's `tools=[...]`.
    """

    def record_insight(note: str, runtime: ToolRuntime, cites: list[str] | None = None) -> str:
        """Record one durable lesson learned in this run.

        Args:
            note: The lesson, one short sentence.
            cites: Files the lesson is about, optionally with lines (`/src/app.py#L10-24`):
                the lesson is marked stale when they change.
        """
        cleaned = note.strip()
        if not cleaned:
            return "Nothing recorded: the note is empty."
        given = cites if isinstance(cites, list) else [] if cites is None else [cites]
        kept, refused = _cite_forms(given)
        configurable = (runtime.config or {}).get("configurable") or {}
        thread_id = configurable.get("thread_id")
        notebook.add(None if thread_id is None else str(thread_id), cleaned, kept)
        answer = "Recorded; it will be saved to long-term memory when this run ends."
        return f"{answer} Cites left out: {'; '.join(refused)}" if refused else answer

    return StructuredTool.from_function(
        record_insight,
        name="record_insight",
        description=(
            "Record one durable lesson learned in this run (a preference, a fact about the "
            "entity, a pitfall to avoid) so future runs start with it. Arguments: `note`, the "
            "lesson as one short sentence; optionally `cites`, the files (or `#L10-24` line "
            "ranges) it is about, so it is marked stale when they change. Never include "
            "credentials or personal data."
        ),
        parse_docstring=True,  # the schema of `note` carries its description from the docstring
    )


def _cite_forms(given: Sequence[Any]) -> tuple[list[str], list[str]]:
    """The cites of a tool call in a well-formed shape, and why the others are left out (the
    paths are checked when the note is written, through the writer's backend)."""
    kept: list[str] = []
    refused: list[str] = []
    for spec in given[: MAX_CITES_PER_ENTRY * 2]:
        try:
            parse_cite(spec)
        except ValueError as exc:
            refused.append(str(exc))
            continue
        if len(spec) > MAX_CITE_CHARS:
            refused.append(f"cite longer than {MAX_CITE_CHARS} characters")
            continue
        kept.append(spec.strip())
    if len(given) > MAX_CITES_PER_ENTRY * 2:
        refused.append(f"{len(given) - MAX_CITES_PER_ENTRY * 2} more cites than a note keeps")
    return kept, refused


# --- The PIPELINE_END handler -------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _WriteBack:
    registry: HookRegistry
    writer: MemoryWriter
    formatter: Formatter
    notebook: InsightNotebook | None

    def text_and_entity(self, data: Mapping[str, Any]) -> tuple[str | None, str | None, list[str]]:
        thread_id = thread_id_of(data)
        notes, cites = self.notebook.take(thread_id) if self.notebook is not None else ([], [])
        if is_dry_run(data):
            logger.info("dry run: memory write-back skipped for %s", self.writer.path)
            return None, None, []
        entity = _entity_of(data)
        text = self.formatter(data)
        parts = [part for part in (text, *notes) if isinstance(part, str) and part.strip()]
        if not parts:
            logger.debug("no insight in the final state; nothing written to %s", self.writer.path)
            return None, None, []
        return "; ".join(part.strip() for part in parts), entity, cites

    def __call__(self, _event: HookEvent, data: Mapping[str, Any]) -> None:
        text, entity, cites = self.text_and_entity(_as_mapping(data))
        if text is None:
            return
        written = self.writer._write(text, entity, cites, hostile=True)
        if written is not None:
            written["thread_id"] = thread_id_of(_as_mapping(data))
            self.registry.trigger(HookEvent.MEMORY_WRITTEN, written)

    async def acall(self, _event: HookEvent, data: Mapping[str, Any]) -> None:
        text, entity, cites = self.text_and_entity(_as_mapping(data))
        if text is None:
            return
        written = await self.writer._awrite(text, entity, cites, hostile=True)
        if written is not None:
            written["thread_id"] = thread_id_of(_as_mapping(data))
            await self.registry.atrigger(HookEvent.MEMORY_WRITTEN, written)


def _as_mapping(data: Any) -> Mapping[str, Any]:
    return data if isinstance(data, Mapping) else {}


def register_write_back(
    registry: HookRegistry,
    writer: MemoryWriter,
    *,
    formatter: Formatter | None = None,
    priority: int = 85,
    notebook: InsightNotebook | None = None,
) -> None:
    """Register the `PIPELINE_END` handler `memory_write_back`.

    On `PIPELINE_END` the handler:

    1. writes nothing when `dry_run` is true in the state, `runtime_context` or
       `config["configurable"]` (notes of that thread are discarded too);
    2. builds the text with `formatter(data)` (default: `default_formatter`), plus the notes the
       agent recorded with `record_insight_tool` for this `thread_id`, joined with `; `;
       no text: nothing written;
    3. takes the entity from `entity_name` in `runtime_context`, the state, then
       `config["configurable"]`;
    4. adds the insight with `writer` (redacted, deduplicated, rotated) and, when a line was
       written, fires `HookEvent.MEMORY_WRITTEN` with a `MemoryWrittenData` dict.

    `trigger` runs it synchronously; `atrigger` runs its native async form.

    Args:
        registry: The registry to add the handler to.
        writer: Writes into the memory file.
        formatter: `formatter(final_state) -> str | None`; `final_state` is the event data
            (the final state, plus `config`, `runtime_context` and `thread_id` when fired by
            `MemoryMiddleware`).
        priority: Handler priority (higher runs first).
        notebook: Where `record_insight_tool` keeps the run's notes.

    Raises:
        ValueError: A handler named `memory_write_back` is already registered.
    """
    handler = _WriteBack(
        registry=registry,
        writer=writer,
        formatter=formatter or default_formatter,
        notebook=notebook,
    )
    registry.register(
        HookEvent.PIPELINE_END,
        handler,
        name=WRITE_BACK_HANDLER_NAME,
        priority=priority,
        async_handler=handler.acall,
    )
    note_write_back(registry, writer.path)
