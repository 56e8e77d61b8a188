"""`chmod` of read-only memory is put back like its text (issue 35, class 2).

`chmod 000 team` or `chmod 000 .agents/rules` by the agent's shell left the layer or the rules
out of every later run. The run-start snapshot keeps the permission bits of read-only files
and folders, and the put-back after the shell restores them.

Root reads a folder of mode 0 anyway, so the run happens in a child process that keeps uid 0
but loses CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (dropped from its bounding set before it
starts): its permission checks are a plain user's. The child first checks that a folder of
mode 0 is denied to it, so the test cannot pass without exercising the denial.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WAIT_SECONDS = 300  # only stops a hung child; nothing is timed
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2

CHILD = textwrap.dedent(
    """
    import os, stat, sys
    from pathlib import Path

    root = Path(sys.argv[1])
    probe = root / "probe"
    probe.mkdir()
    probe.chmod(0)
    try:
        os.listdir(probe)
    except PermissionError:
        pass
    else:
        print("no-denial")
        sys.exit(3)
    probe.chmod(0o755)

    from deepagents import create_deep_agent
    from deepagents.backends.local_shell import LocalShellBackend
    from layered_memory import Layer, MemoryMiddleware
    from layered_memory.testing import ScriptedChatModel, tool_call

    project = root / "project"
    (project / "team").mkdir(parents=True)
    (project / ".agents" / "rules").mkdir(parents=True)
    (project / "AGENTS.md").write_text("PROJECT: run make test.\\n")
    (project / "team" / "push.md").write_text("TEAM: Never push to main.\\n")
    (project / ".agents" / "rules" / "org.md").write_text(
        "---\\nalwaysApply: true\\n---\\nORG_RULE: review every migration.\\n"
    )
    for path in (project, project / "team", project / ".agents", project / ".agents" / "rules"):
        path.chmod(0o755)
    for path in (project / "AGENTS.md", project / "team" / "push.md"):
        path.chmod(0o644)
    backend = LocalShellBackend(root_dir=project, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md"), Layer("team", "/team/")],
        rules=["/.agents/rules"],
    )

    def run(script):
        model = ScriptedChatModel(script=script, default="done")
        agent = create_deep_agent(
            model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
        )
        result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
        return result, model

    command = "chmod 000 team .agents/rules && chmod 000 AGENTS.md team/push.md 2>/dev/null; true"
    result, _model = run([tool_call("execute", command=command), "done"])
    modes = {
        name: stat.S_IMODE(os.lstat(project / name).st_mode)
        for name in ("team", ".agents/rules", "AGENTS.md")
    }
    print("modes", sorted((name, oct(mode)) for name, mode in modes.items()))
    _result, model = run(["done"])
    later = str(model.system_prompts[0])
    for needle in ("PROJECT: run make test.", "TEAM: Never push to main.", "ORG_RULE"):
        print(needle, needle in later)
    told = [str(m.content) for m in result["messages"] if m.type == "tool"]
    print("told", any("put back" in text for text in told))
    """
)


def _drop_dac_capabilities() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_chmod_000_of_read_only_memory_is_put_back_for_a_plain_user(tmp_path: Path) -> None:
    preexec = _drop_dac_capabilities if os.geteuid() == 0 else None
    if preexec is not None:
        try:
            subprocess.run(["true"], preexec_fn=preexec, check=True)
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"cannot drop CAP_DAC_OVERRIDE here: {exc}")
    env = {**os.environ, "LAYERED_MEMORY_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        preexec_fn=preexec,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert (
        lines[0] == "modes [('.agents/rules', '0o755'), ('AGENTS.md', '0o644'), ('team', '0o755')]"
    )
    assert lines[1:] == [
        "PROJECT: run make test. True",
        "TEAM: Never push to main. True",
        "ORG_RULE True",
        "told True",
    ]
