"""The public import path `layered_memory.guard`, kept for compatibility.

The code lives in `layered_memory.core.guard`.
"""

from layered_memory.core.guard import *  # noqa: F403
from layered_memory.core.guard import __all__  # noqa: F401
