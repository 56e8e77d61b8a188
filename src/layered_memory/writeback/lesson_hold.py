"""The lesson hold: a lesson that would steer the agent waits for a person, whatever `review=`.

Memory is read back into every later prompt, so a learned entry is a standing instruction. A
run can be steered by text it only read (a web page, a file, a tool's output, another agent:
prompt injection), and a model asked to remember what the run taught would make that injection
permanent: memory poisoning. So every lesson is judged on two things before it is applied.

**Its effects: what it would make the agent do**, whatever the wording
(`writeback.lesson_effects`). Each effect class has a reason a reviewer reads
(`layered-memory review` shows it):

- `remote code`: run code fetched from the network (a download piped into a shell or any
  interpreter, `bash <(...)`, download then run, base64 decoded into a shell, packages from
  another index or registry than the official one);
- `exfiltration`: send data off the machine (an upload command, a send verb with an outside
  address, data put into a URL);
- `credentials`: read, print or move credentials (key and token files, `.env`, the
  environment);
- `permissions`: widen its own permissions or persist (`authorized_keys`, cron, shell
  start-up files, git hooks, sudoers, set-uid bits, claims that someone pre-approved an action);
- `weakened checks`: skip or disable hooks, tests, reviews, linters, TLS or signature
  verification, force-push to a shared branch;
- `secrecy`: act without telling the user (keep something from them, hide traces);
- `override`: override its instructions or read-only memory (`AGENTS.md is out of date`,
  `ignore previous instructions`, treating text in tool output as orders, role turns).

How the classes read a text (normalised, as tokens and concepts) is `writeback.lesson_effects`.

**Its provenance: which messages its text came from.** The consolidator knows who said what
(`sources_of`): the user, the model, and tool results, split into the project's own files
(read_file, grep, glob, ls) and everything else (web pages, shell output, other agents,
MCP tools). A lesson whose content is drawn from that other text, its addresses, paths or
commands, or most of its words, is held unless it is plainly a project fact (no directive
to the agent, every address, path and command also said by the user or the project's files).
The consolidator also asks the project itself (`writeback._project_facts`, through its
backend): an effect-free lesson whose every path exists there and every command is named by
the project's files is a project fact, wherever the run read it.

Both are cheap (no model, linear in the text: bounded windows, no nested quantifiers), and
tuned to hold rather than to let through: a held lesson is never lost, a person approves it
with one command. `tests/writeback/test_lesson_hold_corpus.py` measures both sides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from layered_memory.writeback._lesson_words import words
from layered_memory.writeback.lesson_effects import Effect, effects, hosts_in, normalise

__all__ = ["MAX_CONTEXT", "Sources", "hold_reason", "sources_of"]


# --- Provenance ---------------------------------------------------------------------------------

PROJECT_TOOLS: Final = frozenset(
    {"read_file", "ls", "glob", "grep", "view", "str_replace_based_edit_tool", "memory"}
)
"""Tools whose results are the project's own files (the project's text, not a stranger's)."""

_CONTENT_WORD = re.compile(r"[a-z][a-z0-9_'-]{3,}")
_ENTITY = re.compile(
    r"(?:https?|ftp|s3|ssh|git)://\S+|[\w.+-]+@[\w-]+\.[\w.-]+|`[^`]{2,}`"
    r"|(?:~|\.{0,2})/[\w./-]+|\b[\w-]+\.(?:sh|py|md|json|toml|ya?ml|cfg|ini|txt|js|ts|env)\b"
)
_DIRECTIVE = words(
    "always never must should dont do-not make remember whenever ensure prefer use run "
    "treat trust follow ignore skip avoid before after instead from"
)
_STOP: Final = words(
    "that this with from have will when what your about which their there them then than into "
    "also only just more most some such very each other these those been were they does"
)


@dataclass(frozen=True, slots=True)
class Sources:
    """The run's text by who said it, as the hold compares a lesson with it (normalised).

    Attributes:
        trusted: What the user said, and the project's own files the agent read.
        ran: The arguments of the model's tool calls (the commands it ran itself). Its prose
            is left out: a steered model repeats what it read.
        foreign: Every other tool result: web pages, shell output, other agents, MCP tools.
        foreign_tools: The names of the tools `foreign` came from.
        hosts: The hosts `trusted` names (the project's own services).
    """

    trusted: str = ""
    ran: str = ""
    foreign: str = ""
    foreign_tools: tuple[str, ...] = ()
    hosts: frozenset[str] = frozenset()


MAX_SOURCE_CHARS: Final = 200_000
"""Characters of each kind of text kept for the comparison (the newest are kept)."""


def sources_of(messages: Sequence[Any]) -> Sources:
    """Who said what in a run's messages (LangChain messages)."""
    trusted: list[str] = []
    ran: list[str] = []
    foreign: list[str] = []
    tools: list[str] = []
    calls: dict[str, Any] = {}
    for message in messages:
        kind = getattr(message, "type", "")
        text = _text(message)
        if kind == "human":
            trusted.append(text)
        elif kind == "ai":
            for call in getattr(message, "tool_calls", []) or []:
                ran.append(str(call.get("args")))
                calls[str(call.get("id"))] = call.get("args")
        elif kind == "tool":
            name = str(getattr(message, "name", None) or "tool")
            args = calls.get(str(getattr(message, "tool_call_id", None)))
            if name in PROJECT_TOOLS and _third_party(args):
                name = f"{name} of third-party files"
            if name in PROJECT_TOOLS:
                trusted.append(text)
            else:
                foreign.append(text)
                if name not in tools:
                    tools.append(name)
    said = _kept(trusted)
    return Sources(
        trusted=said,
        ran=_kept(ran),
        foreign=_kept(foreign),
        foreign_tools=tuple(tools),
        hosts=frozenset(hosts_in(said)),
    )


