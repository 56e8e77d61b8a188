"""`--config module:attribute`: the user's own middleware, found wherever their agent keeps it,
rendering exactly what the model would get, without running anything."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from cli_config_helpers import write, write_project

from layered_memory.cli import main


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A user's project (the working folder) and the name of its configuration module."""
    root = tmp_path / "project"
    root.mkdir()
    name = write_project(root)
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", list(sys.path))  # --config adds the folder; undo it
    return root, name


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def inspect_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    status, out, err = run(capsys, "inspect", *args, "--json")
    assert status == 0, err
    return json.loads(out)


def module(root: Path, source: str) -> str:
    name = f"user_config_{uuid.uuid4().hex[:10]}"
    write(root, {f"{name}.py": textwrap.dedent(source)})
    return name


CALL = ("--message", "Please bill ACME", "--path", "/src/app.py", "--thread", "t1")


@pytest.mark.parametrize(
    ("attribute", "found"),
    [
        ("agent", "the compiled agent's middleware"),
        ("plain_agent", "the compiled agent's middleware"),
        ("middleware", "item 1 of the list"),
        ("make_agent", "the compiled agent's middleware, returned by {name}:make_agent()"),
        ("memory", "the attribute itself"),
    ],
)
def test_every_shape_leads_to_the_agents_middleware(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str], attribute: str, found: str
) -> None:
    root, name = project
    data = inspect_json(capsys, "--config", f"{name}:{attribute}", *CALL)
    source = data["source"]
    assert source["kind"] == "config"
    assert source["found"] == found.format(name=name)
    assert (source["module"], source["attribute"]) == (name, attribute)
    assert source["backend"] == f"FilesystemBackend at {root.resolve()} (virtual paths)"
    assert source["input"] == {
        "message": "Please bill ACME",
        "paths": ["/src/app.py"],
        "context": {},
        "thread_id": "t1",
    }
    # The touched path, then the entity the match_keys callable read from the message.
    assert data["keys"] == ["/src/app.py", "acme_corp"]
    applied = {d["name"] for d in data["rules"]["decisions"] if d["status"] == "applied"}
    assert applied == {"python", "acme"}
    block = data["block"]
    assert "Use ruff and mypy --strict." in block
    assert "Acme is billed in EUR." in block
    assert '<layer name="session" key="t1"' in block
    assert "T-42" in block
    assert data["session"]["key"] == "t1"
    assert data["session"]["chars"] > 0


