"""With a chat model: LLM-made keywords, summaries and long-term extraction. Failures of the
model, the embeddings or the memory file never lose a page."""

from __future__ import annotations

import json

import pytest
from deepagents.backends import StateBackend
from deepagents.backends.filesystem import FilesystemBackend
from langchain_core.messages import AIMessage
from tiers_helpers import FlakyEmbeddings, call

from layered_memory import MemoryWriter
from layered_memory.testing import ScriptedChatModel

USER = "ada"


def _summary(keywords, summary):
    return json.dumps({"keywords": keywords, "summary": summary})


async def test_model_makes_page_and_segment_summaries_and_extracts_facts(make_memory, use_async):
    model = ScriptedChatModel(
        script=[
            _summary(["Lisbon", "moving"], "User moved to Lisbon."),  # page 1
            _summary(["Lisbon", "flat"], "User's Lisbon flat."),  # page 2
            _summary(
                ["Lisbon", "moving", "flat"], "Moving to Lisbon and the flat there."
            ),  # segment
            json.dumps({"profile": ["Likes city life"], "facts": ["Lives in Lisbon since March"]}),
        ],
    )
    memory = make_memory(model=model, stm_capacity=1, tau=3)
    for text in ("I moved to Lisbon in March.", "My Lisbon flat is small.", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert segment.summary == "Moving to Lisbon and the flat there."
    assert set(segment.keywords) == {"lisbon", "moving", "flat"}
    assert [p.summary for p in segment.pages] == ["User moved to Lisbon.", "User's Lisbon flat."]
    entries = await call(memory, "long_term_entries", USER, use_async=use_async)
    assert [(e.kind, e.text) for e in entries] == [
        ("profile", "Likes city life"),
        ("fact", "Lives in Lisbon since March"),
    ]
    assert "I moved to Lisbon in March." in model.prompts[-1][-1].text


async def test_a_failing_or_garbled_model_falls_back_to_lexical(make_memory, use_async):
    def boom(messages):
        raise RuntimeError("model down")

    model = ScriptedChatModel(
        script=[boom, "not json at all", AIMessage(content="{]")], default="{}"
    )
    memory = make_memory(model=model, stm_capacity=1, tau=100)
    for text in ("lisbon flat balcony", "lisbon flat rent", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert [p.query for p in segment.pages] == ["lisbon flat balcony", "lisbon flat rent"]
    assert "lisbon" in segment.keywords


async def test_embedding_failure_keeps_pages_in_short_term_until_it_recovers(
    make_memory, use_async
):
    embeddings = FlakyEmbeddings()
    memory = make_memory(embeddings=embeddings, stm_capacity=2)
    await call(memory, "add_page", USER, "first page", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "second page", "ok", use_async=use_async)
    embeddings.broken = True
    await call(memory, "add_page", USER, "third page", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "fourth page", "ok", use_async=use_async)
    stm = await call(memory, "short_term", USER, use_async=use_async)
    assert [p.query for p in stm] == ["first page", "second page", "third page", "fourth page"]
    # Retrieval still serves short-term memory while embeddings are down.
    found = await call(memory, "retrieve", USER, "page", use_async=use_async)
    assert len(found.short_term) == 4
    embeddings.broken = False
    report = await call(memory, "consolidate", USER, use_async=use_async)
    assert (report.moved, report.pending) == (2, 0)
    moved = [
        p.query for s in await call(memory, "segments", USER, use_async=use_async) for p in s.pages
    ]
    assert moved == ["first page", "second page"]


async def test_embeddings_of_the_wrong_shape_are_a_logged_skip(make_memory, caplog, use_async):
    class Bad(FlakyEmbeddings):
        def embed_documents(self, texts):
            return [[float("nan")] * 4 for _ in texts]

    memory = make_memory(embeddings=Bad(), stm_capacity=1)
    await call(memory, "add_page", USER, "one", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "two", "ok", use_async=use_async)
    assert len(await call(memory, "short_term", USER, use_async=use_async)) == 2
    assert "NaN" in caplog.text


async def test_promotion_writes_a_line_into_memory_md(make_memory, tmp_path, use_async):
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=True)
    writers = {}

    def writer_for(user_id):
        return writers.setdefault(user_id, MemoryWriter(backend, f"/{user_id}/MEMORY.md"))

    memory = make_memory(stm_capacity=1, tau=2, memory_writer=writer_for)
    for text in ("My dentist is Dr Alvarez.", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    text = (tmp_path / USER / "MEMORY.md").read_text()
    assert "## Recent Insights" in text
    assert "My dentist is Dr Alvarez." in text


async def test_a_failing_memory_file_does_not_stop_the_promotion(make_memory, caplog, use_async):
    class Broken:
        def add_insight(self, text, *, entity=None):
            raise OSError("disk full")

        async def aadd_insight(self, text, *, entity=None):
            raise OSError("disk full")

    memory = make_memory(stm_capacity=1, tau=2, memory_writer=Broken())
    for text in ("My dentist is Dr Alvarez.", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    assert "My dentist is Dr Alvarez." in await call(memory, "long_term", USER, use_async=use_async)
    assert "MEMORY.md failed (OSError)" in caplog.text


def test_memory_writer_is_checked(make_memory):
    with pytest.raises(TypeError, match="memory_writer"):
        make_memory(memory_writer="/MEMORY.md")
    make_memory(memory_writer=MemoryWriter(StateBackend(), "/MEMORY.md"))


async def test_a_model_summary_makes_a_page_findable_by_what_it_means(make_memory, use_async):
    # "She moved there in spring" names neither the sister nor Porto; the model's summary of
    # the exchange does, and its words are searched with the page.
    model = ScriptedChatModel(
        script=[_summary(["sister", "porto"], "The user's sister moved to Porto.")],
        default=_summary(["misc"], "Small talk."),
    )
    found = []
    for with_model in (False, True):
        memory = make_memory(model=model if with_model else None, stm_capacity=1, tau=100)
        await call(
            memory, "add_page", USER, "She moved there in spring.", "Nice!", use_async=use_async
        )
        await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
        retrieval = await call(
            memory, "retrieve", USER, "where does my sister live", use_async=use_async
        )
        found.append([hit.page.query for hit in retrieval.pages])
    assert found == [[], ["She moved there in spring."]]
