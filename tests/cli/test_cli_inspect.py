"""`layered-memory inspect`: layers, bars, rule explanations, problems and the exact block."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend, StoreBackend
from langgraph.store.postgres import PostgresStore

from cli_store_helpers import upload
from layered_memory import Layer
from layered_memory.cli import main
from layered_memory.cli._source import DEFAULT_RULE_FOLDERS
from layered_memory.core.assembler import MemoryAssembler
from postgres_schema import throwaway_schema

ANSI = re.compile(r"\x1b\[[0-9;]*m")
BEGIN = "-" * 30 + " begin memory block " + "-" * 30
END = "-" * 31 + " end memory block " + "-" * 31

DEMO = {
    "AGENTS.md": "# Project\n<!-- note for maintainers -->\n- Run `make test`.\n- Use Decimal.\n",
    "MEMORY.md": "# Memory\n\n## Recent Insights\n- 2025-06-01: [acme_corp] Bill monthly.\n",
    ".claude/rules/lang/python.md": "---\nname: python-style\npaths: ['**/*.py']\n---\nUse ruff.",
    ".claude/rules/acme.mdc": "---\nglobs: '*acme*'\nalwaysApply: false\n---\nAcme bills in EUR.",
    ".claude/rules/web.md": "---\npaths: ['web/**']\n---\nTypeScript strict.",
    ".claude/rules/deploy.mdc": "---\ndescription: How to deploy\nalwaysApply: false\n---\nX.",
    ".claude/rules/broken.md": "---\npaths: 'src/[abc'\n---\nBroken.",
    "rules/python.md": "---\nname: python-style\npaths: ['src/**/*.py']\n---\nTeam PEP 8.",
}


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    write(root, dict(DEMO))
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["inspect", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def block_of(out: str) -> str:
    """The text printed between the block's delimiter lines."""
    start = out.index(BEGIN + "\n") + len(BEGIN) + 1
    end = out.index("\n" + END + "\n")
    return out[start:end]


def expected_block(root: Path, keys: list[str], **options: object) -> str:
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    assembler = MemoryAssembler(backend=backend, **options)  # type: ignore[arg-type]
    return assembler.render(assembler.load(), keys=keys)


DEFAULT_OPTIONS: dict[str, object] = {
    "layers": [Layer("project", "/AGENTS.md"), Layer("memory", "/MEMORY.md", writable=True)],
    "rules": ["/.claude/rules", "/rules"],
}


def test_default_layers_bars_and_files(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "--root", str(demo))
    assert (status, err) == (0, "")
    lines = out.splitlines()
    project = next(line for line in lines if line.startswith("  project (read-only)"))
    memory = next(line for line in lines if line.startswith("  memory (writable)"))
    for row in (project, memory):
        assert re.search(r" \[#+\.*\] +\d+\.\d%$", row), row
        assert len(re.search(r"\[([#.]+)\]", row).group(1)) == 20  # type: ignore[union-attr]
    assert "    /AGENTS.md: 74 chars, 4 lines; shown in full" in lines
    assert "    /MEMORY.md: 69 chars, 4 lines; shown in full" in lines
    assert any(line.startswith("  total block") for line in lines)
    assert "  tokens are approximate: characters / 4" in lines
    # the per-layer numbers are measured on the very block that is printed
    block = block_of(out)
    element = block[block.index('<layer name="project"') : block.index("</layer>") + 8]
    assert f" {len(element):>8,} {(len(element) + 3) // 4:>8,}  [" in project


