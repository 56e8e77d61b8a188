"""Secret redaction: credentials are cut out of text before it can reach memory.

Memory files are read back into every later prompt and often committed to version control, and
session stores outlive the run, so a key that slips into either leaks for good. `redact`
replaces each recognized secret with a `[REDACTED:<kind>]` marker and reports the kinds it
found, so callers can log *that* something was redacted without logging the secret itself.

How a text is scanned:

1. A scanning view is built (`_scanning_view`): invisible characters removed, ASCII
   percent-escapes decoded, a token cut by a line break or split over string literals joined
   again.
2. Detectors run on the view, one module per family (`_detector` says what they yield):
   vendor tokens (``sk_live_``, ``ghp_``, ``hf_``, JWTs, ...: `_vendor_tokens`), secrets with
   a structure (key blocks, URL credentials, Authorization headers, bare AWS secret keys:
   `_structured_secrets`), values of secret-named fields (``DB_PASSWORD=``, ``"password":``,
   ``*_TOKEN=``, ...: `_named_fields`) and passwords where a tool or a credential file puts
   them (`_command_lines`).
3. Overlapping findings merge into one span; each span is mapped back to the original text and
   replaced there. Nothing outside the spans changes, byte for byte.

Why not `detect-secrets` at run time (measured, `benchmarks/scenarios/redaction.py`): its
plugins report secret *values* per line, not spans, so they cannot see a key split over two
lines or percent-encoded, and cutting a value back out of the text by searching for it is
fragile; its keyword plugin only knows quoted or code-shaped assignments (no ``DB_PASSWORD=x``
in prose, no ``Authorization: Basic``, no Stripe ``rk_``/``whsec_``, no Hugging Face, Google
OAuth or AWS session tokens); and its plugin set costs several times this whole engine per
insight. It is used instead as an oracle in the tests: nothing it flags in the test corpus may
survive `redact`.

Example:
    >>> redact("use key sk-proj-" + "A1b2C3d4" * 4 + " please")
    ('use key [REDACTED:openai_api_key] please', ['openai_api_key'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from layered_memory.safety._command_lines import credentials
from layered_memory.safety._detector import Detector, Finding
from layered_memory.safety._named_fields import assignments, field_kind
from layered_memory.safety._scanning_view import scanning_view
from layered_memory.safety._structured_secrets import TOKEN_DETECTORS

__all__ = [
    "REDACTION_KINDS",
    "Finding",
    "Redaction",
    "find_secrets",
    "redact",
    "redact_json",
    "redact_text",
]

REDACTION_KINDS: Final[tuple[str, ...]] = (
    "private_key",
    "jwt",
    "anthropic_api_key",
    "openai_api_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "github_token",
    "gitlab_token",
    "slack_token",
    "webhook_url",
    "stripe_key",
    "google_api_key",
    "google_oauth_secret",
    "huggingface_token",
    "npm_token",
    "pypi_token",
    "azure_storage_key",
    "sendgrid_api_key",
    "twilio_api_key",
    "mailchimp_api_key",
    "square_token",
    "telegram_bot_token",
    "discord_bot_token",
    "service_token",
    "softlayer_api_key",
    "bearer_token",
    "basic_auth",
    "authorization_header",
    "url_credentials",
    "password",
    "secret_assignment",
)
"""Every kind `redact` can report, most specific first: when findings overlap, the merged span
is reported under the earliest kind (``api_key=sk-proj-...`` is an `openai_api_key`)."""


# -- The engine ------------------------------------------------------------------------------------

_PRECEDENCE: Final = {kind: index for index, kind in enumerate(REDACTION_KINDS)}
_DETECTORS: Final[tuple[Detector, ...]] = (*TOKEN_DETECTORS, assignments, credentials)


@dataclass(frozen=True, slots=True)
class Redaction:
    """The result of redacting one text (or one JSON value).

    Attributes:
        text: The text with every secret replaced by ``[REDACTED:<kind>]``.
        kinds: The kinds replaced, each once, in `REDACTION_KINDS` order.
        count: How many secrets were replaced.
    """

    text: str
    kinds: tuple[str, ...]
    count: int


def find_secrets(text: str) -> list[Finding]:
    """The secrets in ``text``, as disjoint spans of ``text`` sorted by position.

    Args:
        text: Any text.

    Returns:
        One `Finding` per secret; overlapping detections are merged into one.
    """
    view = scanning_view(text)
    found = [finding for detector in _DETECTORS for finding in detector(view.text)]
    merged: list[Finding] = []
    for finding in sorted(found, key=lambda f: (f.start, -f.end)):
        if finding.start >= finding.end:
            continue
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            kind = min(last.kind, finding.kind, key=_PRECEDENCE.__getitem__)
            merged[-1] = Finding(last.start, max(last.end, finding.end), kind)
        else:
            merged.append(finding)
    return [Finding(*view.source_span(f.start, f.end), f.kind) for f in merged]


def redact_text(text: str) -> Redaction:
    """Replace every recognized secret in ``text`` with a ``[REDACTED:<kind>]`` marker.

    Args:
        text: Any text about to be persisted.

    Returns:
        The redacted text, the kinds found and how many secrets were replaced.
    """
    findings = find_secrets(text)
    if not findings:
        return Redaction(text, (), 0)
    parts: list[str] = []
    last = 0
    for finding in findings:
        parts.append(text[last : finding.start])
        parts.append(f"[REDACTED:{finding.kind}]")
        last = finding.end
    parts.append(text[last:])
    kinds = sorted({f.kind for f in findings}, key=_PRECEDENCE.__getitem__)
    return Redaction("".join(parts), tuple(kinds), len(findings))


def redact(text: str) -> tuple[str, list[str]]:
    """Replace every recognized secret in ``text`` with a ``[REDACTED:<kind>]`` marker.

    Args:
        text: Any text about to be persisted.

    Returns:
        The redacted text and the kinds found, each once, in `REDACTION_KINDS` order (empty
        when the text was left unchanged).
    """
    result = redact_text(text)
    return result.text, list(result.kinds)


def redact_json(value: Any) -> tuple[Any, Redaction]:
    """Redact every string of a JSON-like value: dict keys and string leaves, at any depth,
    and the whole string value of a secret-named key (``{"db_password": "..."}``, judged as
    ``db_password=...`` would be in text).

    Dicts, lists and tuples (any sequence but text and bytes: what `json.dumps` writes as an
    array) are copied only where something changed (a tuple stays a tuple, another sequence
    becomes a list); other leaves are kept as they are.
    Two keys of one dict that redact to the same text keep apart with a ``#2``, ``#3`` suffix,
    so no entry is lost. Walks iteratively: nesting depth is bounded only by memory.

    Args:
        value: A dict, list, tuple, str or any other leaf.

    Returns:
        The redacted value and a summary (its ``text`` is empty: there is no single text).
    """
    kinds: set[str] = set()
    count = 0

    def clean(text: str) -> str:
        nonlocal count
        result = redact_text(text)
        if result.count:
            kinds.update(result.kinds)
            count += result.count
        return result.text

    def field(name: str, text: str) -> str | None:
        nonlocal count
        kind = field_kind(name, text)
        if kind is None:
            return None
        kinds.add(kind)
        count += 1
        return f"[REDACTED:{kind}]"

    redacted = _walk(value, clean, field)
    ordered = tuple(sorted(kinds, key=_PRECEDENCE.__getitem__))
    return redacted, Redaction("", ordered, count)


def _is_container(value: Any) -> bool:
    """Whether ``value`` holds values to walk into: a dict, or any sequence but text and bytes.

    Not only `list`: a tuple (or another sequence) is written as a JSON array by `json.dumps`
    and the stores, so a secret inside one is persisted like one inside a list.
    """
    if isinstance(value, dict | list | tuple):
        return True
    return isinstance(value, Sequence) and not isinstance(
        value, str | bytes | bytearray | memoryview
    )


def _walk(value: Any, clean: Callable[[str], str], field: Callable[[str, str], str | None]) -> Any:
    """Apply ``clean`` to every str key and leaf of ``value`` without recursion; a str value
    of a str key goes to ``field`` first (its replacement, or None: cleaned as any leaf)."""
    if isinstance(value, str):
        return clean(value)
    if not _is_container(value):
        return value
    # Post-order over an explicit stack of frames (container, its keys when a dict, cleaned
    # children so far): a container is rebuilt once all its children are done.
    stack: list[tuple[Any, list[Any] | None, list[Any]]] = [(value, _keys(value), [])]
    while True:
        container, keys, done = stack[-1]
        items = keys if keys is not None else container
        if len(done) < len(items):
            item = items[len(done)]
            child = container[item] if keys is not None else item
            if isinstance(child, str):
                # A secret-named key makes its whole value a secret, judged as given (then
                # `clean` does not see it: one secret, counted once).
                named = field(item, child) if keys is not None and isinstance(item, str) else None
                done.append(clean(child) if named is None else named)
            elif isinstance(child, int | float) and not isinstance(child, bool):
                # A number under a secret-named key (`{"password": 20240917}`) is
                # judged by its digits; any other number stays a number.
                named = (
                    field(item, str(child)) if keys is not None and isinstance(item, str) else None
                )
                done.append(child if named is None else named)
            elif _is_container(child):
                stack.append((child, _keys(child), []))
            else:
                done.append(child)
            continue
        stack.pop()
        rebuilt = _rebuild(container, keys, done, clean)
        if not stack:
            return rebuilt
        stack[-1][2].append(rebuilt)


def _keys(container: Any) -> list[Any] | None:
    return list(container) if isinstance(container, dict) else None


def _rebuild(
    container: Any, keys: list[Any] | None, children: list[Any], clean: Callable[[str], str]
) -> Any:
    if keys is None:
        unchanged = all(new is old for new, old in zip(children, container, strict=True))
        if unchanged:
            return container
        return tuple(children) if isinstance(container, tuple) else children
    out: dict[Any, Any] = {}
    changed = False
    for key, child in zip(keys, children, strict=True):
        new_key = clean(key) if isinstance(key, str) else key
        if new_key in out:
            suffix = 2
            while f"{new_key}#{suffix}" in out:
                suffix += 1
            new_key = f"{new_key}#{suffix}"
        changed = changed or new_key is not key or child is not container[key]
        out[new_key] = child
    return out if changed else container
