"""The rules part of the prompt: matched bodies, then agent-requested rules, within a budget.

Rule files are untrusted: bodies, names, descriptions and paths all go through the package's
one defusing function (`_defuse.defuse`), so a rule cannot close the tags around it.
"""

from __future__ import annotations

from layered_memory.core._defuse import defuse, defuse_attribute, defuse_name
from layered_memory.core._truncation import defuse_within, truncate_text
from layered_memory.rules._types import Rule, RuleMatch

RULES_OPEN = "<rules>\n"
RULES_CLOSE = "</rules>"
REQUESTED_OPEN = (
    "<requested_rules>\n"
    "Rules that apply only when relevant: read_file a rule's path when the task calls for it.\n"
)
REQUESTED_CLOSE = "</requested_rules>\n"

neutralize = defuse
"""The package's one defusing function, under the name `layered_memory.rules` exports."""


def _rule_block(rule: Rule, room: int) -> str | None:
    """The rule's block, its body truncated to fit `room` characters; None if nothing fits.

    A cut body ends with the same marker as a cut memory file (`core.render.truncate_text`).
    """
    head = f'<rule name="{defuse_attribute(rule.name)}" path="{defuse_attribute(rule.path)}">\n'
    tail = "\n</rule>\n"
    body = defuse_within(rule.body, room)
    block = head + body + tail
    if len(block) <= room:
        return block
    kept = truncate_text(body, room - len(head) - len(tail), rule.path)
    return head + kept + tail if kept else None


def _requested_line(rule: Rule) -> str:
    description = defuse_name(" ".join(rule.description.split()))
    name, path = defuse_name(" ".join(rule.name.split())), defuse_name(" ".join(rule.path.split()))
    return f"- {name}: {description} (path: {path})\n"


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
