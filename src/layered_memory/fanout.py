"""The public import path `layered_memory.fanout`, kept for compatibility.

The code lives in `layered_memory.sessions.fanout`.
"""

from layered_memory.sessions.fanout import *  # noqa: F403
from layered_memory.sessions.fanout import __all__  # noqa: F401
