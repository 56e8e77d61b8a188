"""The examples on the command line: the quickstart is `layered-memory demo`; a real model that
fails is one line (exit 2), not a traceback; a mistyped Redis URL is said, and the run goes on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_quickstart import EXAMPLES, load_example

EXAMPLES_WITH_MODEL = [
    "consolidation",
    "debate",
    "knowledge_graph",
    "learning_loop",
    "tiered_memory",
    "chat_worker",
    "multi_worker",
]


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_quickstart_takes_the_demo_options(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    done = run_example("quickstart", "--json", "--root", str(root))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["ok"], data["root"]) == (True, str(root.resolve()))
    assert (root / "MEMORY.md").read_text(encoding="utf-8").count("short answers") == 1


def test_the_quickstart_says_in_one_line_that_a_model_cannot_be_made() -> None:
    done = run_example("quickstart", "--model", "nosuchprovider:model")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "layered-memory demo: --model nosuchprovider:model: ValueError: Unable to infer model "
        "provider for model='nosuchprovider:model'. Please specify 'model_provider' directly."
    ]


def test_an_example_says_in_one_line_that_a_model_cannot_be_made() -> None:
    done = run_example("debate", "--model", "nosuchprovider:model")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "debate.py: --model nosuchprovider:model: ValueError: Unable to infer model provider "
        "for model='nosuchprovider:model'. Please specify 'model_provider' directly."
    ]


@pytest.mark.parametrize("name", EXAMPLES_WITH_MODEL)
def test_a_model_failure_is_one_line_without_the_key(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMPLE_PROVIDER_API_KEY", "k3y-v4lue-0f-the-user")
    example = load_example(name)
    refused = RuntimeError("key k3y-v4lue-0f-the-user was refused\nTraceback-ish detail")
    line = example.model_failure(f"{name}.py", ["--model", "acme:big", "--keep"], refused)
    assert line == f"{name}.py: --model acme:big: RuntimeError: key *** was refused"
    # The scripted model (no --model): its failure is a bug of ours, the traceback stays.
    assert example.model_failure(f"{name}.py", ["--keep"], refused) is None


def test_chat_worker_says_a_redis_url_without_its_scheme_is_not_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example = load_example("chat_worker")
    monkeypatch.setattr(example, "REDIS_URL", "localhost:6379")
    reason = example._redis_reason()
    assert reason is not None
    assert reason.startswith("not a Redis URL: Redis URL must specify one of the following")
