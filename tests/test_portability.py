"""The package imports, and writes memory, on a platform without `fcntl` (Windows)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HANG_GUARD_SECONDS = 120  # only stops a hung child; nothing is timed

CHILD = textwrap.dedent(
    """
    import sys
    sys.modules["fcntl"] = None  # `import fcntl` now fails, as on Windows

    import layered_memory
    from deepagents.backends import FilesystemBackend
    from layered_memory import MemoryWriter

    writer = MemoryWriter(FilesystemBackend(root_dir=sys.argv[1], virtual_mode=True), "/MEMORY.md")
    assert writer.add_insight("Tests run with make test.", entity="acme")
    assert not writer.add_insight("Tests run with make test.", entity="acme")  # deduplicated
    try:
        import fcntl  # noqa: F401
    except ImportError:
        print("written without fcntl")
    """
)


def test_import_and_write_back_without_fcntl(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "written without fcntl"
    assert "[acme] Tests run with make test." in (tmp_path / "MEMORY.md").read_text()
