"""The public import path `layered_memory.shared_memory`, kept for compatibility.

The code lives in `layered_memory.core.shared_memory`.
"""

from layered_memory.core.shared_memory import *  # noqa: F403
from layered_memory.core.shared_memory import __all__  # noqa: F401
