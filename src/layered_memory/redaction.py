"""The public import path `layered_memory.redaction`, kept for compatibility.

The code lives in `layered_memory.writeback.redaction`.
"""

from layered_memory.writeback.redaction import *  # noqa: F403
from layered_memory.writeback.redaction import __all__  # noqa: F401
