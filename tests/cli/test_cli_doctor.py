"""`layered-memory doctor`: every check fires on its problem and stays quiet on a clean project."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from cli_config_helpers import PROJECT, write, write_project

from layered_memory.cli import main
from layered_memory.cli.doctor import CHECKS, ping


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return root


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    status = main(["doctor", *args, "--json"])
    captured = capsys.readouterr()
    assert status in (0, 1), captured.err
    data = json.loads(captured.out)
    assert data["version"] == 1
    assert data["ok"] is (status == 0)
    return status, data


def found(data: dict) -> set[tuple[str, str, str | None]]:
    return {(f["check"], f["severity"], f["path"]) for f in data["findings"]}


def config(root: Path, body: str) -> str:
    """A configuration module defining `memory`; returns its name."""
    name = f"doctor_config_{uuid.uuid4().hex[:10]}"
    header = (
        "from pathlib import Path\n"
        "from deepagents.backends import FilesystemBackend\n"
        "from layered_memory import *\n"
        "HERE = Path(__file__).resolve().parent\n"
        "disk = FilesystemBackend(root_dir=HERE, virtual_mode=True)\n"
    )
    write(root, {f"{name}.py": header + textwrap.dedent(body)})
    return name


def test_a_clean_project_exits_0(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = write_project(folder)
    status, data = doctor(capsys, "--config", f"{name}:agent")
    assert status == 0
    assert data["findings"] == []
    assert data["counts"] == {"error": 0, "warning": 0, "info": 0}
    write(folder, {"web/app.ts": "x"})
    status, data = doctor(capsys)  # this folder, the conventional layout
    assert status == 0, data
    assert data["source"] == {"kind": "folder", "root": str(folder.resolve())}
    assert data["skipped"] == [
        {
            "check": "store-unreachable",
            "reason": "session stores belong to a middleware's configuration: use --config",
        }
    ]
    main(["doctor"])
    assert capsys.readouterr().out.splitlines()[-1] == "doctor: no problems found"


def test_an_empty_folder_has_no_memory(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, data = doctor(capsys, "--root", str(folder))
    assert status == 1
    assert found(data) == {("no-memory", "error", None)}


def test_layer_files_missing_unreadable_absent_and_empty(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(folder, {"AGENTS.md": "<!-- only a comment -->\n", "BINARY.md": b"\x00\xff\xfe binary"})
    name = config(
        folder,
        """
        memory = MemoryMiddleware(backend=disk, layers=[
            Layer("team", "/TEAM.md"),
            Layer("project", "/AGENTS.md"),
            Layer("odd", "/BINARY.md"),
            Layer("notes", "/MEMORY.md", writable=True),
        ])
        drop_in = MemoryMiddleware(backend=disk, sources=["/GONE.md", "/AGENTS.md"])
        """,
    )
    status, data = doctor(capsys, "--config", f"{name}:memory")
    assert status == 1
    assert found(data) == {
        ("layer-file", "error", "/TEAM.md"),
        ("layer-unreadable", "error", "/BINARY.md"),
        ("layer-absent", "info", "/MEMORY.md"),
        ("layer-empty", "warning", "/AGENTS.md"),
    }
    team = next(f for f in data["findings"] if f["path"] == "/TEAM.md")
    assert "the read-only layer 'team' has no file at this path" in team["message"]
    # deepagents' drop-in mode skips a missing source quietly: the doctor says so.
    status, data = doctor(capsys, "--config", f"{name}:drop_in")
    assert ("layer-file", "warning", "/GONE.md") in found(data)


def test_a_root_holding_none_of_the_files(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = config(
        folder,
        """
        memory = MemoryMiddleware(
            backend=FilesystemBackend(root_dir=HERE / "nowhere", virtual_mode=True),
            layers=[Layer("project", "/AGENTS.md")],
        )
        """,
    )
    (folder / "nowhere").mkdir()
    _status, data = doctor(capsys, "--config", f"{name}:memory")
    problem = next(f for f in data["findings"] if f["check"] == "memory-problem")
    assert "holds none of the configured memory files" in problem["message"]


def test_rules_folders_files_and_globs(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(
        folder,
        {
            "AGENTS.md": "# Project\n",
            "src/app.py": "x",
            "rules/python.md": "---\npaths: ['src/**/*.py']\n---\nRuff.",
            "rules/broken.md": "---\npaths: 'src/[abc'\n---\nx",
            "rules/owner.md": "---\nowner: me\n---\nBody.",
            "rules/dot.md": "---\npaths: ['./src/**']\n---\nNever.",
            "rules/half.md": "---\npaths: ['./lib/**', 'src/**']\n---\nSometimes.",
            "rules/web.md": "---\npaths: ['web/**/*.ts']\n---\nTS.",
            "rules/acme.md": "---\npaths: ['*acme*']\n---\nAcme.",
            "rules/disk.md": f"---\npaths: ['{folder.resolve()}/src/**']\n---\nHost path.",
        },
    )
    name = config(
        folder,
        """
        memory = MemoryMiddleware(backend=disk, layers=[Layer("project", "/AGENTS.md")],
                                  rules=["/rules", "/missing"])
        paths_only = MemoryMiddleware(backend=disk, layers=[Layer("project", "/AGENTS.md")],
                                      rules=["/rules"], match_keys=())
        with_context = MemoryMiddleware(backend=disk, layers=[Layer("project", "/AGENTS.md")],
                                        rules=["/rules"], match_keys=("entity_name",))
        """,
    )
    status, data = doctor(capsys, "--config", f"{name}:memory")
    assert status == 1
    assert found(data) == {
        ("rules-folder", "error", "/missing"),
        ("rule-invalid", "error", "/rules/broken.md"),
        ("rule-warning", "warning", "/rules/owner.md"),
        ("rule-never-applies", "error", "/rules/dot.md"),
        # Every dead glob is an error, as in `lint` (issue 26), even when others can match.
        ("rule-never-applies", "error", "/rules/half.md"),
        ("rule-never-applies", "error", "/rules/disk.md"),
        ("rule-matches-no-file", "warning", "/rules/web.md"),
        # `*acme*` cannot hold a path: it may be meant for a context string (match_keys).
        ("rule-matches-no-file", "warning", "/rules/acme.md"),
    }
    disk_rule = next(f for f in data["findings"] if f["path"] == "/rules/disk.md")
    assert "write '/src/**'" in disk_rule["message"]
    _status, with_context = doctor(capsys, "--config", f"{name}:with_context")
    assert ("rule-matches-no-file", "warning", "/rules/acme.md") not in found(with_context)
    assert ("rule-matches-no-file", "warning", "/rules/web.md") in found(with_context)


def test_a_cut_names_the_cap_that_made_it(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A layer's own `max_chars` or `max_tokens` is named, not the block's unused budget."""
    write(folder, {"AGENTS.md": "- a rule\n" * 400, "MEMORY.md": "- a lesson\n" * 400})
    name = config(
        folder,
        """
        memory = MemoryMiddleware(backend=disk, layers=[
            Layer("project", "/AGENTS.md", max_chars=600),
            Layer("notes", "/MEMORY.md", writable=True, max_tokens=100),
        ])
        """,
    )
    _status, data = doctor(capsys, "--config", f"{name}:memory")
    said = {f["path"]: f["message"] for f in data["findings"] if f["check"] == "budget-truncates"}
    assert "over the layer's max_chars=600" in said["/AGENTS.md"]
    assert "over the layer's max_tokens=100 (count_tokens_approximately)" in said["/MEMORY.md"]
    assert "max_chars=48,000" not in " ".join(said.values())


