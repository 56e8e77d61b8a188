"""`detect-secrets` as an oracle: nothing its credential plugins flag survives `redact`.

Its plugin list is the reference the issue names. Every credential plugin (all but the
high-entropy and public-IP ones, which flag hashes and addresses rather than credentials)
must find something in the corpus, and nothing in the corpus once redacted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.settings import default_settings
from test_redaction_corpus import LOOKALIKES, SECRETS, _text

from layered_memory.safety.redaction import redact

NOT_CREDENTIALS = {"Base64 High Entropy String", "Hex High Entropy String", "Public IP (ipv4)"}
# The keyword plugin's regex set depends on the file type: YAML-like and Markdown between them
# cover `name: value`, `name=value` and quoted forms.
FILENAMES = ("config.yaml", "memory.md")


@pytest.fixture(scope="module")
def plugins() -> Iterator[list[Any]]:
    with default_settings():
        mapping = get_mapping_from_secret_type_to_class()
        yield [cls() for kind, cls in mapping.items() if kind not in NOT_CREDENTIALS]


def _flagged(plugins: list[Any], text: str) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        for plugin in plugins:
            for filename in FILENAMES:
                for secret in plugin.analyze_line(filename=filename, line=line, line_number=number):
                    if "[REDACTED:" not in (secret.secret_value or ""):
                        found.add((plugin.secret_type, secret.secret_value or ""))
    return found


def test_every_credential_plugin_fires_on_the_corpus(plugins: list[Any]) -> None:
    corpus = "\n".join(_text(entry, "plain") for entry in SECRETS.values())
    fired = {kind for kind, _ in _flagged(plugins, corpus)}
    assert fired == {plugin.secret_type for plugin in plugins}


@pytest.mark.parametrize("case", sorted(SECRETS))
def test_nothing_detect_secrets_flags_survives(plugins: list[Any], case: str) -> None:
    output, _ = redact(_text(SECRETS[case], "plain"))
    assert _flagged(plugins, output) == set()


def test_our_lookalikes_include_what_detect_secrets_would_flag(plugins: list[Any]) -> None:
    """Where the two disagree on purpose: placeholders and code that a keyword scan flags."""
    flagged = [text for text in LOOKALIKES if _flagged(plugins, text)]
    assert flagged, "the look-alikes should include cases a keyword scanner gets wrong"
    for text in flagged:
        assert redact(text) == (text, [])
