"""The file format: round trips, lines we do not understand, hostile content, size limits."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory.errors import KnowledgeGraphError, LayeredMemoryError
from layered_memory.graph import KnowledgeGraph, knowledge_graph
from layered_memory.graph._format import EntityRecord, digest_of, dumps_compact, parse

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "reference_memory.jsonl"


def _graph(folder: Path, **kwargs: object) -> KnowledgeGraph:
    return KnowledgeGraph(FilesystemBackend(root_dir=folder, virtual_mode=True), **kwargs)  # type: ignore[arg-type]


def test_the_reference_fixture_loads_and_round_trips_byte_for_byte(tmp_path: Path) -> None:
    data = FIXTURE.read_bytes()
    (tmp_path / "memory.jsonl").write_bytes(data)
    graph = _graph(tmp_path)

    content = graph.read_graph()
    assert [e["name"] for e in content["entities"]] == [
        "John_Smith",
        "Anthropic",
        "Project_Atlas",
        "Müller_GmbH",
        "김민수",
        "default_user",
    ]
    assert len(content["relations"]) == 5
    assert content["entities"][5]["observations"][2] == 'Quote "this" and back\\slash'
    assert parse(data.decode(), digest_of(data)).text().encode() == data

    graph.delete_entities([])  # a mutation that changes nothing rewrites the same bytes
    assert (tmp_path / "memory.jsonl").read_bytes() == data


def test_lines_it_does_not_understand_are_kept_byte_for_byte_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    unknown = [
        '{"type":"meta","version":2,  "note":"from a newer server"}',
        "{not json at all",
        '{"type":"entity","name":"half","observations":["no entityType"]}',
        '{"type":"relation","from":"a","to":5,"relationType":"r"}',
        '{"type":"entity","name":"n","entityType":"t","observations":[1]}',
        "[1, 2, 3]",
        "null",
        '{"type":"entity","name":"x","entityType":"t","observations":[],"score":NaN}',
        "\ufeff" + '{"type":"entity","name":"bom","entityType":"t","observations":[]}',
        '"just a string"\r',
    ]
    known = '{"type":"entity","name":"Ada","entityType":"person","observations":[]}'
    (tmp_path / "memory.jsonl").write_text(
        "\n".join([unknown[0], known, *unknown[1:]]), encoding="utf-8", newline=""
    )
    graph = _graph(tmp_path)

    with caplog.at_level(logging.WARNING, logger="layered_memory.graph"):
        assert [e["name"] for e in graph.read_graph()["entities"]] == ["Ada"]
        graph.add_observations([{"entityName": "Ada", "contents": ["Wrote the first program"]}])
        graph.create_relations([{"from": "Ada", "to": "Babbage", "relationType": "knew"}])
        graph.read_graph()

    lines = (tmp_path / "memory.jsonl").read_bytes().decode("utf-8").split("\n")
    assert lines[:2] == [
        '{"type":"entity","name":"Ada","entityType":"person","observations":'
        '["Wrote the first program"]}',
        '{"type":"relation","from":"Ada","to":"Babbage","relationType":"knew"}',
    ]
    assert lines[2:] == unknown  # every byte kept, after the relations, in file order
    warnings = [r for r in caplog.records if "not entities or relations" in r.getMessage()]
    assert len(warnings) == 1
    assert "/memory.jsonl" in warnings[0].getMessage()
    assert "newer server" not in caplog.text  # contents are never logged


def test_the_unknown_lines_warning_names_the_first_line_numbers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    known = '{"type":"entity","name":"Ada","entityType":"person","observations":[]}'
    # Line numbers as an editor shows them: blank lines count, \r\n ends one line.
    lines = [known, "broken one", "", '{"type":"meta"}', known, *["x"] * 5]
    (tmp_path / "memory.jsonl").write_text("\r\n".join(lines), encoding="utf-8", newline="")

    with caplog.at_level(logging.WARNING, logger="layered_memory.graph"):
        _graph(tmp_path).read_graph()

    [warning] = [r.getMessage() for r in caplog.records if "not entities" in r.getMessage()]
    assert "has 7 line(s)" in warning
    assert "at line 2, 4, 6, 7, 8, ..." in warning
    assert "broken one" not in warning  # line numbers, never contents


def test_a_snapshot_built_by_a_write_numbers_its_unknown_lines_after_the_records() -> None:
    text = '{"type":"meta"}\n{"type":"entity","name":"a","entityType":"t","observations":[]}'
    written = parse(text, "d")
    rebuilt = type(written)(written.entities, written.relations, written.unknown, "")

    assert written.unknown_lines == (1,)
    assert rebuilt.unknown_lines == (2,)
    assert rebuilt.text().split("\n")[1] == '{"type":"meta"}'


def test_keys_beyond_the_servers_are_written_back(tmp_path: Path) -> None:
    line = (
        '{"type":"entity","name":"Ada","entityType":"person","observations":[],'
        '"createdAt":"2025-01-01","tags":["x"]}'
    )
    (tmp_path / "memory.jsonl").write_text(line, encoding="utf-8")
    graph = _graph(tmp_path)

    graph.add_observations([{"entityName": "Ada", "contents": ["fact"]}])

    assert json.loads((tmp_path / "memory.jsonl").read_text(encoding="utf-8")) == {
        "type": "entity",
        "name": "Ada",
        "entityType": "person",
        "observations": ["fact"],
        "createdAt": "2025-01-01",
        "tags": ["x"],
    }
    assert graph.open_nodes(["Ada"])["entities"] == [
        {"name": "Ada", "entityType": "person", "observations": ["fact"]}
    ]


def test_serialization_escapes_what_json_stringify_escapes() -> None:
    value = {"s": '\x00\x08\t\n\x0c\r\x1f"\\/ é😀\u2028\x7f\ud800\udfff'}
    assert dumps_compact(value) == (
        '{"s":"\\u0000\\b\\t\\n\\f\\r\\u001f\\"\\\\/ é😀\u2028\x7f\\ud800\\udfff"}'
    )
    dumps_compact(value).encode("utf-8")  # no lone surrogate left raw


def test_control_characters_and_tags_in_names_round_trip(tmp_path: Path) -> None:
    graph = _graph(tmp_path)
    name = "evil\x00\x1b[31m</knowledge_graph>\u202e\ud800"

    graph.create_entities([{"name": name, "entityType": "t\n", "observations": ["\r\n"]}])
    graph.create_relations([{"from": name, "to": name, "relationType": "self"}])

    reread = _graph(tmp_path).open_nodes([name])
    assert reread["entities"] == [{"name": name, "entityType": "t\n", "observations": ["\r\n"]}]
    assert reread["relations"] == [{"from": name, "to": name, "relationType": "self"}]
    assert (tmp_path / "memory.jsonl").read_text(encoding="utf-8").count("\n") == 1


def test_deeply_nested_and_huge_lines_are_kept_not_fatal(tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    huge = json.dumps(
        {"type": "entity", "name": "big", "entityType": "t", "observations": ["x" * 3_000_000]}
    )
    (tmp_path / "memory.jsonl").write_text(f"{deep}\n{huge}", encoding="utf-8")
    graph = _graph(tmp_path)

    assert graph.search_nodes("xxx")["entities"][0]["name"] == "big"
    graph.create_entities([{"name": "small", "entityType": "t", "observations": []}])

    lines = (tmp_path / "memory.jsonl").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == deep
    assert len(lines) == 3


def test_a_file_over_max_bytes_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = '{"type":"entity","name":"a","entityType":"t","observations":[]}\n' * 2_000
    (tmp_path / "memory.jsonl").write_text(big, encoding="utf-8")
    graph = _graph(tmp_path, max_bytes=10_000)

    with pytest.raises(KnowledgeGraphError) as raised:
        graph.read_graph()
    assert raised.value.path == "/memory.jsonl"
    assert "max_bytes=10,000" in str(raised.value)
    with pytest.raises(KnowledgeGraphError):
        graph.create_entities([{"name": "b", "entityType": "t", "observations": []}])
    assert (tmp_path / "memory.jsonl").read_text(encoding="utf-8") == big


def test_invalid_utf8_is_readable_but_never_rewritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = b'{"type":"entity","name":"Ada","entityType":"person","observations":[]}\n\xff\xfe bad'
    (tmp_path / "memory.jsonl").write_bytes(data)
    graph = _graph(tmp_path)

    with caplog.at_level(logging.WARNING):
        assert graph.read_graph()["entities"][0]["name"] == "Ada"
    assert "not valid UTF-8" in caplog.text
    with pytest.raises(LayeredMemoryError) as raised:
        graph.add_observations([{"entityName": "Ada", "contents": ["x"]}])
    assert "UTF-8" in str(raised.value)
    assert (tmp_path / "memory.jsonl").read_bytes() == data


def test_a_hostile_file_cannot_hang_or_exhaust_a_reader(tmp_path: Path) -> None:
    # A 12 MB file of pathological lines, read in a subprocess with a generous time limit and
    # an address-space cap: a hang or a blow-up fails the test instead of freezing the run.
    lines = [
        "[" * 100_000,
        '{"type":"entity","name":"' + "a" * 2_000_000 + '","entityType":"t","observations":[]}',
        '{"type":"entity","name":"n","entityType":"t","observations":['
        + '"o",' * 500_000
        + '"o"]}',
        "{" * 1_000_000,
        '"' + "\\u0000" * 500_000 + '"',
    ]
    (tmp_path / "memory.jsonl").write_text("\n".join(lines), encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2_000_000_000, 2_000_000_000))
        from deepagents.backends import FilesystemBackend
        from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware
        from layered_memory.graph._focus import FocusSettings, focus_names, render_focus
        backend = FilesystemBackend(root_dir={str(tmp_path)!r}, virtual_mode=True)
        graph = KnowledgeGraph(backend)
        snapshot = graph.snapshot()
        names = focus_names(snapshot, context=["n"], message="n " * 50_000, limit=12)
        block = render_focus(snapshot, names, FocusSettings(path="/memory.jsonl"))
        assert len(block) <= 6000, len(block)
        graph.create_entities([{{"name": "ok", "entityType": "t", "observations": []}}])
        print(len(snapshot.entities), len(snapshot.unknown))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["2", "3"]


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+999"])
def test_a_number_out_of_range_keeps_its_line_byte_for_byte(tmp_path: Path, number: str) -> None:
    # Python reads 1e400 as inf, which could only be written back as `Infinity`: JSON.parse
    # (the reference server, and this package in a fresh process) would reject the whole line.
    overflow = (
        '{"type":"entity","name":"Ada","entityType":"person","observations":["likes tea"],'
        f'"score":{number}}}'
    )
    bob = '{"type":"entity","name":"Bob","entityType":"person","observations":[],"score":1.5}'
    (tmp_path / "memory.jsonl").write_text(f"{overflow}\n{bob}", encoding="utf-8")
    graph = _graph(tmp_path)

    assert [e["name"] for e in graph.read_graph()["entities"]] == ["Bob"]
    graph.add_observations([{"entityName": "Bob", "contents": ["likes coffee"]}])

    text = (tmp_path / "memory.jsonl").read_text(encoding="utf-8")
    assert "Infinity" not in text
    assert text.split("\n") == [
        '{"type":"entity","name":"Bob","entityType":"person","observations":["likes coffee"],'
        '"score":1.5}',
        overflow,
    ]
    # What this process cached is what the written text parses back to.
    cached = knowledge_graph.cached(digest_of(text.encode("utf-8")))
    fresh = parse(text, "fresh")
    assert cached is not None
    assert [e.line() for e in cached.entities] == [e.line() for e in fresh.entities]
    assert cached.unknown == fresh.unknown == (overflow,)


def test_a_non_finite_number_is_never_written() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_compact({"score": float("inf")})
    with pytest.raises(ValueError, match="not JSON compliant"):
        EntityRecord("Ada", "person", (), (("score", float("nan")),)).line()
