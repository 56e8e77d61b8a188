"""A cache-aside checkpointer: Redis L1 in front of any LangGraph checkpoint saver.

Example:
    >>> from layered_memory.checkpoint import CachedCheckpointSaver  # doctest: +SKIP
    >>> saver = CachedCheckpointSaver(postgres_saver, redis_url="redis://localhost:6379/0")
"""

from layered_memory.checkpoint.saver import DEFAULT_PREFIX, CachedCheckpointSaver

__all__ = ["DEFAULT_PREFIX", "CachedCheckpointSaver"]
