"""`layered-memory graph`: counts, search and the focus block, as the middleware renders it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from deepagents.backends import StateBackend

from layered_memory.cli import main
from layered_memory.graph import KnowledgeGraphMiddleware
from layered_memory.graph._focus import minimum_chars

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "reference_memory.jsonl"


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    target = tmp_path / "memory.jsonl"
    shutil.copyfile(FIXTURE, target)
    with target.open("a", encoding="utf-8") as stream:
        stream.write('\n{"type":"meta","from":"another tool"}')
    return target


def test_counts_and_types(graph_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(graph_file)]) == 0
    out = capsys.readouterr().out
    assert "6 entities, 5 relations, 1 line not in the MCP memory format" in out
    assert "entity types: person 3, organization 2, project 1" in out


def test_counts_singular_and_plural(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One of each reads "1 entity, 1 relation" (issue 26: it printed "1 relations").
    target = tmp_path / "memory.jsonl"
    lines = [
        '{"type":"entity","name":"Ada","entityType":"person","observations":[]}',
        '{"type":"relation","from":"Ada","to":"Ada","relationType":"knows"}',
    ]
    target.write_text("\n".join(lines), encoding="utf-8")
    assert main(["graph", str(target), "--search", "Ada"]) == 0
    out = capsys.readouterr().out
    assert f"{target}: 1 entity, 1 relation\n" in out
    assert "search: 1 entity, 1 relation\n" in out


def test_search_and_focus_as_json(graph_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "graph",
            str(graph_file),
            "--search",
            "MÜLLER",
            "--message",
            "Is John Smith around?",
            "--session-key",
            "entity:project_atlas:planning",
            "--max-chars",
            "2500",
            "--json",
        ]
    )

    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in report["search"]["entities"]] == ["Müller_GmbH"]
    assert report["focus"]["names"] == ["Project_Atlas", "John_Smith"]
    assert len(report["focus"]["block"]) <= 2500
    assert '"name":"Project_Atlas"' in report["focus"]["block"]
    assert report["unknown_lines"] == 1


def test_the_text_form_prints_the_block(
    graph_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["graph", str(graph_file), "--message", "what about anthropic"]) == 0
    out = capsys.readouterr().out
    assert "in focus: Anthropic" in out
    assert "<knowledge_graph>" in out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.jsonl"], "no such file"),
        (["{file}", "--session-key", "not a key"], "session key"),
        (["{file}", "--max-chars", "10"], "--max-chars 10 is too small"),
    ],
)
def test_usage_errors_exit_2(
    graph_file: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    argv = ["graph", *(a.format(file=graph_file) for a in arguments)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_symlink_to_another_folder_is_followed(
    graph_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (graph_file.parent / "sub").mkdir()
    link = graph_file.parent / "sub" / "up.jsonl"
    link.symlink_to(Path("..") / graph_file.name)

    assert main(["graph", str(link), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entities"] == 6


def test_a_symlink_loop_is_no_such_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.jsonl").symlink_to(tmp_path / "b.jsonl")
    (tmp_path / "b.jsonl").symlink_to(tmp_path / "a.jsonl")

    assert main(["graph", str(tmp_path / "a.jsonl")]) == 2
    assert "a.jsonl: no such file" in capsys.readouterr().err


def test_max_chars_below_the_middlewares_minimum_is_refused_with_that_minimum(
    graph_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    least = minimum_chars("/memory.jsonl")
    with pytest.raises(ValueError, match=f"at least {least}"):
        KnowledgeGraphMiddleware(backend=StateBackend(), max_chars=least - 1)

    argv = ["graph", str(graph_file), "--message", "hi", "--max-chars"]
    assert main([*argv, str(least - 1)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"at least {least}" in err
    assert main([*argv, str(least)]) == 0  # the same budget the middleware takes
