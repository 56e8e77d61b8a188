"""System-message edits shared by the middleware's sync and async halves (and the capabilities)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from langchain_core.messages import SystemMessage

if TYPE_CHECKING:
    pass


def append_block(system_message: SystemMessage | None, text: str) -> SystemMessage:
    """A new system message: the old content blocks, then `text` as one more text block.

    A separate block (not string concatenation) keeps the base prompt's bytes, and any cache
    breakpoint tagged on them, exactly as they were.
    """
    blocks = _text_blocks(system_message)
    if blocks:
        text = f"\n\n{text}"
    blocks.append({"type": "text", "text": text})
    return SystemMessage(content_blocks=blocks)


def _text_blocks(system_message: SystemMessage | None) -> list[Any]:
    """The message's content blocks; plain text is converted directly (the hot path).

    `content_blocks` is correct for every shape but costs a full conversion per model call;
    a string or a list of plain text blocks needs none.
    """
    if system_message is None:
        return []
    content = system_message.content
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if all(isinstance(block, dict) and block.keys() == {"type", "text"} for block in content):
        return list(content)
    return list(system_message.content_blocks)


def tag_last_block_for_cache(system_message: SystemMessage) -> SystemMessage:
    """The same message with an Anthropic `cache_control` breakpoint on its last block."""
    blocks: list[Any] = list(system_message.content_blocks)
    last = blocks[-1]
    blocks[-1] = {
        **(last if isinstance(last, dict) else {}),
        "cache_control": {"type": "ephemeral"},
    }
    return SystemMessage(content_blocks=blocks)


def is_anthropic_model(model: object) -> bool:
    """Whether `model` is a `ChatAnthropic` (without importing the Anthropic SDK)."""
    module = sys.modules.get("langchain_anthropic.chat_models")
    return module is not None and isinstance(model, module.ChatAnthropic)
