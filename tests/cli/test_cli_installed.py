"""Every subcommand run as a user runs it: the installed console script, in an empty folder
with no repository files around (`installed_cli` in conftest.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_config_helpers import write, write_project
from cli_installed_helpers import InstalledCli

from postgres_schema import throwaway_schema

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_comes_from_the_wheel(installed_cli: InstalledCli, bare_folder: Path) -> None:
    found = subprocess.run(
        [str(installed_cli.python), "-c", "import layered_memory; print(layered_memory.__file__)"],
        cwd=bare_folder,
        env=installed_cli.env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert Path(found).is_relative_to(installed_cli.venv)
    assert not Path(found).is_relative_to(ROOT)
    result = installed_cli.run(["--help"], cwd=bare_folder)
    assert result.returncode == 0
    for name in ("demo", "doctor", "inspect", "lint", "review", "sync", "graph", "mcp", "tiers"):
        assert name in result.stdout


def test_demo_runs_anywhere(installed_cli: InstalledCli, bare_folder: Path) -> None:
    result = installed_cli.run(["demo"], cwd=bare_folder)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Memory files in ")
    assert lines[0].endswith(":  AGENTS.md (read-only layer), MEMORY.md (writable layer)")
    assert lines[1:] == [
        "",
        "[invocation 1] user: Remember that I prefer short answers. How do I run the tests?",
        "  agent called edit_file on /MEMORY.md",
        "  agent: Run `make test`. Noted: you like short answers.",
        "  model call 1: MEMORY.md edit in its system prompt: no",
        "  model call 2: MEMORY.md edit in its system prompt: yes",
        "  MEMORY.md on disk now: '# Memory\\n- The user prefers short answers.\\n'",
        "",
        "[between invocations] AGENTS.md edited on disk: test command is now `make check`",
        "[invocation 2, same thread] user: Which command runs the tests now?",
        "  model's system prompt has the new AGENTS.md: yes",
        "  agent: Run `make check`.",
        "",
        "Injected memory block: 1503 chars (budget 48000)",
    ]
    assert list(bare_folder.iterdir()) == []  # a temporary folder, removed afterwards


def test_inspect_and_doctor_with_a_config_module(
    installed_cli: InstalledCli, bare_folder: Path
) -> None:
    name = write_project(bare_folder, module="agent_setup")
    result = installed_cli.run(
        [
            "inspect",
            "--config",
            f"{name}:agent",
            "--message",
            "Bill ACME",
            "--path",
            "/src/app.py",
            "--thread",
            "t1",
            "--json",
        ],
        cwd=bare_folder,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "configuring the agent\n"
    data = json.loads(result.stdout)
    assert data["keys"] == ["/src/app.py", "acme_corp"]
    assert "Acme is billed in EUR." in data["block"]
    assert "Use ruff and mypy --strict." in data["block"]
    result = installed_cli.run(["doctor", "--config", f"{name}:agent"], cwd=bare_folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "doctor: no problems found"


def test_doctor_and_lint_find_the_problems(installed_cli: InstalledCli, bare_folder: Path) -> None:
    write(
        bare_folder,
        {
            "AGENTS.md": "# Project\n",
            ".claude/rules/dot.md": "---\npaths: ['./src/**']\n---\nNever applies.",
            ".claude/rules/bad.md": "---\npaths: 3\n---\nx",
        },
    )
    result = installed_cli.run(["doctor", "--json"], cwd=bare_folder)
    assert result.returncode == 1
    findings = {(f["check"], f["path"]) for f in json.loads(result.stdout)["findings"]}
    assert findings == {
        ("rule-never-applies", "/.claude/rules/dot.md"),
        ("rule-invalid", "/.claude/rules/bad.md"),
    }
    result = installed_cli.run(["lint", "AGENTS.md", ".claude/rules"], cwd=bare_folder)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == (
        "2 rule files: 0 valid, 2 invalid; 1 memory file: 1 ok, 0 with errors; 2 errors, 0 warnings"
    )


def test_graph(installed_cli: InstalledCli, bare_folder: Path) -> None:
    lines = [
        {"type": "entity", "name": "Acme", "entityType": "company", "observations": ["EUR"]},
        {"type": "entity", "name": "Jane", "entityType": "person", "observations": []},
        {"type": "relation", "from": "Jane", "to": "Acme", "relationType": "works_at"},
    ]
    write(bare_folder, {"memory.jsonl": "\n".join(json.dumps(line) for line in lines)})
    result = installed_cli.run(
        ["graph", "memory.jsonl", "--message", "How is Jane?", "--json"], cwd=bare_folder
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["entities"], data["relations"]) == (2, 1)
    assert "Jane" in data["focus"]["names"]


def test_review(installed_cli: InstalledCli, bare_folder: Path) -> None:
    # Queued by the package (sealed with the key in this session's state folder, which the
    # installed CLI shares through the environment): a hand-written queue is never trusted.
    from deepagents.backends import FilesystemBackend

    from layered_memory import MemoryConsolidator
    from layered_memory.testing import ScriptedChatModel, tool_call

    write(bare_folder, {"MEMORY.md": "# Memory\n"})
    model = ScriptedChatModel(
        script=[tool_call("update_memory", operations=[{"op": "add", "text": "Builds use uv."}])]
    )
    backend = FilesystemBackend(root_dir=bare_folder, virtual_mode=True)
    MemoryConsolidator(model, backend=backend, review=True).consolidate(
        [{"role": "user", "content": "a run"}], thread_id="t1"
    )
    listed = installed_cli.run(["review", "--json"], cwd=bare_folder)
    assert listed.returncode == 0, listed.stderr
    (change,) = json.loads(listed.stdout)["pending"]
    result = installed_cli.run(["review", "approve", change["id"]], cwd=bare_folder)
    assert result.returncode == 0, result.stdout + result.stderr
    memory = (bare_folder / "MEMORY.md").read_text()
    assert "## Learned\n\n- Builds use uv. <!-- learned id=" in memory
    result = installed_cli.run(["inspect", "--root", ".", "--json"], cwd=bare_folder)
    assert [entry["text"] for entry in json.loads(result.stdout)["learned"]] == ["Builds use uv."]


async def test_mcp_serves_the_graph(installed_cli: InstalledCli, bare_folder: Path) -> None:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=str(installed_cli.script),
        args=["mcp", "--graph", "memory.jsonl"],
        env=installed_cli.env(),
        cwd=bare_folder,
    )
    entity = {"name": "Jane", "entityType": "person", "observations": ["Head of IT"]}
    async with Client(server, mode="legacy", read_timeout_seconds=60) as client:
        assert len((await client.list_tools()).tools) == 9
        created = await client.call_tool("create_entities", {"entities": [entity]})
    assert not created.is_error
    assert json.loads((bare_folder / "memory.jsonl").read_text(encoding="utf-8"))["name"] == "Jane"


@pytest.mark.postgres
def test_sync_inspect_and_tiers_against_a_store(
    installed_cli: InstalledCli, bare_folder: Path, postgres_url: str
) -> None:
    write(bare_folder, {"memory/AGENTS.md": "# Deployed memory\n", "memory/.env": "SECRET=1"})
    with throwaway_schema(postgres_url) as schema:
        url = schema.url
        store = ["--store", url, "--namespace", "org/acme"]
        result = installed_cli.run(
            ["sync", "push", *store, "--root", "memory", "--json"], cwd=bare_folder
        )
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert [(a["key"], a["status"]) for a in data["actions"]] == [("/AGENTS.md", "added")]
        assert data["counts"]["added"] == 1
        result = installed_cli.run(["inspect", *store, "--json"], cwd=bare_folder)
        assert result.returncode == 0, result.stderr
        assert "# Deployed memory" in json.loads(result.stdout)["block"]
        result = installed_cli.run(
            ["tiers", "--user", "ada", "--store", url, "--json"], cwd=bare_folder
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["short_term"] == []


def documented_local_hook() -> dict:
    """The `.pre-commit-config.yaml` with `repo: local` of the CLI docs page."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in page.split("```yaml\n")[1:]]
    (block,) = [block for block in blocks if "repo: local" in block]
    config: dict = yaml.safe_load(block)
    return config


def test_the_pre_commit_hook(
    installed_cli: InstalledCli, bare_folder: Path, tmp_path: Path
) -> None:
    """pre-commit runs the hook of `.pre-commit-hooks.yaml` on the files of a commit.

    The manifest is validated by pre-commit itself; the hook then runs as the docs' local
    hook, with the manifest's own `entry`, `files` and `types`, against the installed console
    script (language `unsupported`: pre-commit's `python` language would pip-install this
    repository and its dependencies into an environment of its own, which needs the network).
    """
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    assert hook["id"] == "layered-memory-lint"
    assert hook["language"] == "python"
    git = shutil.which("git")
    if git is None:  # pragma: no cover - git is on every developer machine and in CI
        pytest.skip("git is not installed")
    # The docs' local hook (their way to run the hook before a release is tagged): the
    # manifest's own `entry`, `files` and `types`.
    local = documented_local_hook()
    (documented,) = local["repos"][0]["hooks"]
    for field in ("id", "name", "entry", "files", "types"):
        assert documented[field] == hook[field], field
    write(
        bare_folder,
        {
            ".pre-commit-config.yaml": yaml.safe_dump(local),
            "AGENTS.md": "# Project\n",
            "docs/MEMORY.md": "# Memory\n",
            ".cursor/rules/style.mdc": "---\nglobs: '*.ts'\n---\nStrict.",
            "README.md": "---\npaths: 3\n---\nnot a rule: never linted",
            "src/app.py": "x = 1\n",
        },
    )
    env = installed_cli.env({"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")})

    def git_run(*args: str) -> None:
        subprocess.run(
            [git, *args], cwd=bare_folder, env=env, check=True, capture_output=True, timeout=60
        )

    git_run("init", "-q")
    git_run("add", ".")

    def pre_commit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files"],
            cwd=bare_folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    result = pre_commit()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout
    write(bare_folder, {".claude/rules/broken.md": "---\npaths: 'src/[abc'\n---\nx"})
    git_run("add", ".")
    result = pre_commit()
    assert result.returncode == 1
    assert ".claude/rules/broken.md: error: invalid glob 'src/[abc' in paths" in result.stdout
    assert "README.md" not in result.stdout
