"""`import layered_memory.tiers` without the `tiers` extra names the extra (issue 36:
`python examples/tiered_memory.py` said only "No module named 'numpy'")."""

from __future__ import annotations

import subprocess
import sys


def test_without_numpy_the_import_names_the_extra() -> None:
    program = (
        "import sys\n"
        "sys.modules['numpy'] = None  # as if the extra were not installed\n"
        "import layered_memory.tiers\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "ModuleNotFoundError: layered_memory.tiers needs numpy: pip install 'layered-memory[tiers]'"
    )
