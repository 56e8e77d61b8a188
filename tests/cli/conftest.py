"""The package as a user gets it: a wheel built from this tree, installed into a fresh venv.

`installed_cli` builds the wheel once per test session (hatchling, from the dev extra), creates
a venv without pip and installs the wheel there with `--no-deps --no-index`: nothing is
downloaded. The venv reaches the test venv's dependencies (langchain, deepagents...) through a
`.pth` file naming its site-packages folders as plain paths, so the `.pth` files inside them
(the editable install of this repository) are not processed: `import layered_memory` finds the
installed copy only. Commands then run in an empty temporary folder, as a user's would.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from cli_installed_helpers import TIME_LIMIT, InstalledCli

ROOT = Path(__file__).resolve().parents[2]


def _site_packages(venv: Path) -> Path:
    scheme = sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})
    return Path(scheme["purelib"])


@pytest.fixture(scope="session")
def installed_cli(tmp_path_factory: pytest.TempPathFactory) -> InstalledCli:
    """The wheel of this tree installed in a fresh venv (built once per session)."""
    work = tmp_path_factory.mktemp("installed")
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(dist)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=TIME_LIMIT,
    )
    (wheel,) = dist.glob("layered_memory-*.whl")
    venv = work / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        capture_output=True,
        timeout=TIME_LIMIT,
    )
    deps = [path for path in site.getsitepackages() if Path(path).is_dir()]
    target = _site_packages(venv)
    target.mkdir(parents=True, exist_ok=True)
    (target / "_layered_memory_test_deps.pth").write_text("\n".join(deps) + "\n")
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-compile",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=TIME_LIMIT,
    )
    script = python.parent / ("layered-memory.exe" if os.name == "nt" else "layered-memory")
    assert script.is_file()
    return InstalledCli(venv=venv, python=python, script=script)


@pytest.fixture
def bare_folder(tmp_path: Path) -> Path:
    """An empty folder outside the repository (a user's fresh project)."""
    folder = tmp_path / "project"
    folder.mkdir()
    return folder
