"""Detectors of tokens that announce themselves: vendor prefixes (``sk_live_``, ``ghp_``,
``glpat-``, ``hf_``, ...) and fixed shapes (JWTs, SendGrid, Discord, Telegram tokens).

Every pattern is linear on any input: it starts with a literal (so the regex engine skips
ahead to it) and its only unbounded part is a final greedy run that cannot fail once started.
A pattern runs only on a text holding one of its needles, and none runs on a text without a
word long enough to be a token: ordinary prose costs a few `in` checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Final

from layered_memory.writeback.redaction._types import Finding

__all__ = [
    "PREFIXED_KINDS",
    "Check",
    "fold_case",
    "has_digit_or_caps",
    "has_long_word",
    "mixed",
    "prefixed",
    "word_start",
]

Check = Callable[[str], bool]


def mixed(secret: str) -> bool:
    """Random keys mix digits and both cases; a kebab-case name (``sk-learn-pipeline``) does
    not."""
    return (
        any(c.isdigit() for c in secret)
        and any(c.isupper() for c in secret)
        and any(c.islower() for c in secret)
    )


def has_digit_or_caps(secret: str) -> bool:
    return any(c.isdigit() or c.isupper() for c in secret)


def _always(_secret: str) -> bool:
    return True


# (kind, needles, pattern, check): the pattern runs only on a text holding one of the needles
# (most texts hold none, and `in` is far cheaper than a regex scan); it starts with a literal so
# the regex engine can skip ahead, and `_word_start` replaces a leading `\b` (which would make
# the engine try every position). The span is the group "secret" when the pattern has one, else
# the whole match; `check` gets that span's text and can veto it.
_PREFIXED: Final[tuple[tuple[str, tuple[str, ...], re.Pattern[str], Check], ...]] = (
    (
        "jwt",
        ("eyJ",),
        re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        _always,
    ),
    ("anthropic_api_key", ("sk-ant-",), re.compile(r"sk-ant-[A-Za-z0-9_-]{16,}"), _always),
    (
        "openai_api_key",
        ("sk-",),
        re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
        _always,
    ),
    ("openai_api_key", ("sk-",), re.compile(r"sk-[A-Za-z0-9_-]{20,}"), mixed),
    (
        "aws_access_key_id",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        re.compile(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9_])"),
        _always,
    ),
    (
        "aws_session_token",
        ("ZXIvYXdz", "oJb3JpZ2luX2Vj"),
        re.compile(
            r"(?:FQoGZXIvYXdz|FwoGZXIvYXdz|[A-Za-z0-9]{2}oJb3JpZ2luX2Vj)[A-Za-z0-9/+=]{40,}"
        ),
        _always,
    ),
    (
        "github_token",
        ("gh", "github_pat_"),
        re.compile(r"gh[pousr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,}"),
        _always,
    ),
    (
        "gitlab_token",
        ("gl", "GR1348941"),
        re.compile(
            r"(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas|glffct)-"
            r"|GR1348941)[A-Za-z0-9_-]{20,}"
        ),
        _always,
    ),
    (
        "slack_token",
        ("xox", "xapp-"),
        re.compile(r"xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"),
        _always,
    ),
    (
        "webhook_url",
        ("https://",),
        re.compile(
            r"https://(?:hooks\.slack\.com/|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/"
            r"|[A-Za-z0-9-]{1,63}\.webhook\.office\.com/webhookb2/)"
            r"(?P<secret>[A-Za-z0-9_/@-]{20,})"
        ),
        _always,
    ),
    (
        "stripe_key",
        ("k_live_", "k_test_", "whsec_"),
        re.compile(r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{10,}|whsec_[A-Za-z0-9+/=]{20,}"),
        _always,
    ),
    ("google_api_key", ("AIza",), re.compile(r"AIza[0-9A-Za-z_-]{35}"), _always),
    (
        "google_oauth_secret",
        ("GOCSPX-", "ya29.", "1//0"),
        re.compile(r"GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[0-9A-Za-z_-]{20,}|1//0[0-9A-Za-z_-]{30,}"),
        _always,
    ),
    (
        "huggingface_token",
        ("hf_", "api_org_"),
        re.compile(r"(?:hf_|api_org_)[A-Za-z0-9]{30,}"),
        has_digit_or_caps,
    ),
    ("npm_token", ("npm_",), re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), _always),
    (
        "pypi_token",
        ("pypi-",),
        re.compile(r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}"),
        _always,
    ),
    (
        "azure_storage_key",
        ("accountkey=",),
        re.compile(r"(?i)AccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})"),
        _always,
    ),
    (
        "sendgrid_api_key",
        ("SG.",),
        re.compile(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"),
        _always,
    ),
    ("twilio_api_key", ("AC", "SK"), re.compile(r"(?:AC|SK)[0-9a-f]{32}(?![A-Za-z0-9_])"), _always),
    (
        "mailchimp_api_key",
        ("-us",),
        re.compile(r"[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9_])"),
        _always,
    ),
    ("square_token", ("sq0",), re.compile(r"sq0(?:csp|atp)-[0-9A-Za-z_-]{22,}"), _always),
    (
        "telegram_bot_token",
        (":",),
        re.compile(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
        mixed,
    ),
    (
        "discord_bot_token",
        (".",),
        re.compile(r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"),
        mixed,
    ),
    (
        "service_token",
        (
            "AKCp",
            "cmVmdGtu",
            "dapi",
            "_v1_",
            "shp",
            "AGE-SECRET-KEY-1",
            "PMAK-",
            "lin_api_",
            "dp.",
            "hvs.",
            "hvb.",
            "glc_",
            "sntry",
        ),
        re.compile(
            r"AKCp[A-Za-z0-9]{60,}"  # Artifactory API key
            r"|cmVmdGtu[A-Za-z0-9]{50,}"  # Artifactory reference token
            r"|dapi[0-9a-f]{32}(?![A-Za-z0-9_])"  # Databricks
            r"|do[opr]_v1_[0-9a-f]{64}(?![A-Za-z0-9_])"  # DigitalOcean
            r"|shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}(?![A-Za-z0-9_])"  # Shopify
            r"|AGE-SECRET-KEY-1[0-9A-Z]{58}(?![A-Za-z0-9_])"  # age
            r"|PMAK-[0-9a-f]{24}-[0-9a-f]{34}(?![A-Za-z0-9_])"  # Postman
            r"|lin_api_[A-Za-z0-9]{40}(?![A-Za-z0-9_])"  # Linear
            r"|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"  # Doppler
            r"|hv[sb]\.[A-Za-z0-9_-]{90,}"  # HashiCorp Vault
            r"|glc_[A-Za-z0-9+/]{32,}={0,2}"  # Grafana Cloud
            r"|sntry[su]_[A-Za-z0-9+/=_-]{40,}"  # Sentry
        ),
        _always,
    ),
    (
        "softlayer_api_key",
        ("softlayer.com/",),
        re.compile(r"(?i)api\.softlayer\.com/(?:soap|rest)/v3(?:\.1)?/(?P<secret>[a-z0-9]{64})"),
        _always,
    ),
)
_SHORTEST_TOKEN: Final = 15
"""No token above is shorter (``xoxb-`` and 10 characters)."""
_CASE_FOLDED: Final = frozenset({"azure_storage_key", "softlayer_api_key"})
"""Kinds whose needles are matched against the lower-cased text."""
_NEEDLES: Final = frozenset(n for k, ns, _, _ in _PREFIXED if k not in _CASE_FOLDED for n in ns)
_FOLDED_NEEDLES: Final = frozenset(n for k, ns, _, _ in _PREFIXED if k in _CASE_FOLDED for n in ns)

_ASCII_LOWER: Final = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def fold_case(text: str) -> str:
    """``text`` lower-cased without changing its length (``str.lower`` may, for a few
    non-ASCII letters), so positions in it are positions in ``text``."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def word_start(text: str, start: int) -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


def has_long_word(text: str, size: int) -> bool:
    """Whether some whitespace-separated word of ``text`` has ``size`` characters or more: a
    cheap gate that spares ordinary prose every regex scan below."""
    return max(map(len, text.split()), default=0) >= size  # no Python call per word


def prefixed(text: str) -> Iterator[Finding]:
    if not has_long_word(text, _SHORTEST_TOKEN):
        return
    lowered = fold_case(text)
    present = {needle for needle in _NEEDLES if needle in text}
    present.update(needle for needle in _FOLDED_NEEDLES if needle in lowered)
    for _kind, needles, pattern, check in _PREFIXED:
        if present.isdisjoint(needles):
            continue
        kind = _kind
        group = "secret" if "secret" in pattern.groupindex else 0
        for match in pattern.finditer(text):
            if word_start(text, match.start()) and check(match[group]):
                yield Finding(match.start(group), match.end(group), kind)


PREFIXED_KINDS: Final[tuple[str, ...]] = tuple(dict.fromkeys(k for k, _, _, _ in _PREFIXED))
"""The kinds this module reports."""
