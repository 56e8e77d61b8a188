"""The built wheel and sdist carry the LICENSE (MIT) and the typing marker."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_and_sdist_ship_the_license(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License")

    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licenses = [name for name in names if name.endswith("licenses/LICENSE")]
        assert licenses, names
        assert archive.read(licenses[0]).decode() == license_text
        assert "layered_memory/py.typed" in names
        metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
        assert "License-Expression: MIT" in metadata

    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        assert any(member.name.endswith("/LICENSE") for member in archive.getmembers())
