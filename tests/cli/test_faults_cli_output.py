"""Hostile store keys, file names and memory text never forge CLI output or reach the terminal.

A key holding a newline must not add a line to `sync` output; ANSI escapes, C1 controls, DEL,
bidi overrides and zero-width characters must arrive as visible escapes; JSON stays valid and
decodes to the exact text.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.store.postgres import PostgresStore

from layered_memory.cli import main
from layered_memory.cli._store import file_value
from postgres_schema import throwaway_schema

HOSTILE = [
    "\n",  # a new line: forged output
    "\r",  # back to column 0: overwrites the line on a terminal
    "\x1b[2J\x1b[31m",  # ANSI: clear the screen, turn red
    "\x1b]0;pwned\x07",  # OSC: set the window title
    "\x9b31m",  # C1 CSI: an ANSI escape in one byte
    "\x7f",  # DEL
    "\u202e",  # right-to-left override: "txt.exe" shown as "exe.txt"
    "\u2066",  # left-to-right isolate
    "\u200b",  # zero-width space
    "\ufeff",  # zero-width no-break space (BOM)
    "\u2028",  # line separator
    "\U000e0041",  # a tag character (invisible "A")
]
NAMESPACE = "org/acme/hostile"


def unsafe(text: str, *, allow: str = "\n") -> list[str]:
    """Characters of ``text`` a terminal would act on or not show (by Unicode category)."""
    return [
        char
        for char in text
        if char not in allow and unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs")
    ]


# -- sync --------------------------------------------------------------------------------------


@pytest.fixture
def store_url(postgres_url: str) -> Iterator[str]:
    with throwaway_schema(postgres_url) as schema:
        url = schema.url
        yield url


def put_items(url: str, keys: list[str]) -> None:
    """Store items as deepagents' StoreBackend would keep files, under hostile keys."""
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        for key in keys:
            store.put(tuple(NAMESPACE.split("/")), key, file_value(b"x\n"))


