"""A path is shown to the model without the secrets in it: a file named like a token in a
folder layer (`ghp_....md`) must not put the token in every prompt through `path=`, a marker
or a note."""

from __future__ import annotations

from layered_memory import Layer
from layered_memory.core.render import render_memory

TOKEN = "ghp_" + "A1b2C3d4" * 5


def test_a_token_in_a_file_name_never_reaches_the_prompt() -> None:
    layers = [Layer("team", "/team/")]
    path = f"/team/{TOKEN}.md"
    files = {path: "Never push to main.\n" * 50, "/team/notes.md": "x"}
    block = render_memory(layers, files)
    assert "Never push to main." in block
    assert TOKEN[4:20] not in block
    assert "[REDACTED:github_token].md" in block
    # Cut by the budget: the stub, the cut marker and the note of left-out files name it too.
    for budget in (900, 1400, 2000):
        small = render_memory(layers, files, max_chars=budget)
        assert TOKEN[4:20] not in small, budget
