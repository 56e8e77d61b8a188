"""The installed console script of `installed_cli` (conftest.py), and how tests run it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TIME_LIMIT = 300
"""Seconds a command may take (a hang fails the test instead of blocking the suite)."""


@dataclass(frozen=True)
class InstalledCli:
    """A venv holding the built wheel."""

    venv: Path
    python: Path
    script: Path

    @property
    def bin(self) -> Path:
        return self.script.parent

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a user's shell with the venv activated (no repository paths)."""
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "NO_COLOR")
        }
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env.update(extra or {})
        return env

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`layered-memory ARGS` in `cwd`, as the installed console script."""
        return subprocess.run(
            [str(self.script), *args],
            cwd=cwd,
            env=self.env(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TIME_LIMIT,
            check=False,
        )
