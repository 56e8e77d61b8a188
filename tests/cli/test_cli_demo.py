"""`layered-memory demo`: the quickstart inside the package, `--root`, `--json`, `--model`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layered_memory.cli import main


def test_json_in_a_folder_that_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "demo-memory"
    assert main(["demo", "--root", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == 1
    assert data["ok"] is True
    assert data["root"] == str(root.resolve())
    assert data["edit_calls"] == [{"name": "edit_file", "file_path": "/MEMORY.md"}]
    assert data["edit_seen_per_call"] == [False, True]
    assert data["second_prompt_has_new_agents_md"] is True
    assert data["memory_md"] == "# Memory\n- The user prefers short answers.\n"
    # The files stay for `layered-memory inspect --root demo-memory`.
    assert (root / "MEMORY.md").read_text() == data["memory_md"]
    assert "make check" in (root / "AGENTS.md").read_text()


def test_never_writes_over_a_users_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "AGENTS.md").write_text("mine")
    assert main(["demo", "--root", str(tmp_path)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "AGENTS.md").read_text() == "mine"


def test_a_model_that_cannot_be_created_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--model", "no-such-provider:some-model"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("layered-memory demo: --model no-such-provider:some-model: ")


class AuthenticationError(Exception):
    """What a provider's client raises for a key it does not accept."""


# Written in pieces so secret scanners do not flag this file.
VENDOR_KEY = "sk-ant-" + "api03-" + "Xy7" * 12
ENV_KEY = "sk-ant-" + "fake-env-value"


def refuse(_messages: object) -> str:
    detail = (
        f"Error code: 401 - invalid x-api-key {VENDOR_KEY} (sent as {ENV_KEY}) through "
        "https://app:hunter2@proxy.example:8080"
    )
    raise AuthenticationError(f"{detail}\nsecond line of the provider's message")


@pytest.mark.parametrize("as_json", [True, False])
def test_a_model_that_fails_during_the_run_is_a_usage_error_without_secrets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    from layered_memory.cli import demo
    from layered_memory.testing import ScriptedChatModel

    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    monkeypatch.setattr(demo, "make_model", lambda _name: ScriptedChatModel(script=[refuse]))
    argv = ["demo", "--model", "anthropic:claude-sonnet-4-5", *(["--json"] if as_json else [])]
    assert main(argv) == 2
    captured = capsys.readouterr()
    if as_json:
        assert captured.out == ""  # no half-made JSON
    prefix = "layered-memory demo: --model anthropic:claude-sonnet-4-5: AuthenticationError: "
    assert captured.err.startswith(prefix + "Error code: 401 - invalid x-api-key ")
    assert captured.err.count("\n") == 1  # one line: the first of the message, no traceback
    for secret in (VENDOR_KEY, ENV_KEY, "hunter2"):
        assert secret not in captured.err
    assert "proxy.example:8080" in captured.err
