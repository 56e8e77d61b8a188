"""HTML comments are authoring notes and are not shown; inside a fenced code block they are
code (a Vue `<template>` example) and stay, in memory files and in rule files alike."""

from __future__ import annotations

from layered_memory import Layer
from layered_memory.core.render import render_memory
from layered_memory.rules import parse_rule_file

TEXT = (
    "Use single-file components. <!-- note to self: revisit -->\n"
    "\n"
    "```vue\n"
    "<template>\n"
    "  <!-- the header slot -->\n"
    "  <slot name='header' />\n"
    "</template>\n"
    "```\n"
    "\n"
    "~~~~html\n"
    "<!-- a tilde fence -->\n"
    "~~~~\n"
    "<!-- a hidden authoring note -->Done.\n"
)


def test_comments_in_code_fences_stay_in_memory_files() -> None:
    block = render_memory([Layer("team", "/AGENTS.md")], {"/AGENTS.md": TEXT})
    assert "<!-- the header slot -->" in block
    assert "<!-- a tilde fence -->" in block
    assert "revisit" not in block
    assert "hidden authoring note" not in block
    assert "Done." in block


def test_comments_in_code_fences_stay_in_rule_files() -> None:
    rule, _problems = parse_rule_file("/rules/vue.md", TEXT, folder_index=0)
    assert rule is not None
    assert "<!-- the header slot -->" in rule.body
    assert "hidden authoring note" not in rule.body


def test_a_comment_never_hides_a_fence() -> None:
    """A comment that would span a fence ends at it: the fenced text is shown."""
    text = "<!-- start\n```\nshown\n```\n-->tail"
    block = render_memory([Layer("team", "/AGENTS.md")], {"/AGENTS.md": text})
    assert "shown" in block