def test_sync_pull_and_push_print_hostile_keys_escaped_one_line_each(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = "/notes.md\nrefused   /etc/passwd  (forged line)"
    keys = [forged, *(f"/k{index}{char}.md" for index, char in enumerate(HOSTILE))]
    keys.append("/../\x1b[31mescape.md")  # refused: its reason line is printed too
    put_items(store_url, keys)
    root = tmp_path / "pulled"

    status = main(
        ["sync", "pull", "--store", store_url, "--namespace", NAMESPACE, "--root", str(root)]
    )
    out, err = capsys.readouterr()
    assert status == 1, "the escaping key is refused"
    lines = out.splitlines()
    assert len(lines) == len(keys) + 2, "one line per key, the route line, the summary"
    assert not unsafe(out + err)
    assert "/notes.md\\nrefused   /etc/passwd  (forged line)" in out
    assert not any(line.startswith("refused   /etc/passwd") for line in lines)
    assert "\\x1b[2J\\x1b[31m" in out
    assert "\\u202e" in out
    assert (root / "notes.md\nrefused   /etc").is_dir(), "the file itself keeps its exact name"

    status = main(
        [
            "sync",
            "push",
            "--store",
            store_url,
            "--namespace",
            NAMESPACE,
            "--root",
            str(root),
            "--dry-run",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0
    assert not unsafe(out + err)
    assert len(out.splitlines()) == len(keys) + 2, "the refused key is kept in the store"


def test_sync_errors_naming_a_hostile_folder_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "a\nlayered-memory sync: fake\x1b[2J"
    status = main(
        [
            "sync",
            "push",
            "--store",
            "postgresql://127.0.0.1:1/x",
            "--namespace",
            "a/b",
            "--root",
            str(folder),
        ]
    )
    out, err = capsys.readouterr()
    assert status == 2
    assert len(err.splitlines()) == 1
    assert not unsafe(out + err)


# -- inspect and lint --------------------------------------------------------------------------


@pytest.fixture
def hostile_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    rules = root / ".claude" / "rules"
    rules.mkdir(parents=True)
    (root / "AGENTS.md").write_text(
        "# Project\nbe \x1b[31mred\x1b[0m \u202eevil\u202c\n", encoding="utf-8"
    )
    (rules / "x\x1b[2Jy.md").write_text(
        "---\nname: \"na\\u200bme\\u202e\"\npaths: ['**/*.py']\n---\nRule body \x9b1m.\n",
        encoding="utf-8",
    )
    (rules / "bad\nforged.md").write_text("---\npaths: [unclosed\n---\nx\n", encoding="utf-8")
    return root


def test_inspect_escapes_names_paths_and_memory_text(
    hostile_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["inspect", "--root", str(hostile_project), "--path", "/src/a\x1b[5m.py"])
    out, err = capsys.readouterr()
    assert status == 0
    assert not unsafe(out + err), "no raw control or invisible character, colours off"
    # The block is what the model gets: bidi controls are gone from it (issue 22), the rest
    # is escaped.
    assert "be \\x1b[31mred\\x1b[0m evil" in out
    assert "x\\x1b[2Jy.md" in out
    assert "bad\\nforged.md" in out

    status = main(["inspect", "--root", str(hostile_project), "--json"])
    out, err = capsys.readouterr()
    assert status == 0
    assert not unsafe(out)
    report = json.loads(out)
    assert "be \x1b[31mred\x1b[0m evil" in report["block"], "--json: the exact text"
    assert any("bad\nforged.md" in problem["path"] for problem in report["problems"])


def test_lint_escapes_file_names_and_rule_names(
    hostile_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = hostile_project / ".claude" / "rules"
    status = main(["lint", str(rules), "--explain", "/src/a.py"])
    out, err = capsys.readouterr()
    assert status == 1, "the unclosed frontmatter is invalid"
    assert not unsafe(out + err)
    assert "bad\\nforged.md: error:" in out
    assert "na\\u200bme\\u202e" in out

    status = main(["lint", str(rules / "missing\x1b[2J.md")])
    out, err = capsys.readouterr()
    assert status == 2
    assert "missing\\x1b[2J.md: error: no such file" in err


def test_usage_errors_hide_passwords_and_escape_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["inspect", "--root", ".", "--storex=postgresql://app:hunter2@db/x", "\x1b[2J"])
    out, err = capsys.readouterr()
    assert status == 2
    assert "hunter2" not in out + err
    assert "postgresql://app:***@db/x" in err
    assert "\\x1b[2J" in err
    assert not unsafe(out + err)


# -- graph -------------------------------------------------------------------------------------


def test_graph_escapes_names_types_and_the_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = "Evil\x1b[2J\nforged line\u202e"
    records = [
        {"type": "entity", "name": hostile, "entityType": "per\x9bson", "observations": ["o\x07"]},
        {"type": "entity", "name": "Plain", "entityType": "t\u200bype", "observations": []},
        {"type": "relation", "from": hostile, "to": "Plain", "relationType": "knows"},
    ]
    graph_file = tmp_path / "memory\x1b[31m.jsonl"
    graph_file.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    arguments = ["graph", str(graph_file), "--search", "Evil", "--message", f"ask {hostile}"]

    assert main(arguments) == 0
    out, err = capsys.readouterr()
    assert not unsafe(out + err)
    assert "per\\x9bson" in out
    assert "Evil\\x1b[2J\\nforged line\\u202e" in out
    assert not any(line.startswith("forged line") for line in out.splitlines())

    assert main([*arguments, "--json"]) == 0
    out, err = capsys.readouterr()
    assert not unsafe(out + err)
    report = json.loads(out)
    assert report["search"]["entities"][0]["name"] == hostile, "--json: the exact text"


# -- tiers -------------------------------------------------------------------------------------


def test_tiers_escapes_invisible_characters_too(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import uuid

    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    prefix = ("lm_faults_tiers", uuid.uuid4().hex)
    hostile = "zero\u200bwidth bom\ufeff tag\U000e0041 rlo\u202e bell\x07 line\nnext"
    with PostgresStore.from_conn_string(postgres_url) as store:
        store.setup()
        TieredMemory(store, embeddings=LexicalEmbeddings(), namespace=prefix).add_page(
            "ada", hostile, "ok"
        )
        base = ["tiers", "--user", "ada", "--store", postgres_url, "--namespace", "/".join(prefix)]
        try:
            assert main(base) == 0
            out, err = capsys.readouterr()
            assert not unsafe(out + err)
            assert "zero\\u200bwidth bom\\ufeff tag\\U000e0041 rlo\\u202e" in out
            assert main([*base, "--json"]) == 0
            out, err = capsys.readouterr()
            assert not unsafe(out)
            assert json.loads(out)["short_term"][0]["query"] == hostile
        finally:
            for namespace in store.list_namespaces(prefix=prefix, limit=1000):
                for item in store.search(namespace, limit=1000):
                    store.delete(namespace, item.key)
