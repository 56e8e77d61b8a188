"""The red-team corpus of cites (`rt_cites_corpus.py`) run against every route a cite takes:
`MemoryWriter.add_insight`, the consolidator's `update_memory`, a load of a memory file with
hand-planted cite comments, and `review refresh`.

What must hold: nothing outside the project, no credential file (under any name: a symlink to
one, a trailing slash) and no secret's digest is ever stored; no FIFO, device or huge file is
read; a planted cite never makes a load, `doctor` or `review` read a credential file (whose
digest, compared, would tell a guess from the truth); a load looks at a bounded number of
cites however many a file holds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import rt_cites_corpus as corpus
from deepagents.backends import FilesystemBackend

from layered_memory import Layer, MemoryAssembler, MemoryConsolidator, MemoryWriter
from layered_memory.core import staleness
from layered_memory.testing import ScriptedChatModel, tool_call
from layered_memory.writeback.cites import decide_stale, stale_lessons

DAY = dt.date(2026, 12, 7)
HANG_GUARD_SECONDS = 300  # only stops a hung child; nothing is timed

# Cites that read safely but need no file the corpus world lacks: run in the hang-guarded
# child (a FIFO, a device, a 2 GiB file: a regression would hang or fill memory).
DANGEROUS = {"/src/pipe.py", "/src/pipe.py#L1", "/src/zero.py", "/src/stdin.py", "/src/huge.py#L1"}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@pytest.fixture
def world(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    corpus.plant(root, tmp_path / "outside")
    return root


def backend_of(root: Path) -> FilesystemBackend:
    return FilesystemBackend(root_dir=root, virtual_mode=True)


def writer(root: Path) -> MemoryWriter:
    return MemoryWriter(backend_of(root), "/MEMORY.md", clock=lambda: DAY)


def entry(text: str, *cites: str) -> str:
    """A line as the agent's shell would plant it: `cites` are `path@digest`."""
    return f"- 2026-12-01: {text} <!-- cites={','.join(cites)} date=2026-12-01 -->"


def memory_with(root: Path, *lines: str) -> None:
    text = "# Memory\n\n## Recent Insights\n\n" + "\n".join(lines) + "\n"
    (root / "MEMORY.md").write_text(text)


SAFE_REFUSED = [case for case in corpus.REFUSED if case.raw not in DANGEROUS]


@pytest.mark.parametrize("case", SAFE_REFUSED, ids=[case.why for case in SAFE_REFUSED])
def test_add_insight_refuses_each_hostile_cite(world: Path, case: corpus.Cite) -> None:
    with pytest.raises(ValueError, match="cite"):
        writer(world).add_insight("a lesson about the app", cites=[case.raw])
    assert not (world / "MEMORY.md").exists()


@pytest.mark.parametrize(
    "case", [*corpus.KEPT, *corpus.HARMLESS], ids=[c.why for c in (*corpus.KEPT, *corpus.HARMLESS)]
)
def test_add_insight_keeps_each_ordinary_cite(world: Path, case: corpus.Cite) -> None:
    assert writer(world).add_insight("a lesson about the app", cites=[case.raw])
    assert "cites=" in (world / "MEMORY.md").read_text()


def test_the_consolidator_stores_no_hostile_cite(world: Path) -> None:
    cites: list[Any] = [*(case.raw for case in SAFE_REFUSED), *(c.raw for c in corpus.NOT_LISTS)]
    ops = [
        {
            "op": "add",
            "text": f"lesson {n} about the app",
            "cites": [raw] if isinstance(raw, str) else raw,
        }
        for n, raw in enumerate(cites)
    ]
    for at in range(0, len(ops), 40):  # a consolidation applies 50 operations at most
        call = tool_call("update_memory", operations=ops[at : at + 40])
        model = ScriptedChatModel(script=[call])
        consolidator = MemoryConsolidator(
            model, backend=backend_of(world), path="/MEMORY.md", max_entries=1000
        )
        consolidator.consolidate([{"role": "user", "content": "notes on src/app.py"}])
    memory = (world / "MEMORY.md").read_text()
    assert memory.count("about the app") == len(ops)  # every lesson lands
    kept = [line for line in memory.splitlines() if "cites=" in line]
    # only the ordinary cites of the not-a-list cases: a bare string, the same cite 9 times
    assert all("cites=/src/app.py@" in line for line in kept), kept


