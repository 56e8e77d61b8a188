"""The public import path `layered_memory.session_save`, kept for compatibility.

The code lives in `layered_memory.sessions.session_save`.
"""

from layered_memory.sessions.session_save import *  # noqa: F403
from layered_memory.sessions.session_save import __all__  # noqa: F401
