"""`MemoryConsolidator`: what a run taught, merged into memory by a model, reviewed, never
poisoned.

After a run, a chat model reads the entries of the memory file's `## Learned` section (each as
`[ID] text`) and the run's conversation, and answers with calls of one tool, `update_memory`:
`{"operations": [{"op": "add", "text": ...}, {"op": "update", "id": ID, "text": ...},
{"op": "delete", "id": ID}]}`. No call: nothing to learn, nothing written.

Every operation then goes through the same rules (`sections.carry_out`):

- an unknown id, a malformed operation or an empty text is rejected with a reason; the other
  operations of the answer are still carried out;
- the same lesson twice (case, spacing and filler words aside, or with a word more) is one
  entry: an add of a known lesson is rejected, an update that makes two entries alike merges
  them;
- every text is redacted (`safety.redaction`) and made one line before it is stored;
- a lesson that would steer the agent (`writeback.lesson_hold`: what it would make the agent
  do, judged on a normalised reading, and which messages of the run its text came from) is
  never applied by itself: it waits in the review queue with its reason, even with
  `review=False`;
- `review=True` holds every change until `approve`;
- an entry another writer changed after the model read it is not overwritten blindly: the
  change waits for review;
- past `max_entries`, the oldest entries move to the archive file, as write-back rotation does.

The review queue is a JSON file beside the memory file, in the same backend, so another
process, or a person with `layered-memory review`, lists and decides it. Every write (memory
file, archive, queue) is one locked transaction of `core.files`, the route of every memory
writer: two consolidations, write-back and the agent's own edits of one file lose nothing.

With `MemoryMiddleware(..., consolidator=...)` it runs after each run (`after_agent`, never on
the model-call path); `consolidate_in_background=True` runs it on a worker thread, so `invoke()`
returns first (`flush()` waits; a process that exits waits for the queued work).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    convert_to_messages,
)

from layered_memory._logs import get_logger
from layered_memory.core.files import Texts, Transform, learned_entry, strategy_for
from layered_memory.core.loading import adownload_files_safely, download_files_safely
from layered_memory.core.run_data import is_dry_run, thread_id_of
from layered_memory.core.staleness import CITES_FIELD, cited_paths, find_stale
from layered_memory.core.validation import check_backend, check_bool, check_int
from layered_memory.errors import MemoryWriteError, ReviewError
from layered_memory.writeback._background import BackgroundQueue
from layered_memory.writeback._project_facts import ProjectFacts
from layered_memory.writeback.cites import (
    checked_cites,
    cites_field,
    current_texts,
    digested,
    is_fresh,
)
from layered_memory.writeback.consolidation_prompt import (
    TOOL_NAME,
    UPDATE_MEMORY_TOOL,
    prompt_messages,
)
from layered_memory.writeback.learned import (
    ConsolidationResult,
    Entry,
    Files,
    Plan,
    Proposal,
    carry_out,
    clean_text,
    section_entries,
)
from layered_memory.writeback.lesson_hold import MAX_CONTEXT, hold_reason, sources_of
from layered_memory.writeback.review_queue import (
    OPS,
    SHOWN_ID_CHARS,
    Change,
    Provenance,
    Queue,
    commit_generation,
    new_change,
    provenance_of,
    queue_binding,
    read_queue,
    resolve,
    review_key,
)
from layered_memory.writeback.sections import archive_path_for

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "Change",
    "ConsolidationResult",
    "MemoryConsolidator",
    "learned_entries",
    "pending_path_for",
]

logger = get_logger(__name__)
_T = TypeVar("_T")

MAX_OPERATIONS: Final = 50
"""Operations carried out per consolidation; more are rejected (a runaway answer)."""

Clock = Callable[[], dt.date]


class MemoryConsolidator:
    """Merges what each run taught into the `## Learned` section of a memory file.

    Args:
        model: A LangChain chat model that can call tools (`bind_tools`); `None` makes a
            consolidator that only reviews (`pending`, `approve`, `reject`), as the CLI does.
        backend: Where the memory file lives (any deepagents backend).
        path: The memory file's backend path (a writable layer of your middleware).
        section: The managed section's heading, without `## `.
        review: Hold every change for `approve` / `reject` instead of applying it.
        max_entries: Entries the section keeps; older ones move to the archive file. The model
            is told the budget.
        max_entry_chars: Longer lesson texts are cut (an ellipsis marks the cut).
        max_conversation_chars: Budget of the conversation shown to the model (the newest
            messages are kept; tool results are cut to their head).
        archive_path: Where rotated entries go (default: `MEMORY.archive.md` beside `path`).
        pending_path: The review queue (default: `MEMORY.pending.json` beside `path`).
        max_pending: Changes the queue holds; more are rejected until a person decides.
        consolidate_in_background: In a middleware, consolidate on a worker thread so the run
            returns without waiting (see `flush`).
        clock: Returns today's date (default: the local date); inject one in tests.
        expire_after_days: Off by default (None). A number of days: at each consolidation,
            the learned entries nobody confirmed for that long move to the archive file
            (never deleted). An entry is confirmed on the day its comment says: `date=` (added,
            updated, or refreshed with `layered-memory review refresh`) or `reviewed=`
            (approved); an entry that cites files whose spans are all unchanged counts as
            confirmed today. An entry without a date (written by hand) never expires.

    Raises:
        TypeError: `model` cannot call tools, or `backend` is not a backend.
        ValueError: A path is empty or two paths are the same; a bad section name or budget.

    Example:
        consolidator = MemoryConsolidator(model, backend=backend, path="/MEMORY.md")
        result = consolidator.consolidate(messages, thread_id="t1")
        for change in consolidator.pending():
            consolidator.reject(change)
    """

    def __init__(
        self,
        model: BaseChatModel | None,
        *,
        backend: BackendProtocol,
        path: str = "/MEMORY.md",
        section: str = "Learned",
        review: bool = False,
        max_entries: int = 50,
        max_entry_chars: int = 300,
        max_conversation_chars: int = 24_000,
        archive_path: str | None = None,
        pending_path: str | None = None,
        max_pending: int = 200,
        consolidate_in_background: bool = False,
        clock: Clock | None = None,
        expire_after_days: int | None = None,
    ) -> None:
        check_backend(backend)
        if expire_after_days is not None:
            check_int(
                expire_after_days, parameter="expire_after_days", minimum=1, unit="a number of days"
            )
        check_bool(review, parameter="review")
        check_bool(consolidate_in_background, parameter="consolidate_in_background")
        if callable(backend) and not hasattr(backend, "download_files"):
            msg = "MemoryConsolidator needs a backend instance, not a factory"
            raise TypeError(msg)
        for name, value, minimum in (
            ("max_entries", max_entries, 1),
            ("max_entry_chars", max_entry_chars, 20),
            ("max_conversation_chars", max_conversation_chars, 500),
            ("max_pending", max_pending, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                msg = f"{name} must be an int >= {minimum}, got {value!r}"
                raise ValueError(msg)
        if not isinstance(section, str) or not section.strip() or "\n" in section:
            msg = f"section must be a heading text on one line, e.g. 'Learned'; got {section!r}"
            raise ValueError(msg)
        if not isinstance(path, str) or not path.strip():
            msg = "MemoryConsolidator needs a non-empty path"
            raise ValueError(msg)
        archive = archive_path if archive_path is not None else archive_path_for(path)
        queue = pending_path if pending_path is not None else pending_path_for(path)
        if len({path, archive, queue}) != 3:
            msg = (
                f"path, archive_path and pending_path must be three different files; got "
                f"{path!r}, {archive!r}, {queue!r}"
            )
            raise ValueError(msg)
        self.model = model
        self._bound: Any = _bind(model) if model is not None else None
        self.backend = backend
        self.path = path
        self.archive_path = archive
        self.pending_path = queue
        self.section = section.strip().lstrip("#").strip()
        self.review = review
        self.max_entries = max_entries
        self.max_entry_chars = max_entry_chars
        self.max_conversation_chars = max_conversation_chars
        self.consolidate_in_background = consolidate_in_background
        self._clock: Clock = clock or dt.date.today
        self.expire_after_days = expire_after_days
        source = posixpath.basename(path) or path
        self._files = Files(
            memory=path,
            archive=archive,
            queue=queue,
            heading=f"## {self.section}",
            archive_heading=f"## {self.section} (archived)",
            archive_preamble=(
                "# Archived memory\n\nEntries rotated out of "
                f"{source}'s {self.section} section, newest first.\n"
            ),
            max_entries=max_entries,
            max_pending=max_pending,
            binding=queue_binding(backend, queue),
        )
        self._strategy = strategy_for(backend, [path, archive, queue])
        self._worker = BackgroundQueue()

    # -- consolidation ----------------------------------------------------------------------

    def consolidate(
        self, messages: Sequence[Any], *, thread_id: str | None = None
    ) -> ConsolidationResult:
        """Ask the model what `messages` taught and carry out its answer.

        Args:
            messages: The run's conversation (LangChain messages, or dicts with `role` and
                `content`).
            thread_id: The run's thread, kept in each entry's provenance.

        Returns:
            The changes applied, pending review and rejected.

        Raises:
            MemoryWriteError: The memory file or the queue could not be read or written;
                nothing was written.
            Exception: Whatever the model raised (the middleware logs it and goes on).
        """
        read = self._section(download_files_safely(self.backend, [self.path]))
        model = self._require_model()
        reply = model.invoke(self._prompt(read.entries, messages, read.stale), _OWN_RUN)
        proposals, rejected, provenance = self._read_reply(reply, thread_id, messages, read.entries)
        if not proposals and not read.expiring:
            return self._report(ConsolidationResult(rejected=rejected))
        result = self._transact(self._consolidation(proposals, read, provenance))
        return self._report(replace(result, rejected=[*rejected, *result.rejected]))

    async def aconsolidate(
        self, messages: Sequence[Any], *, thread_id: str | None = None
    ) -> ConsolidationResult:
        """The async form of `consolidate` (same arguments, result and errors)."""
        responses = await adownload_files_safely(self.backend, [self.path])
        # The cited files are read (and their paths checked) off the event loop.
        read = await asyncio.to_thread(self._section, responses)
        model = self._require_model()
        reply = await model.ainvoke(self._prompt(read.entries, messages, read.stale), _OWN_RUN)
        # The hold may look the project up through the backend: off the event loop.
        proposals, rejected, provenance = await asyncio.to_thread(
            self._read_reply, reply, thread_id, messages, read.entries
        )
        if not proposals and not read.expiring:
            return self._report(ConsolidationResult(rejected=rejected))
        await asyncio.to_thread(self._key)  # read once, off the event loop
        result = await self._atransact(self._consolidation(proposals, read, provenance))
        return self._report(replace(result, rejected=[*rejected, *result.rejected]))

    def _transact(self, transform: Transform[_T]) -> _T:
        """One locked transaction of the memory file, archive and queue; then the queue's new
        generation is confirmed (`review_queue.commit_generation`): only after the file holds
        it, so a crash in between never makes the queue look like an older copy."""
        result = self._strategy.transact(transform)
        commit_generation(self._files.binding)
        return result

    async def _atransact(self, transform: Transform[_T]) -> _T:
        result = await self._strategy.atransact(transform)
        await asyncio.to_thread(commit_generation, self._files.binding)
        return result

    # -- review -----------------------------------------------------------------------------

    def pending(self) -> list[Change]:
        """The changes waiting for review, oldest first (read from the backend: what any
        process queued).

        Returns:
            The pending changes.

        Raises:
            ReviewError: The queue file is unreadable (not JSON, not a queue).
        """
        return self._queued(download_files_safely(self.backend, [self.pending_path]))

    async def apending(self) -> list[Change]:
        """The async form of `pending`."""
        responses = await adownload_files_safely(self.backend, [self.pending_path])
        # The key and the queue's generation record are files of the state folder: read off
        # the event loop.
        return await asyncio.to_thread(self._queued, responses)

    def queue_problems(self) -> list[str]:
        """Why the review queue cannot be trusted, in a reviewer's words; empty when it can.

        Reports an unreadable queue, a list of changes not as this package last wrote it (a
        change removed, added or reordered by something else), and each change written or
        edited outside the package (never approved; a person rejects it). What
        `layered-memory review` and `layered-memory doctor` print.

        Raises:
            ReviewError: The queue's key (in the user's state folder) cannot be read or made.
        """
        queue = self._queue(download_files_safely(self.backend, [self.pending_path]))
        if queue.problem is not None:
            return [f"{self.pending_path} is {_unreadable(queue.problem)}"]
        problems = [f"{self.pending_path}: {queue.tampered}"] if queue.tampered else []
        problems += [
            f"change {change.id[:SHOWN_ID_CHARS]} in {self.pending_path} is not trusted: "
            f"{change.untrusted}; it is never approved (reject it)"
            for change in queue.changes
            if change.untrusted is not None
        ]
        return problems

    def approve(self, change: Change | str) -> ConsolidationResult:
        """Apply a pending change (by the `Change`, its full id or a unique prefix of at
        least 8 digits) and take it off the queue.

        The id is the digest of the exact text, checked again here under the queue's lock: a
        text changed since it was listed has another id and is refused, and so is a change
        without the package's seal (written or edited outside it). The rules still apply, to
        the section as it is now: a change whose entry was deleted since, or a lesson the
        section learned meanwhile, is rejected (and dequeued).

        Args:
            change: The change, its full id or a unique prefix of at least 8 digits.

        Returns:
            The change in `applied` or, with the reason, in `rejected`.

        Raises:
            ReviewError: No change with this id waits, the id is ambiguous, the change's
                text changed or it is not trusted, or the queue is unreadable; nothing was
                written.
        """
        return self._transact(self._decision(_id_of(change), approve=True))

    async def aapprove(self, change: Change | str) -> ConsolidationResult:
        """The async form of `approve`."""
        await asyncio.to_thread(self._key)  # read once, off the event loop
        return await self._atransact(self._decision(_id_of(change), approve=True))

    def reject(self, change: Change | str) -> Change:
        """Take a pending change off the queue without applying it.

        Args:
            change: The change, its full id or a unique prefix of at least 8 digits.

        Returns:
            The change taken off the queue.

        Raises:
            ReviewError: No change with this id waits, or the queue is unreadable.
        """
        result = self._transact(self._decision(_id_of(change), approve=False))
        return result.rejected[0]

    async def areject(self, change: Change | str) -> Change:
        """The async form of `reject`."""
        await asyncio.to_thread(self._key)  # read once, off the event loop
        result = await self._atransact(self._decision(_id_of(change), approve=False))
        return result.rejected[0]

    # -- in a middleware --------------------------------------------------------------------

    def after_run(self, data: Mapping[str, Any]) -> None:
        """Consolidate a finished run (the middleware's `after_agent` calls this).

        Nothing happens in a dry run (`dry_run` in the state, context or config). A failure
        is logged once, with its reason, and never raised: memory must not fail the run.

        Args:
            data: The final state, with `config`, `runtime_context` and `thread_id` beside it.
        """
        job = self._job(data)
        if job is None:
            return
        if self.consolidate_in_background and self._worker.submit(self._logged, *job):
            return
        self._logged(*job)

    async def aafter_run(self, data: Mapping[str, Any]) -> None:
        """The async form of `after_run`."""
        job = self._job(data)
        if job is None:
            return
        if self.consolidate_in_background and self._worker.submit(self._logged, *job):
            return
        messages, thread_id = job
        try:
            await self.aconsolidate(messages, thread_id=thread_id)
        except Exception as exc:  # memory never fails the run: logged once, with its reason
            self._log_failure(thread_id, exc)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the background consolidations queued so far.

        Args:
            timeout: Seconds to wait at most (None: as long as they take).

        Returns:
            True when all are done, False when `timeout` ran out first.
        """
        return self._worker.flush(timeout)

    def close(self) -> None:
        """Finish the queued background consolidations and stop the worker thread."""
        self._worker.close()

    # -- shared by the sync and async halves -------------------------------------------------

    def _require_model(self) -> Any:
        if self._bound is None:
            msg = "this MemoryConsolidator has no model (model=None): it only reviews"
            raise TypeError(msg)
        return self._bound

    def _section(self, responses: Sequence[Any]) -> _Read:
        """The section as the model is shown it: its entries, the stale markers of those whose
        cited spans changed (the markers a load shows the agent), and the entries due to
        expire. The cited files are read only when an entry cites one."""
        text = _text_of(self.path, responses[0])
        found = section_entries(text, self._files.heading)
        cited = cited_paths([text]) if text and found else []
        current = current_texts(self.backend, cited) if cited else {}
        stale: dict[str, str] = {}
        if current or cited:
            assert text is not None
            lines = text.split("\n")
            marks = {
                lines[item.line].rstrip("\r"): item.marker for item in find_stale(text, current)
            }
            stale = {
                entry.id: marks[entry.lines[0].rstrip("\r\n")]
                for entry in found
                if entry.lines[0].rstrip("\r\n") in marks
            }
        return _Read(
            [(entry.id, entry.text) for entry in found], stale, self._expiring(found, current)
        )

    def _expiring(self, found: Sequence[Entry], current: Mapping[str, str]) -> dict[str, str]:
        """Entry id -> its line, for the entries nobody confirmed for `expire_after_days`
        (see the class's docstring)."""
        if self.expire_after_days is None:
            return {}
        today = self._provenance(None).date
        cutoff = dt.date.fromisoformat(today) - dt.timedelta(days=self.expire_after_days)
        due: dict[str, str] = {}
        for entry in found:
            confirmed = _confirmed(entry.meta)
            if confirmed is None or confirmed > cutoff:
                continue
            if is_fresh(entry.lines[0], current):
                continue
            due[entry.id] = entry.lines[0]
        return due

    def _prompt(
        self,
        entries: Sequence[tuple[str, str]],
        messages: Sequence[Any],
        stale: Mapping[str, str] | None = None,
    ) -> list[BaseMessage]:
        return prompt_messages(
            entries,
            convert_to_messages(list(messages)),
            max_entries=self.max_entries,
            max_entry_chars=self.max_entry_chars,
            max_conversation_chars=self.max_conversation_chars,
            stale=stale,
        )

    def _provenance(self, thread_id: str | None, reply: Any = None) -> Provenance:
        today = self._clock()
        if isinstance(today, dt.datetime):
            today = today.date()
        return Provenance(
            thread_id=thread_id, date=today.isoformat(), model=_model_name(self.model, reply)
        )

    def _read_reply(
        self,
        reply: Any,
        thread_id: str | None,
        messages: Sequence[Any],
        entries: Sequence[tuple[str, str]],
    ) -> tuple[list[Proposal], list[Change], Provenance]:
        """The well-formed operations of the model's answer, each judged by the lesson hold,
        and the malformed ones rejected."""
        provenance = self._provenance(thread_id, reply)
        proposals: list[Proposal] = []
        rejected: list[Change] = []

        def refuse(op: Any, reason: str, entry_id: Any = None, text: Any = None) -> None:
            rejected.append(
                new_change(
                    _shown(op) or "?",
                    _shown(entry_id),
                    _shown(text),
                    reason=reason,
                    provenance=provenance,
                )
            )

        message = reply if isinstance(reply, AIMessage) else AIMessage(content="")
        for invalid in message.invalid_tool_calls or []:
            name = _shown(invalid.get("name"))
            refuse("?", f"malformed call of {name}: its arguments are not JSON")
        operations: list[Any] = []
        for call in message.tool_calls:
            found = call["args"].get("operations") if isinstance(call["args"], dict) else None
            if call["name"] != TOOL_NAME:
                refuse("?", f"unknown tool {_shown(call['name'])!r}: only {TOOL_NAME} is read")
            elif not isinstance(found, list):
                refuse("?", f"malformed call of {TOOL_NAME}: `operations` must be a list")
            else:
                operations.extend(found)
        for index, raw in enumerate(operations):
            if index >= MAX_OPERATIONS:
                refuse(raw.get("op") if isinstance(raw, dict) else "?", _TOO_MANY)
                continue
            proposal = self._proposal(raw, provenance, refuse)
            if proposal is not None:
                proposals.append(proposal)
        judged = self._judged(proposals, messages, entries)
        return self._digested(judged), rejected, provenance

    def _digested(self, proposals: Sequence[Proposal]) -> list[Proposal]:
        """Each proposal's cites with their spans' digests now (one batched download of the
        cited files for the whole answer); a cite that cannot be digested is a logged skip."""
        cited = [cite for proposal in proposals for cite in proposal.cites or ()]
        if not any(proposal.cites is not None for proposal in proposals):
            return list(proposals)
        texts = current_texts(self.backend, [cite.path for cite in cited])
        done: list[Proposal] = []
        for proposal in proposals:
            if proposal.cites is None:
                done.append(proposal)
                continue
            digests, skipped = digested(self.backend, proposal.cites, texts)
            self._skipped(skipped)
            # Named cites none of which holds: the entry keeps what it cited (None), while an
            # empty list drops its cites ("").
            spec = (
                cites_field(digests)[len(CITES_FIELD) :] if digests or not proposal.cites else None
            )
            done.append(replace(proposal, change=replace(proposal.change, cites=spec)))
        return done

    def _skipped(self, reasons: Sequence[str]) -> None:
        for reason in reasons:
            logger.warning("a cite of a lesson for %s skipped: %s", self.path, reason)

    def _judged(
        self,
        proposals: Sequence[Proposal],
        messages: Sequence[Any],
        entries: Sequence[tuple[str, str]],
    ) -> list[Proposal]:
        """Each proposal with the lesson hold's verdict (`writeback.lesson_hold`): its effects
        alone and beside every other text of the answer and of the section, and where its text
        came from in the run."""
        if not proposals:
            return []
        sources = sources_of(convert_to_messages(list(messages)))
        # Asked lazily, cached for this call, bounded (`writeback._project_facts`).
        project = ProjectFacts(self.backend, posixpath.dirname(self.path), exclude=(self.path,))
        texts = [p.change.text for p in proposals if p.change.text is not None]
        shown = [text for _entry_id, text in entries[:MAX_CONTEXT]]
        judged: list[Proposal] = []
        for proposal in proposals:
            text = proposal.change.text
            if text is None:
                judged.append(proposal)
                continue
            others = [other for other in texts if other is not text] + shown
            judged.append(
                replace(
                    proposal,
                    hold=hold_reason(
                        text,
                        sources=sources,
                        context=others,
                        project_fact=project.is_fact,
                        project_hosts=project.hosts,
                    ),
                )
            )
        return judged

    def _proposal(
        self, raw: Any, provenance: Provenance, refuse: Callable[..., None]
    ) -> Proposal | None:
        if not isinstance(raw, dict):
            refuse("?", "malformed operation: not an object")
            return None
        op, entry_id, text = raw.get("op"), _entry_id(raw.get("id")), raw.get("text")
        if op not in OPS:
            refuse(op, "malformed operation: `op` must be add, update or delete", entry_id, text)
            return None
        if op != "add" and entry_id is None:
            refuse(op, f"malformed operation: {op} needs the entry's `id`", raw.get("id"), text)
            return None
        if op == "delete":
            return Proposal(new_change(op, entry_id, None, provenance=provenance))
        if not isinstance(text, str):
            refuse(op, f"malformed operation: {op} needs a `text`", entry_id, text)
            return None
        cleaned, kinds = clean_text(text, max_chars=self.max_entry_chars)
        if kinds:
            logger.warning(
                "redacted %s from a lesson for %s before storing it", ", ".join(kinds), self.path
            )
        if not cleaned:
            refuse(op, "empty text", entry_id, "")
            return None
        change = new_change(
            op, entry_id if op == "update" else None, cleaned, provenance=provenance
        )
        cites = None
        if raw.get("cites") is not None:  # model output: every path checked (`writeback.cites`)
            checked, skipped = checked_cites(raw["cites"], self.backend)
            self._skipped(skipped)
            cites = tuple(checked) if checked or raw["cites"] in ([], "") else None
        return Proposal(change, cites=cites)

    def _consolidation(
        self,
        proposals: Sequence[Proposal],
        read: _Read,
        provenance: Provenance,
    ) -> Callable[[Texts], tuple[dict[str, str], ConsolidationResult]]:
        seen = dict(read.entries)

        key = self._key()

        def transform(texts: Texts) -> tuple[dict[str, str], ConsolidationResult]:
            plan = Plan(self._files, texts, key=key)
            for proposal in proposals:
                carry_out(plan, proposal, provenance=provenance, review=self.review, seen=seen)
            if read.expiring:
                plan.expire(read.expiring)
            return self._finished(plan)

        return transform

    def _decision(
        self, change_id: str, *, approve: bool
    ) -> Callable[[Texts], tuple[dict[str, str], ConsolidationResult]]:
        today = self._provenance(None).date
        key = self._key()

        def transform(texts: Texts) -> tuple[dict[str, str], ConsolidationResult]:
            plan = Plan(self._files, texts, key=key)
            if plan.queue.problem is not None:
                raise ReviewError(self.pending_path, _unreadable(plan.queue.problem))
            found = resolve(plan.queue, change_id)
            if isinstance(found, str):
                raise ReviewError(self.pending_path, found, change_id=change_id)
            change = found
            if approve and change.untrusted is not None:
                raise ReviewError(
                    self.pending_path,
                    f"change {change.id[:SHOWN_ID_CHARS]} is never approved: {change.untrusted}"
                    "; reject it (`layered-memory review reject ID`)",
                    change_id=change_id,
                )
            plan.unqueue(change)
            if not approve:
                plan.reject(change, "rejected by review")
                return self._finished(plan)
            provenance = provenance_of(change, reviewed=today)
            text = change.text
            if text is not None:  # cleaned again, as every text the section takes
                text, _kinds = clean_text(text, max_chars=self.max_entry_chars)
                if not text:
                    plan.reject(change, "empty text")
                    return plan.finish()
            approved = Proposal(replace(change, text=text, reason=None))
            carry_out(plan, approved, provenance=provenance, review=False, seen=None)
            return self._finished(plan)

        return transform

    def _finished(self, plan: Plan) -> tuple[dict[str, str], ConsolidationResult]:
        changes, result = plan.finish()
        if plan.queue.tampered is not None and self.pending_path in changes:
            # Sealing the list again ends the report of `review` and `doctor`: say it once here.
            logger.warning(
                "the review queue %s was changed outside layered-memory (%s); its list is sealed "
                "again with this write: check `layered-memory review`",
                self.pending_path,
                plan.queue.tampered,
            )
        return changes, result

    def _queued(self, responses: Sequence[Any]) -> list[Change]:
        queue = self._queue(responses)
        if queue.problem is not None:
            raise ReviewError(self.pending_path, _unreadable(queue.problem))
        return queue.changes

    def _queue(self, responses: Sequence[Any]) -> Queue:
        key = self._key()
        try:
            return read_queue(
                _text_of(self.pending_path, responses[0]), key, binding=self._files.binding
            )
        except OSError as exc:
            raise ReviewError(self.pending_path, f"the review queue's record: {exc}") from exc

    def _key(self) -> bytes:
        try:
            return review_key()
        except OSError as exc:
            raise ReviewError(
                self.pending_path,
                f"the review queue's key cannot be read or made ({exc}); fix the state folder "
                "(LAYERED_MEMORY_STATE_DIR) or delete a broken review.key",
            ) from exc

    def _report(self, result: ConsolidationResult) -> ConsolidationResult:
        if result.applied or result.pending or result.rejected:
            logger.info(
                "consolidated into %s: %d applied, %d waiting for review, %d rejected",
                self.path,
                len(result.applied),
                len(result.pending),
                len(result.rejected),
            )
        held = [
            change
            for change in result.pending
            if change.reason and change.reason.startswith("held for review")
        ]
        if held:
            logger.warning(
                "%d change(s) to %s would steer the agent and wait for review in %s: "
                "`layered-memory review` shows why",
                len(held),
                self.path,
                self.pending_path,
            )
        if result.expired:
            logger.info(
                "moved %d learned entries nobody confirmed for %s days from %s to %s",
                len(result.expired),
                self.expire_after_days,
                self.path,
                self.archive_path,
            )
        if result.archived:
            logger.info(
                "moved %d learned entries from %s to %s",
                result.archived,
                self.path,
                self.archive_path,
            )
        return result

    def _job(self, data: Mapping[str, Any]) -> tuple[list[Any], str | None] | None:
        if is_dry_run(data):
            logger.info("dry run: nothing consolidated into %s", self.path)
            return None
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        return list(messages), thread_id_of(data)

    def _logged(self, messages: list[Any], thread_id: str | None) -> None:
        try:
            self.consolidate(messages, thread_id=thread_id)
        except Exception as exc:  # memory never fails the run: logged once, with its reason
            self._log_failure(thread_id, exc)

    def _log_failure(self, thread_id: str | None, exc: Exception) -> None:
        logger.warning(
            "consolidation into %s after thread %s failed; nothing learned from that run: %s",
            self.path,
            thread_id,
            _failure(exc),
        )


class _Read(NamedTuple):
    """The section as one consolidation read it."""

    entries: list[tuple[str, str]]
    """`(id, text)` of each entry, top first."""
    stale: dict[str, str]
    """Entry id -> its stale marker."""
    expiring: dict[str, str]
    """Entry id -> its line, for the entries due to expire."""


def _confirmed(meta: Mapping[str, str]) -> dt.date | None:
    """The last day an entry was confirmed: its `date=` or `reviewed=`, the later (None when
    neither is a date)."""
    days = []
    for name in ("date", "reviewed"):
        try:
            days.append(dt.date.fromisoformat(meta.get(name, "")[:10]))
        except ValueError:
            continue
    return max(days) if days else None


_OWN_RUN: Final[Any] = {
    "callbacks": [],
    "run_name": "layered-memory consolidation",
    "tags": ["layered-memory:consolidation"],
}
"""The consolidating model's call is a run of its own, not a child of the agent's: inherited,
the agent's callbacks would stream its tool call to the user (`stream_mode="messages"`) as if
the agent had said it. Tracing (LangSmith) still records it, under this name."""

_TOO_MANY: Final = f"more than {MAX_OPERATIONS} operations in one answer: the rest is ignored"


def pending_path_for(path: str) -> str:
    """`/MEMORY.md` -> `/MEMORY.pending.json` (the review queue, beside the memory file)."""
    pure = PurePosixPath(path)
    return str(pure.with_name(f"{pure.stem if pure.suffix else pure.name}.pending.json"))


def learned_entries(text: str) -> list[dict[str, str]]:
    """The learned entries of a memory file's text, wherever they are, with their provenance:
    `{"id", "text", "thread", "date", "model", "reviewed"}` (fields the comment has).

    What `layered-memory inspect` shows beside the block, where the comments are stripped.
    """
    found: list[dict[str, str]] = []
    for line in text.split("\n"):
        parts = learned_entry(line)
        if parts is None:
            continue
        fields = dict(
            part.split("=", 1) for part in parts[1].split() if "=" in part and part[0] != "="
        )
        found.append({"text": parts[0], **{k: v for k, v in fields.items() if k in _SHOWN}})
    return found


_SHOWN: Final = ("id", "thread", "date", "model", "reviewed")


def _bind(model: Any) -> Any:
    bind = getattr(model, "bind_tools", None)
    if not callable(bind):
        msg = (
            f"model must be a LangChain chat model that can call tools; {type(model).__name__} "
            "has no bind_tools"
        )
        raise TypeError(msg)
    try:
        return bind([UPDATE_MEMORY_TOOL])
    except NotImplementedError:
        msg = (
            f"model {type(model).__name__} cannot call tools (bind_tools is not implemented); "
            "MemoryConsolidator needs a chat model with tool calling"
        )
        raise TypeError(msg) from None


def _text_of(path: str, response: Any) -> str | None:
    """A downloaded file's text; None when it does not exist."""
    error = getattr(response, "error", None)
    if error == "file_not_found":
        return None
    content = getattr(response, "content", None)
    if error is not None or content is None:
        raise MemoryWriteError(path, f"cannot read: {error}")
    try:
        return bytes(content).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryWriteError(path, f"not UTF-8 text ({exc.reason})") from None


def _model_name(model: Any, reply: Any) -> str | None:
    metadata = getattr(reply, "response_metadata", None) or {}
    for source, keys in (
        (metadata, ("model_name", "model", "model_id")),
        (model, ("model_name", "model", "model_id")),
    ):
        for key in keys:
            value = source.get(key) if isinstance(source, Mapping) else getattr(source, key, None)
            if isinstance(value, str) and value:
                return value
    llm_type = getattr(model, "_llm_type", None)
    return llm_type if isinstance(llm_type, str) else None


def _entry_id(value: Any) -> str | None:
    """An entry id as a model may spell it: `k3f9`, `[k3f9]`, ` K3F9 `."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    cleaned = value.strip().strip("[]").strip().lower()
    return cleaned or None


def _shown(value: Any) -> str | None:
    """A value of a malformed operation, short enough to report."""
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _id_of(change: Change | str) -> str:
    if isinstance(change, Change):
        return change.id
    if isinstance(change, str) and change.strip():
        return change.strip().lower()
    msg = f"approve/reject take a Change or its id, got {type(change).__name__}"
    raise TypeError(msg)


def _unreadable(problem: str) -> str:
    return f"unreadable ({problem}); fix or delete the file"


def _failure(exc: BaseException) -> str:
    """`Type: first line`, short (the logger redacts secrets: a provider's error may quote a
    key)."""
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return detail[:300]
