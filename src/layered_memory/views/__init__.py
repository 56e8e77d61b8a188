"""Message views and memory profiles for agents that share one conversation.

Every agent (a "person") sees the one shared, never-edited conversation through its own
view, chosen per job: which messages (`MessageView`), how many (`max_messages`), what always
stays (`preserve_system`, `keep`), and whether earlier runs are forgotten (GOLDFISH). Forgetting
is visibility only, reversible by changing the setting. Semantics after DiPeO's memory system.

Example:
    agent = create_agent(model, tools, name="optimist",
                         middleware=[MessageViewMiddleware(profile=MemoryProfile.FOCUSED)])
"""

from layered_memory.views._conversation import ROUTE_KEY, SYSTEM, USER, addressed
from layered_memory.views._view import view_messages
from layered_memory.views.middleware import MessageViewMiddleware, MessageViewState
from layered_memory.views.settings import (
    KeepPredicate,
    MemoryProfile,
    MemoryProfileFactory,
    MemorySettings,
    MessageView,
)

__all__ = [
    "ROUTE_KEY",
    "SYSTEM",
    "USER",
    "KeepPredicate",
    "MemoryProfile",
    "MemoryProfileFactory",
    "MemorySettings",
    "MessageView",
    "MessageViewMiddleware",
    "MessageViewState",
    "addressed",
    "view_messages",
]