def test_budgets_that_cut_layers_and_rules(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        folder,
        {
            "TEAM.md": "# Team\n" + "- a long line of team memory, kept for reference\n" * 80,
            "AGENTS.md": "# Project\n" + "- Run `make test`.\n" * 90,
            "MEMORY.md": "".join(f"- {n}\n" for n in range(260)),
            "src/app.py": "x",
            "rules/always.md": "Always: " + "y" * 400,
            "rules/python.md": "---\npaths: ['src/**']\n---\nPython: " + "z" * 400,
        },
    )
    name = config(
        folder,
        """
        memory = MemoryMiddleware(backend=disk, layers=[
            Layer("team", "/TEAM.md"), Layer("project", "/AGENTS.md"),
            Layer("notes", "/MEMORY.md", writable=True),
        ], rules=["/rules"], max_chars=4000,
           options=MemoryOptions(max_rules_chars=450))
        """,
    )
    status, data = doctor(capsys, "--config", f"{name}:memory")
    assert status == 1
    checks = found(data)
    assert ("budget-omits", "error", "/TEAM.md") in checks
    assert ("budget-truncates", "warning", "/AGENTS.md") in checks
    assert ("budget-line-cap", "info", "/MEMORY.md") in checks
    assert ("budget-truncates-rule", "warning", "/rules/always.md") in checks
    # Only once the agent touched src/: the path rule no longer fits the rules budget.
    dropped = next(f for f in data["findings"] if f["path"] == "/rules/python.md")
    assert dropped["check"] == "budget-drops-rule"
    assert "when the agent has touched a file of every rule (/src/app.py)" in dropped["message"]
    # Given that call directly, it is reported without the "when".
    _status, data = doctor(capsys, "--config", f"{name}:memory", "--path", "/src/app.py")
    dropped = next(f for f in data["findings"] if f["path"] == "/rules/python.md")
    assert "when the agent" not in dropped["message"]


