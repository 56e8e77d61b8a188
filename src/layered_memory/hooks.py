"""STUB — being written (issue 4). HookEvent and HookRegistry."""

from __future__ import annotations

import enum
from typing import Any


class HookEvent(enum.StrEnum):
    PIPELINE_START = "pipeline_start"
    PIPELINE_END = "pipeline_end"
    MEMORY_LOADED = "memory_loaded"
    RULES_MATCHED = "rules_matched"
    MEMORY_WRITTEN = "memory_written"


class HookRegistry:
    def trigger(self, event: HookEvent, data: Any) -> None:
        return None

    async def atrigger(self, event: HookEvent, data: Any) -> None:
        return None
