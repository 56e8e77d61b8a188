"""The secret corpus: no secret survives in any disguise, no look-alike is touched.

`secrets_corpus.json` holds realistic secrets in the contexts they turn up in (``.env`` lines,
JSON and YAML configs, URLs, headers, prose) and look-alike non-secrets (commit hashes, UUIDs,
base64 images, placeholders, paths). Each secret is also fed disguised: percent-encoded, with
zero-width characters between its characters, and cut in two by a line break. Real code that
is not a secret is in `code_lookalikes.txt` (`test_redaction_code_lookalikes.py`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from layered_memory.safety.redaction import REDACTION_KINDS, redact

CORPUS_PATH = Path(__file__).with_name("secrets_corpus.json")


def _load() -> dict[str, Any]:
    raw = json.loads(CORPUS_PATH.read_text(encoding="utf-8"))
    join = raw["join"]
    for entry in raw["secrets"]:
        entry["secret"] = entry["secret"].replace(join, "")
        entry["text"] = entry["text"].replace(join, "")
    return raw


CORPUS = _load()
SECRETS = {entry["id"]: entry for entry in CORPUS["secrets"]}
LOOKALIKES = CORPUS["lookalikes"]
ZERO_WIDTH = "\u200b"


def _disguise(secret: str, how: str) -> str:
    if how == "plain":
        return secret
    if how == "percent_all":
        return "".join(f"%{ord(char):02X}" if ord(char) < 128 else char for char in secret)
    if how == "percent_reserved":
        return quote(secret, safe="")
    if how == "zero_width":
        return ZERO_WIDTH.join(secret[i : i + 3] for i in range(0, len(secret), 3))
    if how == "split":
        middle = len(secret) // 2
        return secret[:middle] + "\n" + secret[middle:]
    if how == "concatenated":
        middle = len(secret) // 2
        return secret[:middle] + '" + "' + secret[middle:]
    raise AssertionError(how)


def _text(entry: dict[str, Any], how: str) -> str:
    secret = _disguise(entry["secret"], entry.get("transform", "plain"))
    secret = _disguise(secret, how) if how != "plain" else secret
    return entry["text"].replace(CORPUS["placeholder"], secret)


_INVISIBLE = re.compile("[\u200b-\u200f\u2060\ufeff]")


def _undisguised(text: str) -> str:
    """Every form a reader could recover the secret from, folded into one string."""
    decoded = unquote(_INVISIBLE.sub("", text))
    return decoded + "\n" + re.sub(r"\\?\r?\n[ \t]*", "", decoded) + "\n" + text


def _leaks(secret: str, output: str, context: str = "") -> str | None:
    """A piece of ``secret`` long enough to matter that is still readable in ``output``
    (pieces that the surrounding ``context`` holds anyway do not count)."""
    secret = re.sub(r"\\?\r?\n[ \t]*|\\n", "", unquote(secret))
    size = min(8, max(4, len(secret) // 2))
    readable = _undisguised(output)
    for start in range(len(secret) - size + 1):
        piece = secret[start : start + size]
        if piece in readable and piece not in context:
            return piece
    return None


def test_the_corpus_is_big_enough_and_covers_every_kind_it_names() -> None:
    assert len(SECRETS) >= 60
    assert len(LOOKALIKES) >= 30
    assert {entry["kind"] for entry in SECRETS.values()} <= set(REDACTION_KINDS)


_DISGUISES = ["plain", "percent_all", "percent_reserved", "zero_width", "split"]


@pytest.mark.parametrize(
    ("case", "how"),
    [
        (case, how)
        for case in sorted(SECRETS)
        for how in _DISGUISES
        if how != SECRETS[case].get("transform")  # a case written disguised is not re-disguised
    ],
)
def test_no_secret_survives_in_any_disguise(case: str, how: str) -> None:
    entry = SECRETS[case]
    output, kinds = redact(_text(entry, how))
    leaked = _leaks(entry["secret"], output)
    assert leaked is None, f"{case} ({how}): {leaked!r} survived in {output!r}"
    assert kinds, case
    if how == "plain":
        assert entry["kind"] in kinds, (case, kinds)


def _context_is_clean(case: str) -> bool:
    before, _, after = SECRETS[case]["text"].partition(CORPUS["placeholder"])
    return not (redact(before)[1] or redact(after)[1])


@pytest.mark.parametrize("case", [case for case in sorted(SECRETS) if _context_is_clean(case)])
def test_only_the_secret_is_replaced(case: str) -> None:
    """Outside the secret, the text is kept byte for byte (or the secret's own frame, for
    secrets whose detector cuts a little more: a key block's BEGIN/END lines, a prefix).
    Cases whose context holds secrets of its own are left out at collection."""
    entry = SECRETS[case]
    before, _, after = entry["text"].partition(CORPUS["placeholder"])
    output, _ = redact(entry["text"].replace(CORPUS["placeholder"], entry["secret"]))
    marker = output.find("[REDACTED:")
    last = output.rfind("]")
    assert marker != -1
    kept_before, kept_after = output[:marker], output[last + 1 :]
    assert before.startswith(kept_before) or kept_before.startswith(before[: len(kept_before)])
    assert after.endswith(kept_after)
    # The frame a detector may take with it is short: never more than a line of context.
    assert len(before) - len(kept_before) <= 40 or "-----BEGIN" in before
    assert len(after) - len(kept_after) <= 40 or "-----END" in after


@pytest.mark.parametrize("index", range(len(LOOKALIKES)))
def test_lookalikes_stay_byte_for_byte(index: int) -> None:
    text = LOOKALIKES[index]
    assert redact(text) == (text, [])


def test_all_secrets_in_one_document_none_survives() -> None:
    # A key block without its END line ends at the first line that is not key material, so
    # it may sit anywhere in the document.
    texts = [_text(entry, "plain") for entry in SECRETS.values()]
    output, kinds = redact("\n\n".join(texts))
    contexts = "\n".join(entry["text"] for entry in SECRETS.values())
    for entry in SECRETS.values():
        assert _leaks(entry["secret"], output, contexts) is None, entry["id"]
    assert {entry["kind"] for entry in SECRETS.values()} <= set(kinds)
    for text in LOOKALIKES:
        assert redact("intro\n" + text + "\noutro")[0] == "intro\n" + text + "\noutro"


def test_redaction_is_idempotent() -> None:
    for entry in SECRETS.values():
        once, _ = redact(_text(entry, "plain"))
        assert redact(once) == (once, []), entry["id"]