def test_paths_are_named_as_the_agents_file_tools_name_them(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, name = project
    for given in ("src/app.py", "./src/app.py", f"{root.resolve()}/src/app.py", "/src/app.py"):
        data = inspect_json(capsys, "--config", f"{name}:agent", "--path", given)
        assert data["keys"] == ["/src/app.py"], given
        assert data["source"]["input"]["paths"] == ["/src/app.py"]


def test_a_file_path_works_like_a_module_name(
    project: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, name = project
    by_name = inspect_json(capsys, "--config", f"{name}:agent", *CALL)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the file is found by its path, not from the working folder
    by_file = inspect_json(capsys, "--config", f"{root / name}.py:agent", *CALL)
    assert by_file["block"] == by_name["block"]
    relative = inspect_json(capsys, "--config", f"../project/{name}.py:agent", *CALL)
    assert relative["block"] == by_name["block"]


def test_nothing_runs_and_prints_stay_off_stdout(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's model raises, a middleware raises before the agent and around the model
    call, a hook raises on PIPELINE_START: inspect, doctor and lint still report."""
    _root, name = project
    for attribute in ("agent", "hooked"):
        status, out, err = run(
            capsys, "inspect", "--config", f"{name}:{attribute}", *CALL, "--json"
        )
        assert status == 0, err
        json.loads(out)  # the module's print went to stderr
        assert "configuring the agent" in err or attribute == "hooked"
        assert "was called" not in err
        assert "was run" not in err
        assert "hook fired" not in err
    status, out, err = run(capsys, "doctor", "--config", f"{name}:agent", *CALL, "--json")
    assert json.loads(out)["ok"] is True, out
    assert status == 0
    status, out, err = run(capsys, "lint", "--config", f"{name}:agent", "--json")
    assert status == 0, out
    assert json.loads(out)["counts"] == {"errors": 0, "warnings": 0}


def test_the_block_is_the_one_the_model_receives(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Run the very middleware in a real deep agent and compare the model's system prompt."""
    from deepagents import create_deep_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from layered_memory.testing import PromptRecorder, ScriptedChatModel, tool_call

    _root, name = project
    data = inspect_json(
        capsys,
        "--config",
        f"{name}:agent",
        *CALL,
        "--context",
        "entity_name=initech",
    )
    memory = sys.modules[name].memory
    model = ScriptedChatModel(script=[tool_call("read_file", file_path="/src/app.py"), "done"])
    agent = create_deep_agent(
        model=model,
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
        checkpointer=InMemorySaver(),
    )
    recorder = PromptRecorder()
    agent.invoke(
        {"messages": [{"role": "user", "content": "Please bill ACME"}]},
        {"configurable": {"thread_id": "t1"}, "callbacks": [recorder]},
        context={"entity_name": "initech"},
    )
    # The second model call comes after the agent read /src/app.py: the state of the call
    # that --path /src/app.py describes.
    assert recorder.system_prompts[1].endswith(data["block"])
    assert data["keys"] == ["/src/app.py", "acme_corp", "initech"]


def test_a_backend_factory_gets_the_context(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = project
    write(root, {"tenants/a/AGENTS.md": "Tenant A rules.", "tenants/b/AGENTS.md": "Tenant B."})
    name = module(
        root,
        """
        from pathlib import Path
        from deepagents.backends import FilesystemBackend
        from layered_memory import Layer, MemoryMiddleware

        HERE = Path(__file__).resolve().parent

        def tenant_backend(runtime):
            return FilesystemBackend(
                root_dir=HERE / "tenants" / runtime.context.tenant, virtual_mode=True
            )

        memory = MemoryMiddleware(backend=tenant_backend, layers=[Layer("p", "/AGENTS.md")])
        """,
    )
    first = inspect_json(capsys, "--config", f"{name}:memory", "--context", "tenant=a")
    second = inspect_json(capsys, "--config", f"{name}:memory", "--context", "tenant=b")
    assert "Tenant A rules." in first["block"]
    assert "Tenant B." not in first["block"]
    assert "Tenant B." in second["block"]
    assert first["source"]["backend"].endswith(f"{root.resolve()}/tenants/a (virtual paths)")
    status, _out, err = run(capsys, "inspect", "--config", f"{name}:memory")
    assert status == 2
    assert "the backend factory raised AttributeError" in err


def test_system_prompt_none_injects_nothing(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = project
    name = module(
        root,
        """
        from deepagents.backends import FilesystemBackend
        from layered_memory import Layer, MemoryMiddleware

        memory = MemoryMiddleware(
            backend=FilesystemBackend(root_dir=".", virtual_mode=True),
            layers=[Layer("p", "/AGENTS.md")],
            system_prompt=None,
        )
        """,
    )
    data = inspect_json(capsys, "--config", f"{name}:memory")
    assert data["source"]["injected"] is False
    assert data["block"] == ""
    status, out, _ = run(capsys, "inspect", "--config", f"{name}:memory")
    assert status == 0
    assert "system_prompt=None: the middleware injects no block" in out
    status, out, _ = run(capsys, "doctor", "--config", f"{name}:memory")
    assert status == 0
    assert "[not-injected]" in out


BROKEN_MODULES = {
    "raises": 'import os\n\n\nraise RuntimeError("cannot reach postgresql://app:s3cretpw@db/x")\n',
    "builtin": (
        "from deepagents import create_deep_agent\n"
        "from deepagents.backends import FilesystemBackend\n"
        "from layered_memory.testing import ScriptedChatModel\n"
        "agent = create_deep_agent(model=ScriptedChatModel(script=[]), memory=['/AGENTS.md'],\n"
        "    backend=FilesystemBackend(root_dir='.', virtual_mode=True))\n"
    ),
    "two": (
        "from deepagents.backends import FilesystemBackend\n"
        "from layered_memory import Layer, MemoryMiddleware\n"
        "def make():\n"
        "    return MemoryMiddleware(backend=FilesystemBackend(root_dir='.', virtual_mode=True),\n"
        "                            layers=[Layer('p', '/AGENTS.md')])\n"
        "both = [make(), make()]\n"
        "def factory():\n"
        "    raise KeyError('DATABASE_URL')\n"
    ),
    # A lazy container and a module `__getattr__`, as settings objects of web frameworks do.
    "lazy": (
        "import functools, os, sys\n"
        "class Container:\n"
        "    @functools.cached_property\n"
        "    def agent(self):\n"
        "        return os.environ['LM_TEST_UNSET_API_KEY']\n"
        "container = Container()\n"
        "def __getattr__(name):\n"
        "    raise RuntimeError('cannot reach postgresql://app:s3cretpw@db/prod')\n"
    ),
    "proxy": (
        "class Settings:\n"
        "    def __getattr__(self, name):\n"
        "        raise RuntimeError('settings are not configured')\n"
        "settings = Settings()\n"
    ),
    "exits": (
        "import sys\ndef quietly():\n    sys.exit(0)\ndef loudly():\n    sys.exit('no config')\n"
    ),
}


@pytest.mark.parametrize(
    ("module_key", "attribute", "expected"),
    [
        (None, "nothing", ["has no attribute 'nothing'", "it has: agent (a compiled agent)"]),
        (None, "not_memory", ["{name}:not_memory is a {name}.Tripwire", "expected a Memory"]),
        (None, "HERE", ["{name}:HERE is a pathlib.PosixPath"]),
        (None, "Tripwire", ["is the class Tripwire, not an instance"]),
        (None, "fail_hook", ["{name}:fail_hook is a callable that needs arguments"]),
        (None, "memory.assembler", ["is a layered_memory.core.assembler.MemoryAssembler"]),
        ("raises", "x", ["importing module '{name}' failed: RuntimeError", "line 4)"]),
        ("builtin", "agent", ["holds deepagents' own MemoryMiddleware", "pass memory=[]"]),
        ("two", "both", ["holds 2 MemoryMiddleware instances (item 0 of the list, item 1"]),
        ("two", "factory", ["calling {name}:factory() raised KeyError: 'DATABASE_URL'"]),
        ("lazy", "container.agent", ["reading {name}:container.agent raised KeyError"]),
        ("lazy", "lazy_agent", ["reading {name}:lazy_agent raised RuntimeError", "app:***@db"]),
        ("proxy", "memroy", ["module '{name}' has no attribute 'memroy'"]),
        ("proxy", "settings.memory", ["reading {name}:settings.memory raised RuntimeError"]),
        ("exits", "quietly", ["calling {name}:quietly() called sys.exit(0)"]),
        ("exits", "loudly", ["calling {name}:loudly() called sys.exit('no config')"]),
    ],
)
def test_errors_name_the_module_the_attribute_and_what_was_found(
    project: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    module_key: str | None,
    attribute: str,
    expected: list[str],
) -> None:
    root, name = project
    if module_key is not None:
        name = module(root, BROKEN_MODULES[module_key])
    for command in ("inspect", "doctor", "lint"):
        status, out, err = run(capsys, command, "--config", f"{name}:{attribute}")
        assert status == 2, (command, out, err)
        assert out == ""
        # One line (after what the module itself printed while it was imported).
        line = err.replace("configuring the agent\n", "")
        assert line.startswith(f"layered-memory {command}: --config {name}:{attribute}: ")
        assert line.count("\n") == 1
        for text in expected:
            assert text.format(name=name) in line, line
        assert "s3cretpw" not in err


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("no_such_module_here:agent", "cannot import module 'no_such_module_here': no module"),
        ("no_colon", "expected MODULE:ATTRIBUTE"),
        ("mod:not-a-name", "attribute 'not-a-name' is not a (dotted) Python name"),
        ("missing/file.py:agent", "no such file: missing/file.py"),
        ("a b:agent", "module 'a b' is not a dotted module name"),
    ],
)
def test_a_config_value_that_cannot_load(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str], spec: str, expected: str
) -> None:
    status, _out, err = run(capsys, "inspect", "--config", spec)
    assert status == 2
    assert expected in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--config", "{name}:agent", "--layer", "a=/A.md"], "--layer: --config takes these"),
        (["--config", "{name}:agent", "--max-chars", "9000"], "--max-chars: --config takes"),
        (["--root", ".", "--message", "hi"], "--message and --thread need --config"),
        (["--root", ".", "--thread", "t1"], "--message and --thread need --config"),
        (["--config", "{name}:agent", "--context", "novalue"], "--context 'novalue': expected"),
        (["--config", "{name}:agent", "--entity", "acme"], "--entity: with --config, give"),
    ],
)
def test_option_mistakes_are_usage_errors(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    _root, name = project
    status, _out, err = run(capsys, "inspect", *(arg.format(name=name) for arg in args))
    assert status == 2
    assert expected in err


def test_flat_sources_layout_is_measured(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A drop-in `sources=` middleware renders deepagents' flat layout; files are still found."""
    _root, name = project
    data = inspect_json(capsys, "--config", f"{name}:drop_in")
    assert data["source"]["middleware"] == "MemoryMiddleware"
    files = [file for layer in data["layers"] for file in layer["files"]]
    assert [(f["path"], f["shown"]) for f in files] == [
        ("/AGENTS.md", "full"),
        ("/MEMORY.md", "full"),
    ]
    assert all(f["block_chars"] > f["chars"] for f in files)
    assert data["block"].count("/AGENTS.md\n\n# Billing service") == 1


STDOUT_WRITERS = """
import functools, os, subprocess, sys
from deepagents.backends import FilesystemBackend
from layered_memory import Layer, MemoryMiddleware

os.write(1, b"written to descriptor 1 while imported\\n")
subprocess.run([sys.executable, "-c", "print('a command the module ran')"], check=True)


def backend_for(runtime):
    print("creating the backend")
    return FilesystemBackend(root_dir=".", virtual_mode=True)


def keys(state, runtime):
    print("computing match keys")
    os.write(1, b"keys on descriptor 1\\n")
    return ["acme_corp"]


class Container:
    @functools.cached_property
    def memory(self):
        print("building the middleware")
        return MemoryMiddleware(
            backend=backend_for, layers=[Layer("p", "/AGENTS.md")], match_keys=(keys,)
        )


container = Container()
"""


@pytest.mark.parametrize("command", ["inspect", "doctor", "lint"])
def test_whatever_the_users_code_prints_stays_off_stdout(
    project: tuple[Path, str], capfd: pytest.CaptureFixture[str], command: str
) -> None:
    """Prints of a property, a backend factory and a match_keys callable, a command the module
    runs and bytes written to descriptor 1 itself all land on stderr: `--json` stays JSON."""
    root, _name = project
    name = module(root, STDOUT_WRITERS)
    status = main([command, "--config", f"{name}:container.memory", "--json"])
    out, err = capfd.readouterr()
    assert status in (0, 1), err
    data = json.loads(out)
    assert data["version"] == 1
    for printed in ("descriptor 1 while imported", "a command the module ran", "building the"):
        assert printed in err
    if command != "lint":  # lint reads the rule folders, not the memory
        assert "creating the backend" in err
        assert "computing match keys" in err


def test_a_backend_factory_error_names_the_config(
    project: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _name = project
    name = module(
        root,
        """
        import sys
        from layered_memory import Layer, MemoryMiddleware

        def backend_for(runtime):
            sys.exit("no backend today")

        memory = MemoryMiddleware(backend=backend_for, layers=[Layer("p", "/AGENTS.md")])
        """,
    )
    status, out, err = run(capsys, "inspect", "--config", f"{name}:memory", "--json")
    assert status == 2
    assert out == ""
    assert f"--config {name}:memory: the backend factory raised sys.exit('no backend" in err
