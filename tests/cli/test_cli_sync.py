"""`layered-memory sync push|pull` against the real PostgreSQL: byte-for-byte round trips."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.store.postgres import PostgresStore

from cli_store_helpers import download, raw_items, upload
from layered_memory.cli import main
from postgres_schema import throwaway_schema

pytestmark = pytest.mark.postgres

NS = ("org", "acme", "billing")
NS_TEXT = "org/acme/billing"

SYNCED: dict[str, bytes] = {
    "AGENTS.md": b"# Project\r\n- Run `make test`.\r\n",  # CRLF kept
    "MEMORY.md": "\ufeff# Memory\n- 2025-06-01: café ☕\n".encode(),  # BOM kept
    "empty.md": b"",
    "latin1.md": b"caf\xe9 \xe0 la carte\n",  # not UTF-8: a base64 item
    "nul.md": b"text with a \x00 NUL\n",  # UTF-8, but jsonb cannot hold \u0000: base64
    "logo.png": bytes(range(256)),
    ".claude/rules/lang/python.md": b"---\npaths: ['**/*.py']\n---\nUse ruff.\n",
    ".agents/rules/deep/er/x.md": b"deep\n",
    ".cursor/rules/a.mdc": b"---\nalwaysApply: true\n---\nA\n",
    "rules/team/r\u00e8gles-\u00fcn\u00ef.md": "règles\n".encode(),
    "\u65e5\u672c\u8a9e/\u30e1\u30e2.md": "メモ\n".encode(),
}

NOT_SYNCED: dict[str, bytes] = {
    ".git/config": b"[core]\n",
    ".env": b"API_KEY=secret\n",
    ".DS_Store": b"\x00\x01",
    ".claude/settings.json": b"{}",
    ".claude/rules/.hidden/x.md": b"hidden\n",
    "__pycache__/m.cpython-311.pyc": b"\x00",
    "node_modules/x/index.js": b"x",
    "MEMORY.md~": b"backup",
    "notes.swp": b"swap",
}


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def read_tree(root: Path) -> dict[str, bytes]:
    """The folder's files, without the memory writers' lock files (`.NAME.lock`, empty): a
    pull takes the lock every writer of a file takes, creating it on first use."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and not (path.name.startswith(".") and path.name.endswith(".lock"))
    }


@pytest.fixture
def store_url(postgres_url: str) -> Iterator[str]:
    with throwaway_schema(postgres_url) as schema:
        url = schema.url
        yield url


