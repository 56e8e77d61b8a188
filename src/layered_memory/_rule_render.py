"""The rules part of the prompt: matched bodies, then agent-requested rules, within a budget."""

from __future__ import annotations

import re
from html import escape

from layered_memory._rule_types import Rule, RuleMatch

RULES_OPEN = "<rules>\n"
RULES_CLOSE = "</rules>"
REQUESTED_OPEN = (
    "<requested_rules>\n"
    "Rules that apply only when relevant: read_file a rule's path when the task calls for it.\n"
)
REQUESTED_CLOSE = "</requested_rules>\n"
TRUNCATION_MARKER = "\n[rule truncated: {cut} of {total} characters of {path} cut]"

# Memory text is untrusted: a body must not be able to close the tags around it and speak as
# the system prompt. `<\/` reads the same to a model but closes nothing.
_CLOSING_TAG = re.compile(r"</(?=\s*(?:rules?|requested_rules|agent_memory)\b)", re.IGNORECASE)


def neutralize(text: str) -> str:
    """Defuse `</rule`, `</rules`, `</requested_rules` and `</agent_memory` in untrusted text."""
    return _CLOSING_TAG.sub(r"<\\/", text)


def _attribute(value: str) -> str:
    return escape(" ".join(value.split()), quote=True)


def _rule_block(rule: Rule, room: int) -> str | None:
    """The rule's block, its body truncated to fit `room` characters; None if nothing fits."""
    head = f'<rule name="{_attribute(rule.name)}" path="{_attribute(rule.path)}">\n'
    tail = "\n</rule>\n"
    body = neutralize(rule.body)
    block = head + body + tail
    if len(block) <= room:
        return block
    total = len(body)
    # The marker's length depends on the number cut; size it for the worst case (all cut).
    marker_room = len(TRUNCATION_MARKER.format(cut=total, total=total, path=rule.path))
    keep = room - len(head) - len(tail) - marker_room
    if keep <= 0:
        return None
    marker = TRUNCATION_MARKER.format(cut=total - keep, total=total, path=rule.path)
    return head + body[:keep] + marker + tail


def _requested_line(rule: Rule) -> str:
    description = neutralize(" ".join(rule.description.split()))
    return f"- {neutralize(rule.name)}: {description} (path: {neutralize(rule.path)})\n"


def render_rules(match: RuleMatch, *, max_chars: int) -> str:
    """Render the rules block for the prompt: deterministic bytes, at most `max_chars` long.

    Applied rules come first, each as `<rule name="..." path="...">body</rule>` in the match's
    order; a body over the remaining budget keeps its head and ends with a marker naming its
    file and how much was cut; rules after the budget ran out are left out. Requested rules
    follow as one line each (name, description, path), as many as fit. An empty match, or a
    budget too small for anything, renders as `""`.

    Args:
        match: What `RuleSet.match` selected.
        max_chars: The budget for the whole block, tags included.

    Returns:
        The block (no trailing newline), or `""`.
    """
    if not match or max_chars <= len(RULES_OPEN) + len(RULES_CLOSE):
        return ""
    room = max_chars - len(RULES_OPEN) - len(RULES_CLOSE)
    parts: list[str] = []
    for rule in match.applied:
        block = _rule_block(rule, room)
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
