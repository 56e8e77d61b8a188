"""Budgets in the model's tokens: `max_tokens=` beside `max_chars=`, for the block and per layer.

The renderer cuts by characters (its arithmetic is exact and cheap); a token budget is met by
choosing the character budget whose block counts at most `max_tokens` tokens with the model's
own counter. Each round renders at a proportional guess and counts once; the guess shrinks by
at least 2% per round, so a few rounds suffice, and the result is cached with the block (one
fit per distinct memory, match keys and model: never on a call that reuses the block).

The counter is the model's own where LangChain exposes one: `get_num_tokens` or
`get_token_ids` overridden by the integration (OpenAI's tiktoken, Google's count endpoint),
else `count_tokens_approximately` (4 characters a token). A counter that fails (a tokenizer
that cannot be downloaded offline, a count endpoint down) falls back to the approximation with
one warning naming the model and the reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.language_models.base import BaseLanguageModel
from langchain_core.messages.utils import count_tokens_approximately

from layered_memory._logs import get_logger
from layered_memory.core.layers import Layer
from layered_memory.core.render import CutCount, RenderedMemory, clean_memory_text

__all__ = [
    "APPROXIMATE",
    "TokenCounter",
    "TokenFit",
    "approximate_tokens",
    "fit_block",
    "fit_layers_to_tokens",
    "fit_to_tokens",
    "token_counter",
]

logger = get_logger(__name__)

APPROXIMATE = "count_tokens_approximately"
"""The name of the fallback counter, as reports show it."""

_ROUNDS = 12
"""Rounds of the fit: the guess shrinks by at least 2% a round, proportionally at first."""


def approximate_tokens(text: str) -> int:
    """LangChain's approximate count of `text` (4 characters a token, rounded up).

    Args:
        text: Any text.

    Returns:
        The approximate number of tokens.
    """
    if not text:
        return 0
    # One message's text, without the per-message overhead (the block is part of a message).
    return count_tokens_approximately([text], extra_tokens_per_message=0, count_name=False)


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """How a block's tokens are counted for one model.

    Attributes:
        name: The counter in words (`ChatOpenAI.get_num_tokens`, `count_tokens_approximately`).
        key: What a cached block is keyed on (the counter's class and model name).
        count: `text -> tokens`.
    """

    name: str
    key: str
    count: Callable[[str], int]


_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def token_counter(model: object | None) -> TokenCounter:
    """The counter for `model`: its own where its integration provides one, else LangChain's
    approximation.

    Args:
        model: The chat model of the call (`request.model`), or None.

    Returns:
        The counter; a failing model counter falls back to the approximation (one warning).
    """
    if not isinstance(model, BaseLanguageModel) or not _counts_itself(model):
        return TokenCounter(APPROXIMATE, APPROXIMATE, approximate_tokens)
    kind = type(model).__name__
    name = f"{kind}.get_num_tokens"
    label = getattr(model, "model_name", None) or getattr(model, "model", None) or ""
    key = f"{type(model).__module__}.{type(model).__qualname__}:{label}"
    counted = model.get_num_tokens

    def count(text: str) -> int:
        try:
            return int(counted(text))
        except Exception as exc:  # a tokenizer offline, an endpoint down: approximate instead
            _warn_once(
                key,
                "max_tokens: %s failed (%s: %s); memory is counted with %s instead. "
                "Make the model's tokenizer available to count exactly.",
                name,
                type(exc).__name__,
                exc,
                APPROXIMATE,
            )
            return approximate_tokens(text)

    return TokenCounter(name, key, count)


def _counts_itself(model: BaseLanguageModel[Any]) -> bool:
    """Whether the integration counts tokens itself (the base class's default needs the
    `transformers` GPT-2 tokenizer, which says nothing about this model)."""
    kind = type(model)
    return (
        kind.get_num_tokens is not BaseLanguageModel.get_num_tokens
        or kind.get_token_ids is not BaseLanguageModel.get_token_ids
        or getattr(model, "custom_get_token_ids", None) is not None
    )


def fit_to_tokens(
    render_at: Callable[[int], RenderedMemory],
    count: Callable[[str], int],
    *,
    max_tokens: int,
    max_chars: int,
    least: int,
) -> tuple[RenderedMemory, int]:
    """The block rendered at the largest character budget found whose block counts at most
    `max_tokens` tokens.

    Args:
        render_at: Renders the block within a character budget.
        count: The model's token counter.
        max_tokens: The token budget.
        max_chars: The character budget (both bounds hold).
        least: The smallest character budget the template allows.

    Returns:
        The block and its token count (over `max_tokens` only when even the smallest
        budget's block is: the template alone is too long for it).
    """
    chars = max_chars
    rendered = render_at(chars)
    tokens = count(rendered.block)
    for _ in range(_ROUNDS):
        if tokens <= max_tokens or chars <= least:
            break
        chars = max(least, min(chars * max_tokens // max(tokens, 1), chars * 49 // 50))
        rendered = render_at(chars)
        tokens = count(rendered.block)
    return rendered, tokens


def fit_layers_to_tokens(
    layers: Sequence[Layer],
    files: Mapping[str, str],
    count: Callable[[str], int],
) -> tuple[Layer, ...]:
    """The layers with each `max_tokens` cap turned into the character cap that meets it.

    Args:
        layers: The configured layers.
        files: Layer path -> text, as loaded.
        count: The model's token counter.

    Returns:
        The layers, those with `max_tokens` given the `max_chars` that keeps their text
        within it (the lower of that and their own `max_chars`).
    """
    fitted: list[Layer] = []
    for layer in layers:
        if layer.max_tokens is None:
            fitted.append(layer)
            continue
        text = "\n\n".join(
            clean_memory_text(files[path]) for path in layer.files_of(files) if path in files
        )
        chars = len(text)
        tokens = count(text)
        for _ in range(_ROUNDS):
            if tokens <= layer.max_tokens or chars <= 1:
                break
            chars = max(1, min(chars * layer.max_tokens // max(tokens, 1), chars * 49 // 50))
            tokens = count(text[:chars])
        cap = chars if chars < len(text) else None
        if cap is not None and layer.max_chars is not None:
            cap = min(cap, layer.max_chars)
        fitted.append(layer if cap is None else replace(layer, max_chars=cap))
    return tuple(fitted)


TOTAL_CHARS_REASON = "over the total memory budget (max_chars)"
"""The renderer's reason for a part cut by the block's budget (said in tokens with one)."""


@dataclass(frozen=True, slots=True)
class TokenFit:
    """A block rendered within its token budgets, and how its record states them.

    Attributes:
        rendered: The block and the renderer's account of each part.
        budget: The block's bound, in `unit`.
        unit: `"tokens"` with a token budget for the block, else `"chars"`.
        total: The block's size in `unit`.
        reworded: The renderer's character reasons said as the token caps behind them.
    """

    rendered: RenderedMemory
    budget: int
    unit: str
    total: int
    reworded: Mapping[str, str] = field(default_factory=dict)


def fit_block(
    render_at: Callable[[Sequence[Layer], int, CutCount, bool], RenderedMemory],
    layers: Sequence[Layer],
    files: Mapping[str, str],
    counter: TokenCounter,
    *,
    max_tokens: int | None,
    max_chars: int,
    least: int,
) -> TokenFit:
    """The block within every token budget: each layer's `max_tokens` as the character cap
    that meets it, then the block's `max_tokens` (both bounds hold beside `max_chars`).

    Args:
        render_at: Renders the block from these layers within a character budget, its cut
            markers counting in the `CutCount` given (a layer's cap with `max_tokens`, and
            the block's budget when the flag says it is in tokens).
        layers: The configured layers.
        files: Layer path -> text, as loaded.
        counter: The model's token counter.
        max_tokens: The block's token budget (None: characters only).
        max_chars: The block's character budget.
        least: The smallest character budget the template allows.

    Returns:
        The block, its size and budget in the unit that bound it, and the reasons in tokens.
    """
    fitted = fit_layers_to_tokens(layers, files, counter.count)
    reworded = {
        f"over the layer's max_chars={fit.max_chars}": (
            f"over the layer's max_tokens={layer.max_tokens} ({counter.name})"
        )
        for layer, fit in zip(layers, fitted, strict=True)
        if fit is not layer
    }
    # What a token budget cut is said in tokens: "12 more tokens", not "48 more chars".
    in_tokens = CutCount("tokens", counter.count)
    if max_tokens is None:
        rendered = render_at(fitted, max_chars, in_tokens, False)
        return TokenFit(rendered, max_chars, "chars", len(rendered.block), reworded)
    rendered, tokens = fit_to_tokens(
        lambda chars: render_at(fitted, chars, in_tokens, True),
        counter.count,
        max_tokens=max_tokens,
        max_chars=max_chars,
        least=least,
    )
    reworded[TOTAL_CHARS_REASON] = (
        f"over the total memory budget (max_tokens={max_tokens}, {counter.name})"
    )
    if tokens > max_tokens:  # the template alone is longer: say so, as max_chars= does
        _warn_once(
            f"too small:{max_tokens}:{counter.key}",
            "max_tokens=%d is too small for the prompt template: the smallest memory block "
            "counts %d tokens (%s), so the block is over the budget; use max_tokens=%d or more",
            max_tokens,
            tokens,
            counter.name,
            tokens,
        )
    return TokenFit(rendered, max_tokens, "tokens", tokens, reworded)


def _warn_once(key: str, message: str, *args: object) -> None:
    with _WARNED_LOCK:
        first = key not in _WARNED
        _WARNED.add(key)
    if first:
        logger.warning(message, *args)
