"""The public import path `layered_memory.insights`, kept for compatibility.

The code lives in `layered_memory.writeback.insights`.
"""

from layered_memory.writeback.insights import *  # noqa: F403
from layered_memory.writeback.insights import __all__  # noqa: F401
