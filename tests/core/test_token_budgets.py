"""Budgets in the model's tokens: `max_tokens=` for the block and per layer."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import HumanMessage, SystemMessage

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel


class WordModel(ScriptedChatModel):
    """A model whose integration counts tokens itself: one token per word."""

    def get_num_tokens(self, text: str) -> int:
        return len(text.split())


class BrokenCounterModel(ScriptedChatModel):
    """A model whose tokenizer is not available (offline)."""

    def get_num_tokens(self, text: str) -> int:
        msg = "tokenizer download failed"
        raise OSError(msg)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("alpha " * 3_000)
    (tmp_path / "MEMORY.md").write_text("\n".join(["beta gamma delta"] * 150))
    return tmp_path


def _middleware(root: Path, *, notes_tokens: int | None = None, **kwargs: Any) -> Any:
    return MemoryMiddleware(
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        layers=[
            Layer("project", "/AGENTS.md"),
            Layer("notes", "/MEMORY.md", writable=True, max_tokens=notes_tokens),
        ],
        **kwargs,
    )


def _call(mw: Any, model: Any) -> tuple[str, dict[str, Any]]:
    state = dict(mw.before_agent({"messages": []}, _Runtime()) or {})
    runtime = _Runtime()
    request = ModelRequest(
        model=model,
        messages=[HumanMessage("hi")],
        system_message=SystemMessage("base"),
        state=state,  # type: ignore[arg-type]
        runtime=runtime,  # type: ignore[arg-type]
    )
    sent = mw.wrap_model_call(request, lambda r: r)
    block = sent.system_message.content_blocks[-1]["text"].removeprefix("\n\n")
    [chunk] = runtime.chunks
    return block, chunk["memory"]


def test_the_block_fits_max_tokens_counted_by_the_models_own_counter(root: Path) -> None:
    block, report = _call(_middleware(root, max_tokens=900), WordModel(script=[]))
    assert len(block.split()) <= 900
    assert len(block.split()) > 700  # the budget is used, not wasted
    assert report["unit"] == "tokens"
    assert report["budget"] == 900
    assert report["total"] == len(block.split())
    assert report["counter"] == "WordModel.get_num_tokens"
    assert report["chars"] == len(block)
    project = report["files"][0]
    assert project["cut"] is True
    assert (
        "over the total memory budget (max_tokens=900, WordModel.get_num_tokens)"
        in (project["why"])
    )


def test_a_cut_made_by_max_tokens_is_counted_in_tokens_by_its_marker(root: Path) -> None:
    block, report = _call(_middleware(root, max_tokens=900), WordModel(script=[]))
    [marker] = re.findall(r"truncated: (\d+) more (\w+) \((\d+) lines\) of /AGENTS\.md", block)
    amount, unit, _lines = marker
    assert unit == "tokens"
    # "alpha " * 3000: what is not shown, counted by the model's own counter (one per word).
    shown = block.count("alpha")
    assert int(amount) == 3_000 - shown
    project = report["files"][0]
    assert project["unit"] == "tokens"


def test_a_layer_cut_by_its_max_tokens_says_tokens_and_a_max_chars_cut_says_chars(
    root: Path,
) -> None:
    mw = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        layers=[
            Layer("project", "/AGENTS.md", max_chars=1_000),
            Layer("notes", "/MEMORY.md", writable=True, max_tokens=60),
        ],
    )
    block, report = _call(mw, WordModel(script=[]))
    assert "more chars" in block[: block.index('name="notes"')]
    notes = block[block.index('name="notes"') :]
    assert re.search(r"truncated: \d+ more tokens \(\d+ lines\) of /MEMORY\.md", notes)
    units = {entry["path"]: entry["unit"] for entry in report["files"]}
    assert units == {"/AGENTS.md": "chars", "/MEMORY.md": "tokens"}


def test_a_rule_cut_by_max_tokens_says_tokens_and_one_cut_by_its_own_cap_says_chars(
    tmp_path: Path,
) -> None:
    (tmp_path / "AGENTS.md").write_text("Use uv.\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "long.md").write_text("word " * 5_000)

    def middleware(**budget: Any) -> Any:
        return MemoryMiddleware(
            backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
            layers=[Layer("project", "/AGENTS.md")],
            rules=["/rules"],
            **budget,
        )

    block, report = _call(middleware(max_tokens=800), WordModel(script=[]))
    assert re.search(r"truncated: \d+ more tokens \(\d+ lines\) of /rules/long\.md", block)
    assert report["rules_part"]["cut"] is True
    block, _report = _call(middleware(), WordModel(script=[]))
    assert re.search(r"truncated: \d+ more chars \(\d+ lines\) of /rules/long\.md", block)


def test_without_a_counter_of_its_own_the_approximation_counts(root: Path) -> None:
    from langchain_core.messages.utils import count_tokens_approximately

    block, report = _call(_middleware(root, max_tokens=2_000), ScriptedChatModel(script=[]))
    counted = count_tokens_approximately([block], extra_tokens_per_message=0, count_name=False)
    assert counted <= 2_000
    assert report["counter"] == "count_tokens_approximately"
    assert report["total"] == counted


def test_a_layer_max_tokens_bounds_that_layer(root: Path) -> None:
    block, report = _call(_middleware(root, notes_tokens=60), WordModel(script=[]))
    notes = block[block.index('name="notes"') :]
    body = notes[notes.index(">") + 1 : notes.index("</layer>")]
    assert body.count("beta") <= 20  # 60 words: 20 lines of three
    assert "truncated" in body  # the cut marker names the file
    [entry] = [file for file in report["files"] if file["path"] == "/MEMORY.md"]
    assert entry["cut"] is True
    assert "over the layer's max_tokens=60 (WordModel.get_num_tokens)" in entry["why"]
    assert report["unit"] == "chars"  # no total token budget: the total is in characters


def test_a_failing_counter_falls_back_to_the_approximation_with_one_warning(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mw = _middleware(root, max_tokens=2_000)
    with caplog.at_level(logging.WARNING):
        _block, report = _call(mw, BrokenCounterModel(script=[]))
    assert report["counter"] == "BrokenCounterModel.get_num_tokens"
    warnings = [
        r for r in caplog.records if "BrokenCounterModel.get_num_tokens failed" in r.message
    ]
    assert len(warnings) == 1
    assert "count_tokens_approximately" in warnings[0].message


def test_a_max_tokens_the_template_alone_exceeds_is_warned_about_once(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As `max_chars=` below the template is refused, a `max_tokens=` below it is named (the
    counter is the model's, known only at the call): never a silently exceeded budget."""
    mw = _middleware(root, max_tokens=37)
    with caplog.at_level(logging.WARNING):
        _block, report = _call(mw, WordModel(script=[]))
        _call(mw, WordModel(script=[]))
    assert report["total"] > report["budget"] == 37
    warnings = [r.message for r in caplog.records if "max_tokens=37" in r.message]
    assert warnings == [
        f"max_tokens=37 is too small for the prompt template: the smallest memory block counts "
        f"{report['total']} tokens (WordModel.get_num_tokens), so the block is over the budget; "
        f"use max_tokens={report['total']} or more"
    ]


def test_the_same_memory_for_another_model_is_counted_again(root: Path) -> None:
    mw = _middleware(root, max_tokens=900)
    _block, words = _call(mw, WordModel(script=[]))
    _block, approximate = _call(mw, ScriptedChatModel(script=[]))
    assert words["counter"] != approximate["counter"]


@pytest.mark.parametrize("value", [0, -1])
def test_max_tokens_must_be_positive(root: Path, value: int) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        _middleware(root, max_tokens=value)
    with pytest.raises(ValueError, match="max_tokens"):
        Layer("notes", "/MEMORY.md", max_tokens=value)


def test_max_tokens_must_be_an_int(root: Path) -> None:
    with pytest.raises(TypeError, match="max_tokens"):
        _middleware(root, max_tokens="2000")


class _Runtime:
    def __init__(self) -> None:
        self.context = None
        self.chunks: list[Any] = []
        self.stream_writer = self.chunks.append