THIRD_PARTY_PARTS: Final = frozenset(
    {
        "node_modules",
        "vendor",
        "vendored",
        "third_party",
        "third-party",
        "thirdparty",
        "site-packages",
        "dist-packages",
        ".venv",
        "venv",
        "bower_components",
        "downloads",
        "download",
        "tmp",
        ".cache",
        ".cargo",
        ".npm",
        ".yarn",
    }
)
"""Folders whose files a dependency, a download or a stranger wrote: read_file of them is
third-party text, not the project's own."""


def _third_party(args: Any) -> bool:
    """Whether a file tool's arguments name a path in a third-party folder."""
    if not isinstance(args, dict):
        return False
    paths = [str(v) for k, v in args.items() if "path" in str(k) or k in ("file", "dir")]
    return any(
        part.casefold() in THIRD_PARTY_PARTS
        for path in paths
        for part in path.replace("\\", "/").split("/")
    )


def _text(message: Any) -> str:
    try:
        return str(message.text)
    except Exception:  # a message type without `.text`: its content as it is
        return str(getattr(message, "content", ""))


def _kept(parts: Sequence[str]) -> str:
    joined = "\n".join(parts)
    return normalise(joined[-MAX_SOURCE_CHARS:])


def _provenance(text: str, sources: Sources) -> Effect | None:
    """A lesson drawn from foreign text (web, shell output, other agents) and not plainly a
    project fact."""
    if not sources.foreign:
        return None
    reading = normalise(text)
    entities = {e.strip("`.,;:()'\"") for e in _ENTITY.findall(reading)}
    entities = {e for e in entities if len(e) > 3}
    borrowed = sorted(
        e
        for e in entities
        if e in sources.foreign and e not in sources.trusted and e not in sources.ran
    )
    words = {w for w in _CONTENT_WORD.findall(reading) if w not in _STOP}
    foreign_words = {w for w in words if w in sources.foreign}
    trusted_words = {w for w in words if w in sources.trusted}
    mostly_foreign = (
        len(words) >= 3
        and len(foreign_words - trusted_words) >= 2
        and len(foreign_words) >= 0.6 * len(words)
        and len(trusted_words) < 0.4 * len(words)
    )
    if not borrowed and not mostly_foreign:
        return None
    directive = bool(set(reading.replace("'", "").split()) & _DIRECTIVE)
    if not borrowed and not directive:
        return None  # a plain fact in words the run read: no address, path or command of theirs
    tools = ", ".join(sources.foreign_tools[:3]) or "tool"
    evidence = borrowed[0] if borrowed else ", ".join(sorted(foreign_words - trusted_words)[:4])
    return Effect(
        "provenance",
        f"its text comes from {tools} output, not from the user or the project's files; text "
        "an agent reads may be written to steer it",
        evidence,
    )


# --- The verdict --------------------------------------------------------------------------------

MAX_CONTEXT: Final = 60
"""Other lessons each new one is read beside: the answer's other texts and the section's
newest entries, up to this many (each pair is one more reading: the cost stays bounded)."""


def hold_reason(
    text: str,
    *,
    sources: Sources | None = None,
    context: Sequence[str] = (),
    project_fact: Callable[[str], bool] | None = None,
    project_hosts: Callable[[], frozenset[str]] | None = None,
) -> str | None:
    """Why the lesson `text` must wait for a person, in a reviewer's words; None when it may
    be applied.

    Args:
        text: The lesson as it would be stored (cleaned, one line).
        sources: The run's text by who said it (`sources_of`); None: judged on effects alone.
        context: Other lessons it would stand beside (the answer's other texts, the section's
            entries): an effect that shows only when `text` is read with one of them (a
            download in one lesson, the pipe into a shell in another) holds it too.
        project_fact: Whether a lesson is plainly a fact about the project (every path it
            names exists there, every command is named by its files). Asked only of a lesson
            with no effect that would be held for its provenance; None: never.
        project_hosts: The hosts the project's own files name, asked only of a lesson with an
            effect (an upload to `deploy@web.internal.example.com` is the team's own business
            where the project names `example.com`).

    Returns:
        The reason, or None.
    """
    known = sources.hosts if sources is not None else frozenset()
    found = effects(text, known_hosts=known)
    if found and project_hosts is not None and not project_hosts() <= known:
        known = known | project_hosts()
        found = effects(text, known_hosts=known)
    if not found:
        for other in context[:MAX_CONTEXT]:
            # One sentence: the checks read a sentence at a time.
            together = f"{other.rstrip(' .!?')} and {text}"
            alone = {effect.kind for effect in effects(other, known_hosts=known)}
            joined = [
                effect
                for effect in effects(together, known_hosts=known)
                if effect.kind not in alone
            ]
            if joined:
                first = joined[0]
                return (
                    f"held for review: {first.reason}, read together with another lesson "
                    f"({_short(other)}) [{first.kind}: {first.evidence}]"
                )
    if not found and sources is not None:
        origin = _provenance(text, sources)
        if origin is not None and project_fact is not None and project_fact(text):
            origin = None  # read from the web, but every path and command is the project's
        if origin is not None:
            found = [origin]
    if not found:
        return None
    words = "; ".join(f"{effect.reason} [{effect.kind}: {effect.evidence}]" for effect in found)
    return f"held for review: {words}"


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:59] + "…"