def test_block_is_exactly_what_the_assembler_renders(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = ["src/billing/app.py", "acme_corp"]
    status, out, _ = run(capsys, "--root", str(demo), "--path", keys[0], "--entity", keys[1])
    assert status == 0
    assert block_of(out) == expected_block(demo, keys, **DEFAULT_OPTIONS)
    status, out, _ = run(
        capsys, "--root", str(demo), "--path", keys[0], "--entity", keys[1], "--json"
    )
    assert json.loads(out)["block"] == expected_block(demo, keys, **DEFAULT_OPTIONS)


def test_rules_say_which_key_matched_which_glob_and_why_others_were_skipped(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(
        capsys, "--root", str(demo), "--path", "src/billing/app.py", "--entity", "acme_corp"
    )
    assert status == 0
    rules = out[out.index("RULES") : out.index("PROBLEMS")]
    assert "  /.claude/rules, /rules\n" in rules
    assert "  match keys: 'src/billing/app.py', 'acme_corp'\n" in rules
    assert (
        "  applied   acme  /.claude/rules/acme.mdc\n"
        "            key 'acme_corp' matched glob '*acme*' (as '**/*acme*')\n"
    ) in rules
    assert (
        "  applied   python-style  /rules/python.md\n"
        "            key 'src/billing/app.py' matched glob 'src/**/*.py'\n"
    ) in rules
    assert (
        "  skipped   web  /.claude/rules/web.md\n            no key matched any of ['web/**']"
        in rules
    )
    assert "  listed    deploy  /.claude/rules/deploy.mdc\n" in rules
    assert "  replaced  python-style  /.claude/rules/lang/python.md\n" in rules
    # its one glob is invalid: dropped, so the rule never applies (lint reports the glob)
    assert "  skipped   broken  /.claude/rules/broken.md\n" in rules
    # an absolute path below --root is the path the agent's tools would name
    _, out, _ = run(capsys, "--root", str(demo), "--path", str(demo / "src/x/app.py"), "--json")
    hits = [d for d in json.loads(out)["rules"]["decisions"] if d["status"] == "applied"]
    assert [(d["key"], d["glob"]) for d in hits] == [("/src/x/app.py", "src/**/*.py")]
    # an entity alone matches only the entity rule
    _, out, _ = run(capsys, "--root", str(demo), "--entity", "acme_corp", "--json")
    decisions = {d["path"]: d for d in json.loads(out)["rules"]["decisions"]}
    acme = decisions["/.claude/rules/acme.mdc"]
    assert (acme["status"], acme["key"], acme["glob"]) == ("applied", "acme_corp", "*acme*")
    python = decisions["/rules/python.md"]
    assert (python["status"], python["mode"]) == ("skipped", "paths")
    assert python["reason"] == "no key matched any of ['src/**/*.py']"
    assert decisions["/.claude/rules/lang/python.md"]["status"] == "replaced"


def test_problems_name_each_skipped_file_and_reason(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(demo, {"AGENTS.md": b"caf\xe9\n", ".claude/rules/odd.md": "---\nowner: me\n---\nx"})
    status, out, err = run(capsys, "--root", str(demo))
    assert (status, err) == (0, "")  # problems are reported, never logged to stderr
    problems = out[out.index("PROBLEMS") : out.index("MEMORY BLOCK")]
    assert "  /AGENTS.md: error: not valid UTF-8 (byte 3)\n" in problems
    assert "  /.claude/rules/odd.md: warning: unknown field 'owner' (ignored)\n" in problems
    assert "/.claude/rules/broken.md: error: invalid glob 'src/[abc' in paths" in problems
    assert "    /AGENTS.md: skipped: not valid UTF-8 (byte 3)" in out


def test_explicit_layers_and_a_tight_budget_show_what_was_cut(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(demo, {"team/AGENTS.md": "team rule\n" * 300})
    args = ["--root", str(demo), "--rules", ".claude/rules", "--max-chars", "2500"]
    args += ["--layer", "project=AGENTS.md", "--layer", "team=team/AGENTS.md"]
    args += ["--layer", "notes=/MEMORY.md:rw", "--layer", "notes=/NOTES.md:rw"]
    status, out, _ = run(capsys, *args, "--json")
    assert status == 0
    data = json.loads(out)
    layers = {layer["name"]: layer for layer in data["layers"]}
    assert [layer["name"] for layer in data["layers"]] == ["project", "team", "notes"]
    assert layers["notes"]["writable"] is True
    assert layers["notes"]["paths"] == ["/MEMORY.md", "/NOTES.md"]
    files = {f["path"]: f for layer in data["layers"] for f in layer["files"]}
    assert files["/team/AGENTS.md"]["shown"] in ("truncated", "omitted")
    assert files["/NOTES.md"]["status"] == "missing"
    assert files["/NOTES.md"]["shown"] == "empty"
    assert data["rules"]["folders"] == ["/.claude/rules"]
    assert data["budget"]["used_chars"] == len(data["block"]) <= 2500
    measured = sum(layer["block_chars"] for layer in data["layers"])
    assert measured + data["rules"]["block_chars"] + data["overhead"]["chars"] == len(data["block"])
    layers_spec = [
        Layer("project", "/AGENTS.md"),
        Layer("team", "/team/AGENTS.md"),
        Layer("notes", ["/MEMORY.md", "/NOTES.md"], writable=True),
    ]
    assert data["block"] == expected_block(
        demo, [], layers=layers_spec, rules=["/.claude/rules"], max_chars=2500
    )
    _, text, _ = run(capsys, *args)
    assert "    /NOTES.md: missing; the block says where to write" in text
    assert "/team/AGENTS.md: 3,000 chars, 300 lines; " in text


def test_json_schema_is_stable(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--root", str(demo), "--path", "src/a.py", "--json")
    assert status == 0
    data = json.loads(out)
    assert list(data) == [
        "version", "source", "keys", "budget", "layers", "rules", "extras", "session",
        "overhead", "problems", "learned", "memory_report", "block",
    ]  # fmt: skip
    assert data["session"] is None  # no session store: no session layer
    assert data["learned"] == []  # no consolidation wrote here
    assert data["extras"] == []  # no nested memory, no @imports
    assert data["version"] == 1
    assert data["source"] == {"kind": "folder", "root": str(demo.resolve())}
    assert data["keys"] == ["src/a.py"]
    assert set(data["budget"]) == {
        "max_chars", "max_rules_chars", "used_chars", "used_tokens", "share", "max_tokens",
    }  # fmt: skip
    assert data["budget"]["max_chars"] == 48_000
    layer = data["layers"][0]
    assert set(layer) == {
        "name", "writable", "paths", "chars", "tokens", "block_chars", "block_tokens", "share",
        "files",
    }  # fmt: skip
    assert set(layer["files"][0]) == {
        "path", "status", "chars", "tokens", "lines", "reason", "shown", "cut_by_lines",
        "block_chars",
    }  # fmt: skip
    assert set(data["rules"]) == {"folders", "block_chars", "block_tokens", "share", "decisions"}
    assert set(data["rules"]["decisions"][0]) == {
        "name", "path", "status", "mode", "reason", "key", "glob",
    }  # fmt: skip
    assert set(data["overhead"]) == {"chars", "tokens", "share"}
    assert set(data["problems"][0]) == {"path", "severity", "reason"}
    assert layer["tokens"] == (layer["chars"] + 3) // 4
    assert layer["share"] == round(layer["block_chars"] / 48_000, 4)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_tty_and_never_with_no_color(
    demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, plain, _ = run(capsys, "--root", str(demo), "--entity", "acme_corp")
    assert not ANSI.search(plain)  # captured stdout is not a terminal

    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    assert main(["inspect", "--root", str(demo), "--entity", "acme_corp"]) == 0
    coloured = tty.getvalue()
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == plain
    assert block_of(ANSI.sub("", coloured)) == block_of(plain)

    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    assert main(["inspect", "--root", str(demo), "--entity", "acme_corp"]) == 0
    assert tty.getvalue() == plain


def test_human_output_fits_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = "a-rather-long-folder-name/" * 4
    root = tmp_path / ("long-root-" * 6)
    write(root, dict(DEMO))
    write(
        root,
        {
            f"{deep}AGENTS.md": "x\n",
            f"rules/{deep}r.md": "---\npaths: ['" + "z" * 90 + "']\n---\n.",
        },
    )
    name = "a-layer-name-that-goes-on-and-on-and-on"
    args = ["--root", str(root), "--layer", f"{name}=/{deep}AGENTS.md", "--rules", "rules"]
    status, out, _ = run(capsys, *args, "--path", "src/" + "q" * 100 + ".py")
    assert status == 0
    before, after = out.split(BEGIN + "\n")
    outside = [*before.splitlines(), BEGIN, *after[after.index(END) :].splitlines()]
    too_wide = [line for line in outside if len(line) > 80]
    assert not too_wide


def test_usage_errors_are_one_line_and_exit_2(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        ("--layer", "nopath"): "expected NAME=PATH",
        ("--layer", "a=/A.md:rw", "--layer", "a=/B.md"): "disagree on ':rw'",
        ("--max-chars", "10"): "max_chars=10 is too small",
        ("--max-chars", "0"): "max_chars=0 is too small",  # not taken for "not given"
        ("--namespace", "a/b"): "--namespace goes with --store",
    }
    for extra, message in cases.items():
        status, out, err = run(capsys, "--root", str(demo), *extra)
        assert (status, out) == (2, ""), extra
        assert err.startswith("layered-memory inspect: "), err
        assert message in err, err
        assert len(err.splitlines()) == 1
    for argv in ([], ["--root", str(demo), "--store", "postgresql://x@127.0.0.1:1/db"]):
        status, _, err = run(capsys, *argv)  # argparse: exactly one of --root / --store
        assert status == 2
        assert "--root" in err
    status, _, err = run(capsys, "--root", str(demo / "nope"))
    assert status == 2
    assert "no such folder" in err
    status, _, err = run(capsys, "--store", "postgresql://x@127.0.0.1:1/db")
    assert status == 2
    assert "--store needs --namespace" in err


def test_unreachable_store_names_the_url_without_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql://memory:s3cr3t-pw@127.0.0.1:1/test"
    status, out, err = run(capsys, "--store", url, "--namespace", "org/acme")
    assert (status, out) == (2, "")
    assert "s3cr3t-pw" not in err
    assert err.startswith(
        "layered-memory inspect: cannot use the store at postgresql://memory:***@127.0.0.1:1/test: "
    )
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err


def test_console_script_runs(demo: Path) -> None:
    script = Path(sys.executable).parent / "layered-memory"
    result = subprocess.run(
        [str(script), "inspect", "--root", str(demo), "--entity", "acme_corp", "--json"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout)["block"] == expected_block(
        demo, ["acme_corp"], **DEFAULT_OPTIONS
    )


# -- store mode (real PostgreSQL) ---------------------------------------------------------------


@pytest.fixture
def store_url(postgres_url: str) -> Iterator[str]:
    with throwaway_schema(postgres_url) as schema:
        url = schema.url
        yield url


@pytest.mark.postgres
def test_store_mode_shows_the_block_the_store_backed_agent_gets(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = ("org", "acme", "billing")
    upload(store_url, namespace, {f"/{k}": v.encode() for k, v in DEMO.items()})
    upload(store_url, ("org", "acme", "billing", "child"), {"/AGENTS.md": b"not this one"})
    args = ["--store", store_url, "--namespace", "org/acme/billing", "--entity", "acme_corp"]
    status, out, err = run(capsys, *args)
    assert (status, err) == (0, "")
    assert "namespace org/acme/billing (8 items)" in " ".join(out.split())
    assert "    /AGENTS.md: 74 chars, 4 lines; shown in full" in out
    assert "  applied   acme  /.claude/rules/acme.mdc\n" in out
    with PostgresStore.from_conn_string(store_url) as store:
        backend = StoreBackend(namespace=lambda _rt: namespace, store=store)
        assembler = MemoryAssembler(backend=backend, **DEFAULT_OPTIONS)  # type: ignore[arg-type]
        expected = assembler.render(assembler.load(), keys=["acme_corp"])
    assert block_of(out) == expected
    _, out, _ = run(capsys, *args, "--json")
    data = json.loads(out)
    assert data["block"] == expected
    assert data["source"]["kind"] == "store"
    assert data["source"]["namespace"] == ["org", "acme", "billing"]


@pytest.mark.postgres
def test_store_never_set_up_is_a_clear_error(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "--store", store_url, "--namespace", "org/acme")
    assert (status, out) == (2, "")
    assert "has no memory tables yet (run `layered-memory sync push` first)" in err
    assert len(err.splitlines()) == 1


def test_help_documents_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "project = /AGENTS.md (read-only), memory = /MEMORY.md (writable)" in text
    assert ", ".join(DEFAULT_RULE_FOLDERS) in text
    assert "(chars / 4)" in text
    assert main(["sync", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ".agents/rules/, .claude/rules/ and .cursor/rules/" in text
    assert "--delete is refused when the source side has no files" in text


def test_a_folder_layer_lists_the_files_it_loaded(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(demo, {"memories/b.md": "second\n", "memories/a.md": "first\n", "memories/x.txt": "no"})
    args = ["--root", str(demo), "--layer", "project=AGENTS.md", "--layer", "memories=memories/:rw"]
    status, out, _ = run(capsys, *args, "--json")
    assert status == 0
    layers = {layer["name"]: layer for layer in json.loads(out)["layers"]}
    assert layers["memories"]["paths"] == ["/memories/"]
    assert [f["path"] for f in layers["memories"]["files"]] == ["/memories/a.md", "/memories/b.md"]