def test_a_symlink_to_a_credential_or_a_trailing_slash_is_not_cited(world: Path) -> None:
    """`/src/settings_link.py` -> `/.env`, and `/.env/`: the name check saw `settings_link.py`
    and `` and stored the digest of `.env`."""
    for cite in ("/src/settings_link.py", "/.env/"):
        with pytest.raises(ValueError, match="credential"):
            writer(world).add_insight("settings live here", cites=[cite])
    assert not (world / "MEMORY.md").exists()


def test_lines_past_the_end_of_a_file_ending_with_a_newline_are_not_cited(world: Path) -> None:
    """`app.py` has 10 lines; `#L11` was kept with the digest of the empty string."""
    for cite in ("/src/app.py#L11", "/src/app.py#L1-11"):
        with pytest.raises(ValueError, match="10 lines"):
            writer(world).add_insight("the app", cites=[cite])
    assert writer(world).add_insight("the app", cites=["/src/app.py#L10"])


def test_a_planted_cite_never_makes_a_load_read_a_credential(world: Path) -> None:
    """An entry planted in memory citing `/.env` line 2 with a guessed digest: the load read
    `.env` and the marker's absence confirmed the right guess (an oracle), and a symlink to
    `.env` under another name did the same."""
    (world / ".env").write_text("DEBUG=true\nPIN=4821\n")
    guesses = [
        entry(f"guess {pin}", f"{cite}#L2-2@{digest('PIN=' + pin)}")
        for pin in ("0000", "4821")
        for cite in ("/.env", "/src/settings_link.py")
    ]
    memory_with(world, *guesses)
    backend = backend_of(world)
    asked: list[str] = []
    download = backend.download_files

    def counted(paths: list[str]) -> Any:
        asked.extend(paths)
        return download(paths)

    backend.download_files = counted  # type: ignore[method-assign]
    assembler = MemoryAssembler(backend=backend, layers=[Layer("n", "/MEMORY.md", writable=True)])
    block = assembler.render(assembler.load())
    assert "/.env" not in asked, asked
    assert "/src/settings_link.py" not in asked, asked
    shown = [line for line in block.splitlines() if "guess" in line]
    assert len(shown) == 4, shown
    assert all("[stale:" in line for line in shown), shown  # the same for every guess: no oracle
    listed = stale_lessons(backend, {"/MEMORY.md": (world / "MEMORY.md").read_text()})
    assert len(listed) == 4  # doctor and review: the same answer for every guess


def test_review_refresh_never_stores_a_credentials_digest(world: Path) -> None:
    """A planted stale entry citing `.env` (or a symlink to it): a person refreshing it stored
    the digest of the credential line, which a 4-digit PIN makes searchable."""
    (world / ".env").write_text("DEBUG=true\nPIN=4821\n")
    memory_with(
        world,
        entry("one", "/.env#L2-2@000000000000"),
        entry("two", "/src/settings_link.py#L2-2@000000000000"),
        entry("three", "/src/app.py#L1-1@000000000000"),
    )
    before = (world / "MEMORY.md").read_text()
    backend = backend_of(world)
    ids = [lesson.id for lesson in stale_lessons(backend, {"/MEMORY.md": before})]
    decisions = decide_stale(backend, "/MEMORY.md", ids, action="refresh", today="2026-12-07")
    outcomes = {decision.entry: decision.outcome for decision in decisions}
    assert outcomes == {
        "- 2026-12-01: one": "not done",
        "- 2026-12-01: two": "not done",
        "- 2026-12-01: three": "refreshed",
    }, decisions
    after = (world / "MEMORY.md").read_text()
    assert digest("PIN=4821") not in after
    assert after.splitlines()[4:6] == before.splitlines()[4:6]


class _Counting:
    """`staleness._STORED` counting its matches: how many stored cites a load parsed."""

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.calls = 0

    def fullmatch(self, text: str) -> Any:
        self.calls += 1
        return self.pattern.fullmatch(text)


