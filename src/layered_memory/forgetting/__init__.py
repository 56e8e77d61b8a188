"""Forget a subject everywhere memory keeps it (`forget`, `layered-memory forget`).

`everywhere.py` runs one subject through every store it is given, each through that store's
own write path: memory files and review queues (`writeback.forget`), knowledge graphs
(`graph.forget`), tiered memory and session stores.
"""

from layered_memory.forgetting.everywhere import (
    ForgetReport,
    SessionForgotten,
    TierForgotten,
    aforget,
    forget,
)

__all__ = ["ForgetReport", "SessionForgotten", "TierForgotten", "aforget", "forget"]