def test_unreachable_stores_are_reported_with_the_password_masked(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(folder, {"AGENTS.md": "# Project\n"})
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    name = config(
        folder,
        f"""
        redis = RedisSessionStore.from_url("redis://:hunter2pw@127.0.0.1:{port}/0")
        alone = MemoryMiddleware(backend=disk, layers=[Layer("p", "/AGENTS.md")],
                                 session_store=redis)
        hybrid = MemoryMiddleware(backend=disk, layers=[Layer("p", "/AGENTS.md")],
                                  session_store=HybridSessionStore(redis, InMemorySessionStore()))
        """,
    )
    status, data = doctor(capsys, "--config", f"{name}:alone")
    assert status == 1
    (finding,) = data["findings"]
    assert (finding["check"], finding["severity"]) == ("store-unreachable", "error")
    assert "unreachable" in finding["message"]
    assert "hunter2pw" not in json.dumps(data)
    assert ":***@127.0.0.1" in finding["path"]
    # With a thread the load reads the session store too: still reported once.
    _status, data = doctor(capsys, "--config", f"{name}:alone", "--thread", "t1")
    assert [f["check"] for f in data["findings"]] == ["store-unreachable"]
    # inspect lists the failed read as a problem, instead of "no session, no problems".
    assert main(["inspect", "--config", f"{name}:alone", "--thread", "t1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["session"] is None
    (problem,) = shown["problems"]
    assert problem["path"].startswith("RedisSessionStore(url='redis://:***@127.0.0.1")
    assert problem["reason"].startswith("session layer skipped: reading key 't1' failed: ")
    assert "unreachable" in problem["reason"]
    assert "hunter2pw" not in json.dumps(shown)
    _status, data = doctor(capsys, "--config", f"{name}:hybrid")
    (finding,) = data["findings"]
    assert finding["severity"] == "warning"
    assert "session store L1" in finding["message"]
    assert "reads go to L2" in finding["message"]
    status = main(
        ["doctor", "--store", f"postgresql://app:hunter2pw@127.0.0.1:{port}/x", "--namespace", "a"]
    )
    out = capsys.readouterr().out
    assert status == 1
    assert "[store-unreachable]" in out
    assert "hunter2pw" not in out
    # Nothing else could be checked: ignoring the one finding must not report a clean store.
    store = f"postgresql://app:hunter2pw@127.0.0.1:{port}/x"
    status = main(["doctor", "--store", store, "--namespace", "a", "--ignore", "store-unreachable"])
    out = capsys.readouterr().out
    assert status == 1
    assert "[store-unreachable]" in out
    # A configured agent's session store is one check among others: it can be ignored.
    status, data = doctor(capsys, "--config", f"{name}:alone", "--ignore", "store-unreachable")
    assert (status, data["findings"]) == (0, [])


def test_a_store_that_never_answers_does_not_hang_the_doctor() -> None:
    thawed = threading.Event()

    class Frozen:
        def get(self, key: str) -> None:
            thawed.wait()  # a frozen server: no answer until the test is done

    try:
        assert ping(Frozen(), timeout=0.2) == (
            "did not answer within 0.2 s (frozen, overloaded or cut off?)"
        )
    finally:
        thawed.set()


def test_strict_turns_problems_into_a_stopped_run(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = config(
        folder,
        'memory = MemoryMiddleware(backend=disk, layers=[Layer("p", "/AGENTS.md")], strict=True)\n',
    )
    status, data = doctor(capsys, "--config", f"{name}:memory")
    assert status == 1
    assert {f["check"] for f in data["findings"]} == {"layer-file", "strict", "memory-problem"}


def test_ignore_and_usage_errors(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(folder, {**PROJECT, "rules/web.md": "---\npaths: ['web/**']\n---\nx"})
    status, data = doctor(capsys, "--ignore", "rule-matches-no-file")
    assert status == 0, data
    assert main(["doctor", "--ignore", "no-such-check"]) == 2
    assert "no such check" in capsys.readouterr().err
    assert main(["doctor", "--root", str(folder / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_help_lists_every_check_and_the_exit_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "--help"]) == 0
    text = capsys.readouterr().out
    for code in CHECKS:
        assert code in text
    assert "Exit status: 0 when clean" in text
    assert '"findings": [{"check", "severity"' in text


def test_memory_an_agent_changed_and_the_guard_could_not_put_back(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose put-back failed (a full disk) recorded the file: the doctor reports it, as
    long as the file holds what the failed put-back left there."""
    from deepagents.backends import FilesystemBackend

    from layered_memory.core.unrestored import Unrestored, fingerprint, place_of, record

    write(folder, {"AGENTS.md": "", ".claude/rules/style.md": "Be brief.\n"})
    backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
    record(
        {
            place_of(backend, "/AGENTS.md"): Unrestored(
                "/AGENTS.md", fingerprint(""), "No space left on device"
            )
        }
    )
    status, data = doctor(capsys)
    assert status == 1
    (finding,) = [f for f in data["findings"] if f["check"] == "unrestored"]
    assert finding["path"] == "/AGENTS.md"
    assert "No space left on device" in finding["message"]
    write(folder, {"AGENTS.md": "Fixed by the user.\n"})
    _status, data = doctor(capsys)
    assert not [f for f in data["findings"] if f["check"] == "unrestored"]


@pytest.mark.parametrize("globs", [["./web/**"], ["./web/**", "src/**"]])
def test_lint_and_doctor_report_a_dead_glob_alike(
    folder: Path, capsys: pytest.CaptureFixture[str], globs: list[str]
) -> None:
    # Issue 26: `./web/**` was a warning in `lint` and an error in `doctor`.
    write(
        folder,
        {
            "AGENTS.md": "# Project\n",
            "src/app.py": "x",
            ".claude/rules/frontend.md": f"---\npaths: {globs}\n---\nTS.",
        },
    )
    _status, data = doctor(capsys)
    from_doctor = [
        (f["severity"], f["message"])
        for f in data["findings"]
        if f["check"] == "rule-never-applies"
    ]
    assert main(["lint", ".claude/rules", "--json"]) == 1
    from_lint = [
        (p["severity"], p["reason"])
        for p in json.loads(capsys.readouterr().out)["problems"]
        if "can never match" in p["reason"]
    ]
    assert from_lint == from_doctor
    assert [severity for severity, _ in from_lint] == ["error"]