def sync(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    status = main(["sync", *args])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def push(capsys: pytest.CaptureFixture[str], url: str, root: Path, *extra: str):  # type: ignore[no-untyped-def]
    return sync(capsys, "push", "--store", url, "--namespace", NS_TEXT, "--root", str(root), *extra)


def pull(capsys: pytest.CaptureFixture[str], url: str, root: Path, *extra: str):  # type: ignore[no-untyped-def]
    return sync(capsys, "pull", "--store", url, "--namespace", NS_TEXT, "--root", str(root), *extra)


def test_push_then_pull_round_trips_byte_for_byte(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source"
    write_tree(source, {**SYNCED, **NOT_SYNCED})
    status, lines, err = push(capsys, store_url, source)
    assert (status, err) == (0, "")
    assert sorted(lines[:-2]) == sorted(f"added     /{name}" for name in SYNCED)
    assert lines[-1] == f"push: {len(SYNCED)} added, 0 updated, 0 unchanged, 0 deleted"

    items = raw_items(store_url, NS)
    assert set(items) == {f"/{name}" for name in SYNCED}
    assert items["/AGENTS.md"]["encoding"] == "utf-8"
    assert items["/AGENTS.md"]["content"] == SYNCED["AGENTS.md"].decode()
    assert {items[f"/{n}"]["encoding"] for n in ("latin1.md", "nul.md", "logo.png")} == {"base64"}
    assert base64.b64decode(str(items["/latin1.md"]["content"])) == SYNCED["latin1.md"]
    for value in items.values():
        assert set(value) == {"content", "encoding", "created_at", "modified_at"}
    # deepagents' StoreBackend reads every item back as the same bytes
    keys = [f"/{name}" for name in SYNCED]
    assert download(store_url, NS, keys) == {f"/{n}": data for n, data in SYNCED.items()}

    target = tmp_path / "target"
    status, lines, err = pull(capsys, store_url, target)
    assert (status, err) == (0, "")
    assert lines[-1] == f"pull: {len(SYNCED)} added, 0 updated, 0 unchanged, 0 deleted"
    assert read_tree(target) == SYNCED

    # nothing changed: both directions say so, and a re-push keeps created_at
    status, lines, _ = push(capsys, store_url, target)
    assert status == 0
    assert lines[-1].startswith(f"push: 0 added, 0 updated, {len(SYNCED)} unchanged")
    status, lines, _ = pull(capsys, store_url, source)
    assert status == 0
    assert lines[-1].startswith(f"pull: 0 added, 0 updated, {len(SYNCED)} unchanged")
    assert read_tree(source) == {**SYNCED, **NOT_SYNCED}  # excluded files left alone


def test_updates_keep_created_at_and_delete_is_opt_in(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "memory"
    write_tree(root, {"AGENTS.md": b"v1\n", "MEMORY.md": b"m\n", "rules/a.md": b"a\n"})
    assert push(capsys, store_url, root)[0] == 0
    created = raw_items(store_url, NS)["/AGENTS.md"]["created_at"]

    (root / "AGENTS.md").write_bytes(b"v2\n")
    (root / "rules" / "a.md").unlink()
    status, lines, _ = push(capsys, store_url, root)
    assert status == 0
    assert "updated   /AGENTS.md" in lines
    assert "unchanged /MEMORY.md" in lines
    assert "kept      /rules/a.md  (not in the source; --delete removes it)" in lines
    assert lines[-1] == "push: 0 added, 1 updated, 1 unchanged, 0 deleted, 1 kept"
    items = raw_items(store_url, NS)
    assert items["/AGENTS.md"]["created_at"] == created
    assert items["/AGENTS.md"]["content"] == "v2\n"
    assert "/rules/a.md" in items

    status, lines, _ = push(capsys, store_url, root, "--delete")
    assert status == 0
    assert "deleted   /rules/a.md" in lines
    assert set(raw_items(store_url, NS)) == {"/AGENTS.md", "/MEMORY.md"}

    # pull --delete removes local files the store does not have (and emptied folders)
    write_tree(root, {"rules/stale/old.md": b"old\n", ".git/HEAD": b"ref\n"})
    status, lines, _ = pull(capsys, store_url, root)
    assert status == 0
    assert "kept      /rules/stale/old.md  (not in the source; --delete removes it)" in lines
    status, lines, _ = pull(capsys, store_url, root, "--delete")
    assert status == 0
    assert "deleted   /rules/stale/old.md" in lines
    assert read_tree(root) == {"AGENTS.md": b"v2\n", "MEMORY.md": b"m\n", ".git/HEAD": b"ref\n"}
    assert not (root / "rules").exists()


def test_dry_run_writes_nothing(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "memory"
    write_tree(root, {"AGENTS.md": b"a\n", "rules/r.md": b"r\n"})
    status, lines, _ = push(capsys, store_url, root, "--dry-run")
    assert status == 0
    assert lines[-1] == "dry run, nothing written: push: 2 added, 0 updated, 0 unchanged, 0 deleted"
    with pytest.raises(psycopg.errors.UndefinedTable):  # not even the tables were created
        raw_items(store_url, NS)

    upload(store_url, NS, {"/AGENTS.md": b"from the store\n", "/other.md": b"o\n"})
    before = read_tree(root)
    status, lines, _ = pull(capsys, store_url, root, "--dry-run", "--delete")
    assert status == 0
    assert {"updated   /AGENTS.md", "added     /other.md", "deleted   /rules/r.md"} <= set(lines)
    assert lines[-1].startswith("dry run, nothing written: pull: 1 added, 1 updated, 0 unchanged")
    assert read_tree(root) == before
    status, _, _ = push(capsys, store_url, root, "--dry-run", "--delete")
    assert status == 0
    assert set(raw_items(store_url, NS)) == {"/AGENTS.md", "/other.md"}
    assert download(store_url, NS, ["/AGENTS.md"]) == {"/AGENTS.md": b"from the store\n"}


def test_pull_refuses_keys_that_escape_the_folder(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "memory"
    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    evil = {
        "/../evil.md": "key has an empty, '.' or '..' segment",
        "/a/../../evil.md": "key has an empty, '.' or '..' segment",
        "/./evil.md": "key has an empty, '.' or '..' segment",
        "/a//evil.md": "key has an empty, '.' or '..' segment",
        "relative.md": "key is not an absolute /path",
        "/a\\..\\..\\evil.md": "key contains a backslash or NUL",
        "/link/evil.md": "key leads outside DIR (through a symlink)",
    }
    upload(store_url, NS, dict.fromkeys(evil, b"pwned\n") | {"/AGENTS.md": b"fine\n"})
    status, lines, err = pull(capsys, store_url, root)
    assert (status, err) == (1, "")
    for key, reason in evil.items():
        assert f"refused   {key}  ({reason})" in lines
    assert "added     /AGENTS.md" in lines
    assert lines[-1] == "pull: 1 added, 0 updated, 0 unchanged, 0 deleted, 7 refused"
    assert (root / "AGENTS.md").read_bytes() == b"fine\n"
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "evil.md").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory", "outside"]


def test_only_the_exact_namespace_and_only_file_items_are_synced(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload(store_url, NS, {"/AGENTS.md": b"mine\n"})
    upload(store_url, (*NS, "child"), {"/CHILD.md": b"child\n"})
    with PostgresStore.from_conn_string(store_url) as store:
        store.put(NS, "/lock", {"owner": "worker-1"})
        store.put(NS, "/.env", {"content": "SECRET=1", "encoding": "utf-8"})
    root = tmp_path / "memory"
    status, lines, _ = pull(capsys, store_url, root)
    assert status == 0
    assert "skipped   /lock  (not a file item)" in lines
    assert "skipped   /.env  (dot-folder or junk name: not synced)" in lines
    assert read_tree(root) == {"AGENTS.md": b"mine\n"}
    (root / "AGENTS.md").unlink()
    write_tree(root, {"MEMORY.md": b"m\n"})
    assert push(capsys, store_url, root, "--delete")[0] == 0
    assert set(raw_items(store_url, NS)) == {"/MEMORY.md", "/lock", "/.env"}
    assert set(raw_items(store_url, (*NS, "child"))) == {"/CHILD.md"}


def test_delete_from_an_empty_source_is_refused(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "memory"
    write_tree(root, {"AGENTS.md": b"a\n"})
    assert push(capsys, store_url, root)[0] == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    status, lines, err = push(capsys, store_url, empty, "--delete")
    assert (status, lines) == (2, [])
    assert "refusing --delete" in err
    assert "wrong --root or --namespace" in err
    assert set(raw_items(store_url, NS)) == {"/AGENTS.md"}
    status, _, err = sync(
        capsys,
        "pull",
        "--store",
        store_url,
        "--namespace",
        "typo/ns",
        "--root",
        str(root),
        "--delete",
    )
    assert status == 2
    assert "refusing --delete" in err
    assert read_tree(root) == {"AGENTS.md": b"a\n"}


def test_usage_and_store_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql://memory:s3cr3t-pw@127.0.0.1:1/test"
    status, lines, err = sync(
        capsys, "push", "--store", url, "--namespace", "a/b", "--root", str(tmp_path)
    )
    assert (status, lines) == (2, [])
    assert err.startswith("layered-memory sync: cannot use the store at postgresql://memory:***@")
    assert "s3cr3t-pw" not in err
    assert len(err.splitlines()) == 1
    status, _, err = sync(
        capsys, "push", "--store", url, "--namespace", "a/*", "--root", str(tmp_path)
    )
    assert status == 2
    assert "invalid namespace 'a/*'" in err
    status, _, err = sync(
        capsys, "push", "--store", url, "--namespace", "a", "--root", str(tmp_path / "nope")
    )
    assert status == 2
    assert "no such folder" in err
    assert main(["sync", "push", "--store", url]) == 2  # argparse: missing options


@pytest.mark.slow
def test_console_script_round_trip(store_url: str, tmp_path: Path) -> None:
    script = str(Path(sys.executable).parent / "layered-memory")
    source, target = tmp_path / "source", tmp_path / "target"
    write_tree(source, SYNCED)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for direction, root in (("push", source), ("pull", target)):
        result = subprocess.run(
            [
                script,
                "sync",
                direction,
                "--store",
                store_url,
                "--namespace",
                NS_TEXT,
                "--root",
                str(root),
            ],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert read_tree(target) == SYNCED


def test_files_skipped_locally_are_left_alone_on_both_sides(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A local file sync skips (a symlink, over 8 MB) is neither deleted from the store by a
    push --delete nor overwritten by a pull: it was reported as skipped, and is."""
    root = tmp_path / "memory"
    write_tree(root, {"AGENTS.md": b"agents\n", "MEMORY.md": b"notes\n"})
    assert push(capsys, store_url, root)[0] == 0
    (root / "AGENTS.md").rename(root / "real.md")
    (root / "AGENTS.md").symlink_to("real.md")
    with (root / "MEMORY.md").open("r+b") as big:
        big.truncate(9 * 1024 * 1024)
    status, lines, _ = push(capsys, store_url, root, "--delete")
    assert status == 0
    assert not [line for line in lines if line.startswith("deleted")]
    assert {"/AGENTS.md", "/MEMORY.md"} <= set(raw_items(store_url, NS))
    status, lines, _ = pull(capsys, store_url, root)
    assert not [line for line in lines if line.startswith(("added", "updated"))]
    assert (root / "AGENTS.md").is_symlink()
    assert (root / "MEMORY.md").stat().st_size == 9 * 1024 * 1024


def test_a_namespace_with_a_dot_is_a_usage_error(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "memory"
    write_tree(root, {"AGENTS.md": b"agents\n"})
    status, _lines, err = sync(
        capsys, "push", "--store", store_url, "--namespace", "a.b", "--root", str(root)
    )
    assert status == 2
    assert "no '.'" in err
    assert err.count("\n") == 1


def test_pattern_limits_what_is_synced(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 26: push copied every file below --root; --pattern (repeatable) narrows it, and
    # --delete then leaves the keys outside the patterns alone.
    root = tmp_path / "project"
    write_tree(
        root,
        {
            "AGENTS.md": b"# Project\n",
            "src/app.py": b"print()\n",
            "README.md": b"readme\n",
            ".claude/rules/python.md": b"Ruff.\n",
            "docs/a/guide.md": b"guide\n",
        },
    )
    status, lines, err = push(
        capsys, store_url, root, "--pattern", "AGENTS.md", "--pattern", ".claude/rules/**"
    )
    assert (status, err) == (0, "")
    assert set(raw_items(store_url, NS)) == {"/AGENTS.md", "/.claude/rules/python.md"}
    assert lines[-1] == "push: 2 added, 0 updated, 0 unchanged, 0 deleted"

    assert push(capsys, store_url, root, "--pattern", "**/*.md")[0] == 0
    assert set(raw_items(store_url, NS)) == {
        "/AGENTS.md",
        "/README.md",
        "/.claude/rules/python.md",
        "/docs/a/guide.md",
    }
    (root / "README.md").unlink()
    status, lines, _ = push(capsys, store_url, root, "--pattern", "docs/**", "--delete")
    assert status == 0
    assert lines[-1] == "push: 0 added, 0 updated, 1 unchanged, 0 deleted"  # README.md kept

    target = tmp_path / "target"
    assert pull(capsys, store_url, target, "--pattern", "*.md")[0] == 0
    assert read_tree(target) == {"AGENTS.md": b"# Project\n", "README.md": b"readme\n"}

    status, lines, err = push(capsys, store_url, root, "--pattern", "src/[ab")
    assert status == 2
    assert err.startswith("layered-memory sync: --pattern src/[ab: invalid glob")


def test_sync_help_says_push_copies_every_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "push copies all of them, not only memory files; --pattern limits it" in help_text
    assert "--pattern GLOB" in help_text


def test_pull_never_overwrites_a_local_change_made_during_it(
    store_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent's edit (or a write-back) that lands between the pull's look at the folder and
    its write is kept: the pull writes under the memory-file lock, only over what it saw."""
    import layered_memory.cli.sync as sync_module

    source = tmp_path / "source"
    write_tree(source, {"MEMORY.md": b"# Memory\n- from the store\n", "AGENTS.md": b"new\n"})
    assert push(capsys, store_url, source)[0] == 0
    target = tmp_path / "target"
    # MEMORY.md was written by a memory writer before (its lock file is beside it): the pull
    # takes that lock; AGENTS.md never was, and the pull creates its lock as a writer would.
    write_tree(target, {"MEMORY.md": b"# Memory\n", ".MEMORY.md.lock": b"", "AGENTS.md": b"old\n"})
    looked = sync_module.scan_folder

    def look_then_agent_edits(root: Path) -> Any:
        seen = looked(root)
        (root / "MEMORY.md").write_bytes(b"# Memory\n- the agent's note\n")
        return seen

    monkeypatch.setattr(sync_module, "scan_folder", look_then_agent_edits)
    status, lines, _ = pull(capsys, store_url, target)
    assert status == 1
    assert any("/MEMORY.md" in line and "changed locally during the pull" in line for line in lines)
    assert (target / "MEMORY.md").read_bytes() == b"# Memory\n- the agent's note\n"
    assert (target / "AGENTS.md").read_bytes() == b"new\n"  # the unchanged file is pulled
    assert (target / ".AGENTS.md.lock").exists()  # the one lock every writer of it takes

    monkeypatch.setattr(sync_module, "scan_folder", looked)
    assert pull(capsys, store_url, target)[0] == 0  # a second pull compares afresh
    assert (target / "MEMORY.md").read_bytes() == b"# Memory\n- from the store\n"