@pytest.mark.parametrize("shape", ["10,000 entries", "10,000 cites on one line"])
def test_a_load_parses_a_bounded_number_of_cites(
    world: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """A memory file of 10,000 cited entries cost every load (each run's start, each reload
    after a memory edit) a parse of all 10,000 (~0.35 s here), twice, though only the first
    200 are checked: now the parse stops there too."""
    fresh = f"/src/app.py@{digest(corpus.APP)}"
    if shape == "10,000 entries":
        memory_with(world, *(entry(f"lesson {n}", fresh) for n in range(10_000)))
    else:
        memory_with(world, entry("lesson", *["/src/app.py@000000000000"] * 10_000))
    counting = _Counting(staleness._STORED)
    monkeypatch.setattr(staleness, "_STORED", counting)
    layers = [Layer("n", "/MEMORY.md", writable=True)]
    assembler = MemoryAssembler(backend=backend_of(world), layers=layers)
    assembler.render(assembler.load())
    assert counting.calls <= 4 * staleness.MAX_CITES, counting.calls


CHILD = """
import datetime as dt, json, sys
sys.path.insert(0, {tests!r})
import rt_cites_corpus as corpus
from deepagents.backends import FilesystemBackend
from layered_memory import Layer, MemoryAssembler, MemoryWriter
root = {root!r}
backend = FilesystemBackend(root_dir=root, virtual_mode=True)
out = {{}}
for cite in {cites!r}:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=lambda: dt.date(2026, 12, 7))
    try:
        writer.add_insight("a lesson", cites=[cite])
        out[cite] = "kept"
    except ValueError as exc:
        out[cite] = "refused"
lines = [case.line for case in corpus.PLANTED]
text = "# M\\n\\n## Recent Insights\\n\\n" + "\\n".join(lines) + "\\n"
open(root + "/MEMORY.md", "w").write(text)
assembler = MemoryAssembler(backend=backend, layers=[Layer("n", "/MEMORY.md", writable=True)])
out["block"] = assembler.render(assembler.load())
print(json.dumps(out))
"""


def test_fifos_devices_and_huge_files_are_never_read(world: Path) -> None:
    """In a child under a hang guard: a FIFO would block `open()`, `/dev/zero` never ends."""
    tests = str(Path(__file__).parent)
    code = CHILD.format(tests=tests, root=str(world), cites=sorted(DANGEROUS))
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=HANG_GUARD_SECONDS,
        env={**os.environ, "LAYERED_MEMORY_STATE_DIR": str(world.parent / "state")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert {cite: out[cite] for cite in DANGEROUS} == dict.fromkeys(DANGEROUS, "refused")
    block = out["block"]
    assert "hunter2" not in block
    assert corpus.OUTSIDE_SECRET.strip() not in block


def test_a_file_citing_200_files_never_marks_another_files_fresh_entry_gone(world: Path) -> None:
    """Two writable files: the first cites `MAX_CITES` spans, so a load downloads no file the
    second cites; the second's fresh entry was then marked "moved or was deleted" (by the load,
    `doctor` and `review stale`: a person would drop a true lesson). Past the limit an entry
    counts as fresh, as documented."""
    (world / "src/b.py").write_text("b\n")
    fresh = f"/src/app.py@{digest(corpus.APP)}"
    lines = [entry(f"a{n}", fresh) for n in range(staleness.MAX_CITES)]
    first = "## Recent Insights\n\n" + "\n".join(lines) + "\n"
    second = (
        "## Recent Insights\n\n" + entry("about b", f"/src/b.py@{digest('b' + chr(10))}") + "\n"
    )
    (world / "A.md").write_text(first)
    (world / "B.md").write_text(second)
    backend = backend_of(world)
    layers = [Layer("a", "/A.md", writable=True), Layer("b", "/B.md", writable=True)]
    assembler = MemoryAssembler(backend=backend, layers=layers)
    block = assembler.render(assembler.load())
    assert "[stale:" not in block
    assert stale_lessons(backend, {"/A.md": first, "/B.md": second}) == []


@pytest.mark.xfail(
    strict=True,
    reason="open: a digest is an unkeyed SHA-256 prefix; a short value no detector names (a "
    "4-digit PIN alone on its line) is found by trying every candidate. Needs a keyed digest "
    "(a decision: memory moved to another machine would then need the key, as review.key does)",
)
def test_a_stored_digest_does_not_give_away_a_short_value(world: Path) -> None:
    assert writer(world).add_insight("the PIN file", cites=[corpus.ORACLE_CITE])
    stored = (world / "MEMORY.md").read_text().split("one_line_pin.txt@")[1][:12]
    found = [value for value in corpus.ORACLE_SPACE if digest(value + "\n") == stored]
    assert found == []
