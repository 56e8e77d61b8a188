"""The public import path `layered_memory.stores`, kept for compatibility.

The code lives in `layered_memory.sessions.stores`.
"""

from layered_memory.sessions.stores import *  # noqa: F403
from layered_memory.sessions.stores import __all__  # noqa: F401
