"""Secret redaction: credentials are cut out of text before it can reach memory.

Memory files are read back into every later prompt and often committed to version control, and
session stores outlive the run, so a key that slips into either leaks for good. `redact`
replaces each recognized secret with a `[REDACTED:<kind>]` marker and reports the kinds it
found, so callers can log *that* something was redacted without logging the secret itself.

How a text is scanned:

1. A scanning view is built (`scanning_view`, below): invisible characters removed, ASCII
   percent-escapes decoded, a token cut by a line break joined again.
2. Detectors (`# -- Detectors` below) run on the view: vendor tokens (``sk_live_``, ``ghp_``,
   ``hf_``, JWTs, ...), secrets with a structure (key blocks, URL credentials, Authorization
   headers, bare AWS secret keys), values of secret-named fields (``DB_PASSWORD=``, ``"password":``,
   ``*_TOKEN=``, ...) and passwords where a tool or a credential file puts them.
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

import base64
import binascii
import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

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


# -- Detectors -------------------------------------------------------------------------------------
# Each detector scans the scanning view of a text and yields the secrets it recognizes as
# `Finding` spans (the engine, `# -- The engine` below, merges them).
#
# Four families, one section each, in the order they depend on one another:
#
# - tokens that announce themselves: vendor prefixes (``sk_live_``, ``ghp_``, ``hf_``, ...) and
#   fixed shapes (JWTs, SendGrid, Discord, Telegram tokens);
# - values of secret-named fields (``DB_PASSWORD=``, ``"password":``, ``*_TOKEN=``, ...);
# - passwords where a tool or a credential file puts them (command-line flags, `.pgpass`,
#   `.netrc`);
# - secrets with a structure: key blocks, URL credentials, Authorization headers, bare AWS secret
#   access keys (`TOKEN_DETECTORS`, which include the prefixed tokens).
#
# Every scan is linear on any input; `tests/writeback/redaction` runs megabytes of adversarial
# text through all of them in a subprocess with a time limit.


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret: ``text[start:end]`` is to be replaced by ``[REDACTED:<kind>]``.

    Attributes:
        start: First character of the secret.
        end: One past its last character.
        kind: One of `REDACTION_KINDS`.
    """

    start: int
    end: int
    kind: str


Detector = Callable[[str], Iterable[Finding]]
"""Scans a text (the scanning view) and yields the secrets it recognizes, in any order."""


# ================================================================================================
# Vendor tokens and fixed shapes
#
# Detectors of tokens that announce themselves: vendor prefixes (``sk_live_``, ``ghp_``,
# ``glpat-``, ``hf_``, ...) and fixed shapes (JWTs, SendGrid, Discord, Telegram tokens).
#
# Every pattern is linear on any input: it starts with a literal (so the regex engine skips
# ahead to it) and its only unbounded part is a final greedy run that cannot fail once started.
# A pattern runs only on a text holding one of its needles, and none runs on a text without a
# word long enough to be a token: ordinary prose costs a few `in` checks.
# ================================================================================================

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


class _Token(NamedTuple):
    """One kind of token that announces itself.

    The pattern runs only on a text holding one of the needles (most texts hold none, and
    `in` is far cheaper than a regex scan) and a word of `shortest` characters or more (the
    shortest text the pattern matches: prose has no such word); it starts with a literal so the
    regex engine can skip ahead, and `word_start` replaces a leading `\b` (which would make the
    engine try every position). The span is the group "secret" when the pattern has one, else
    the whole match; `check` gets that span's text and can veto it. `back` > 0: the token
    starts that many characters before its needle (a fixed-width head, `abc8Q~...`), and the
    pattern is matched there, once per needle found, instead of searched.
    """

    kind: str
    needles: tuple[str, ...]
    pattern: re.Pattern[str]
    shortest: int
    check: Check = _always
    back: int = 0


_PREFIXED: Final[tuple[_Token, ...]] = (
    _Token(
        "jwt",
        ("eyJ",),
        re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        18,
    ),
    _Token("anthropic_api_key", ("sk-ant-",), re.compile(r"sk-ant-[A-Za-z0-9_-]{16,}"), 23),
    _Token(
        "openai_api_key",
        ("sk-",),
        re.compile(
            r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
            r"|sk-or-v1-[a-f0-9]{64}"  # OpenRouter
            r"|sk-lf-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # Langfuse
            r"|sk-[a-f0-9]{32}(?![A-Za-z0-9_-])"  # DeepSeek and other OpenAI-style APIs
        ),
        35,
    ),
    _Token("openai_api_key", ("sk-",), re.compile(r"sk-[A-Za-z0-9_-]{20,}"), 23, mixed),
    _Token(
        "aws_access_key_id",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        re.compile(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9_])"),
        20,
    ),
    _Token(
        "aws_session_token",
        ("ZXIvYXdz", "oJb3JpZ2luX2Vj"),
        re.compile(
            r"(?:FQoGZXIvYXdz|FwoGZXIvYXdz|[A-Za-z0-9]{2}oJb3JpZ2luX2Vj)[A-Za-z0-9/+=]{40,}"
        ),
        52,
    ),
    _Token(
        "github_token",
        ("gh", "github_pat_"),
        re.compile(r"gh[pousr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,}"),
        24,
    ),
    _Token(
        "gitlab_token",
        ("gl", "GR1348941"),
        re.compile(
            r"(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas|glffct)-"
            r"|GR1348941)[A-Za-z0-9_-]{20,}"
        ),
        25,
    ),
    _Token(
        "slack_token",
        ("xox", "xapp-"),
        re.compile(r"xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"),
        15,
    ),
    _Token(
        "webhook_url",
        ("https://",),
        re.compile(
            r"https://(?:hooks\.slack\.com/|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/"
            r"|[A-Za-z0-9-]{1,63}\.webhook\.office\.com/webhookb2/)"
            r"(?P<secret>[A-Za-z0-9_/@-]{20,})"
        ),
        44,
    ),
    _Token(
        "stripe_key",
        ("k_live_", "k_test_", "k_prod_", "whsec_"),
        re.compile(r"(?:sk|rk)_(?:live|test|prod)_[0-9a-zA-Z]{10,}|whsec_[A-Za-z0-9+/=]{20,}"),
        18,
    ),
    _Token("google_api_key", ("AIza",), re.compile(r"AIza[0-9A-Za-z_-]{35}"), 39),
    _Token(
        "google_oauth_secret",
        ("GOCSPX-", "ya29.", "1//0"),
        re.compile(r"GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[0-9A-Za-z_-]{20,}|1//0[0-9A-Za-z_-]{30,}"),
        25,
    ),
    _Token(
        "huggingface_token",
        ("hf_", "api_org_"),
        re.compile(r"(?:hf_|api_org_)[A-Za-z0-9]{30,}"),
        33,
        has_digit_or_caps,
    ),
    _Token("npm_token", ("npm_",), re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), 40),
    _Token(
        "pypi_token",
        ("pypi-",),
        re.compile(r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}"),
        70,
    ),
    _Token(
        "azure_storage_key",
        ("accountkey=",),
        re.compile(r"(?i)AccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})"),
        51,
    ),
    _Token(
        "sendgrid_api_key",
        ("SG.",),
        re.compile(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"),
        69,
    ),
    _Token(
        "twilio_api_key", ("AC", "SK"), re.compile(r"(?:AC|SK)[0-9a-f]{32}(?![A-Za-z0-9_])"), 34
    ),
    _Token(
        "mailchimp_api_key",
        ("-us",),
        re.compile(r"[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9_])"),
        36,
    ),
    _Token(
        "square_token",
        ("sq0", "EAAA"),
        re.compile(r"sq0(?:csp|atp)-[0-9A-Za-z_-]{22,}|EAAA[A-Za-z0-9_-]{56,}"),
        29,
        mixed,
    ),
    _Token(
        "telegram_bot_token",
        (":",),
        re.compile(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
        44,
        mixed,
    ),
    _Token(
        "discord_bot_token",
        (".",),
        re.compile(r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"),
        59,
        mixed,
    ),
    _Token(
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
        36,
    ),
    # Vendors of gitleaks' rule list (config/gitleaks.toml) and the model APIs agents use, one
    # pattern each; mostly literal prefixes with a fixed length, so look-alikes stay apart.
    _Token("service_token", ("ATATT3",), re.compile(r"ATATT3[A-Za-z0-9_=-]{150,}"), 156),
    _Token(
        "service_token",
        ("NRAK-", "NRII-"),
        re.compile(r"NRAK-[A-Z0-9]{27}(?![A-Za-z0-9])|NRII-[A-Za-z0-9_-]{32}(?![A-Za-z0-9])"),
        32,
    ),  # New Relic user and insert keys
    _Token("service_token", ("HRKU-",), re.compile(r"HRKU-AA[A-Za-z0-9_-]{58}"), 65),  # Heroku
    _Token("service_token", ("pul-",), re.compile(r"pul-[a-f0-9]{40}(?![A-Za-z0-9])"), 44),
    _Token("service_token", ("key-",), re.compile(r"key-[a-f0-9]{32}(?![A-Za-z0-9])"), 36),
    _Token(
        "service_token",
        (":APA91b",),
        re.compile(r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,}"),
        118,
    ),  # Firebase Cloud Messaging server key
    _Token(
        "service_token", ("sl.",), re.compile(r"sl\.(?:u\.)?[A-Za-z0-9_=-]{100,}"), 103, mixed
    ),  # Dropbox
    _Token(
        "service_token",
        ("LTAI",),
        re.compile(r"LTAI[A-Za-z0-9]{12,28}(?![A-Za-z0-9_])"),
        16,
        mixed,
    ),  # Alibaba Cloud access key id
    _Token(
        "service_token",
        ("ops_eyJ", "A3-"),
        re.compile(
            r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}"
            r"|A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})(?:-[A-Z0-9]{5}){3}"
        ),
        39,
    ),  # 1Password service account token, secret key
    _Token(
        "service_token",
        ("FLWSECK", "sm_"),
        re.compile(
            r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X|FLWSECK_TEST-[a-h0-9]{12}"  # Flutterwave
            r"|sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}(?![A-Za-z0-9])"  # SettleMint
        ),
        23,
        has_digit_or_caps,
    ),
    _Token(
        "service_token",
        (
            "p8e-",
            "ico-",
            "pnu_",
            "pscale_",
            "sgp_",
            "glsa_",
            "fo1_",
            "ntn_",
            "secret_",
            "sha256~",
            "pplx-",
            "shippo_",
            "tk-us-",
            "duffel_",
            "rubygems_",
        ),
        re.compile(
            r"p8e-[A-Za-z0-9]{32}(?![A-Za-z0-9])"  # Adobe client secret
            r"|ico-[A-Za-z0-9]{32}(?![A-Za-z0-9])"  # Infracost
            r"|pnu_[A-Za-z0-9]{36}"  # Prefect
            r"|pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}"  # PlanetScale
            r"|sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}"  # Sourcegraph
            r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"  # Grafana service account
            r"|fo1_[A-Za-z0-9_-]{43}"  # Fly.io
            r"|ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43}(?![A-Za-z0-9])"  # Notion
            r"|sha256~[A-Za-z0-9_-]{43}"  # OpenShift
            r"|pplx-[A-Za-z0-9]{48}"  # Perplexity
            r"|shippo_(?:live|test)_[a-fA-F0-9]{40}"  # Shippo
            r"|tk-us-[A-Za-z0-9_-]{48}"  # Scalingo
            r"|duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"  # Duffel
            r"|rubygems_[a-f0-9]{48}"  # RubyGems
        ),
        36,
        has_digit_or_caps,
    ),
    _Token(
        "service_token",
        (
            "CLOJARS_",
            "v1.0-",
            "dt0c01.",
            "EZAK",
            "EZTK",
            "EAAC",
            "EAAM",
            "fm1",
            "fm2_",
            "fio-u-",
            "eyJrIjoi",
            "s-s4t2",
            "rdme_",
            "xkeysib-",
            "xsmtpsib-",
        ),
        re.compile(
            r"CLOJARS_[a-z0-9]{60}"  # Clojars
            r"|v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"  # Cloudflare origin CA
            r"|dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"  # Dynatrace
            r"|EZ[AT]K[A-Za-z0-9]{54}"  # EasyPost
            r"|EAA[CM][A-Za-z0-9]{100,}"  # Facebook page and app tokens
            r"|fm(?:1[ar]|2)_[A-Za-z0-9+/]{100,}={0,3}"  # Fly.io
            r"|fio-u-[A-Za-z0-9_=-]{64}"  # Frame.io
            r"|eyJrIjoi[A-Za-z0-9]{70,}={0,3}"  # Grafana API key
            r"|s-s4t2(?:ud|af)-[a-f0-9]{64}"  # 42 intra
            r"|rdme_[a-z0-9]{70}"  # ReadMe
            r"|x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}"  # Brevo (Sendinblue)
        ),
        58,
        has_digit_or_caps,
    ),
    _Token(
        "service_token",
        ("pat", "sat."),
        re.compile(
            r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"  # Airtable
            r"|[ps]at\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"  # Harness
        ),
        72,
    ),
    _Token(
        "service_token",
        ("ABSK",),
        re.compile(r"ABSK[A-Za-z0-9+/]{109,}={0,2}"),
        113,
    ),  # Amazon Bedrock API key
    _Token(
        "service_token",
        ("API-",),
        re.compile(r"API-[A-Z0-9]{26}(?![A-Za-z0-9])"),
        30,
        lambda secret: any(char.isdigit() for char in secret),
    ),  # Octopus Deploy
    _Token(
        "service_token",
        ("gsk_", "xai-", "r8_", "nvapi-", "tvly-", "lsv2_", "pcsk_"),
        re.compile(
            r"gsk_[A-Za-z0-9]{48,}"  # Groq
            r"|xai-[A-Za-z0-9]{70,}"  # xAI
            r"|r8_[A-Za-z0-9]{37}(?![A-Za-z0-9])"  # Replicate
            r"|nvapi-[A-Za-z0-9_-]{60,}"  # NVIDIA
            r"|tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}"  # Tavily
            r"|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"  # LangSmith
            r"|pcsk_[A-Za-z0-9]{5,}_[A-Za-z0-9]{40,}"  # Pinecone
        ),
        37,
        has_digit_or_caps,
    ),
    # A fixed-width head before the needle (matched there, see `_Token.back`).
    _Token(
        "service_token",
        (".atlasv1.",),
        re.compile(r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}"),
        83,
        back=14,
    ),  # Terraform Cloud / Enterprise
    _Token(
        "service_token",
        ("Q~",),
        re.compile(r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"),
        37,
        back=4,
    ),  # Azure AD client secret
    _Token(
        "service_token",
        ("_mmk",),
        re.compile(r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk(?![A-Za-z0-9])"),
        40,
        back=36,
    ),  # MaxMind license key
    _Token(
        "softlayer_api_key",
        ("softlayer.com/",),
        re.compile(r"(?i)api\.softlayer\.com/(?:soap|rest)/v3(?:\.1)?/(?P<secret>[a-z0-9]{64})"),
        90,
    ),
)
_SHORTEST_TOKEN: Final = min(token.shortest for token in _PREFIXED)
_CASE_FOLDED: Final = frozenset({"azure_storage_key", "softlayer_api_key"})
"""Kinds whose needles are matched against the lower-cased text."""
_NEEDLES: Final = tuple(
    sorted(
        {(t.shortest, n, t.kind in _CASE_FOLDED) for t in _PREFIXED for n in t.needles},
        key=lambda entry: entry[0],
    )
)
"""(shortest token, needle, matched on the lower-cased text), shortest first."""

_ASCII_LOWER: Final = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def fold_case(text: str) -> str:
    """``text`` lower-cased without changing its length (``str.lower`` may, for a few
    non-ASCII letters), so positions in it are positions in ``text``."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def word_start(text: str, start: int) -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


def longest_word(text: str) -> int:
    """The length of the longest whitespace-separated word of ``text``: a cheap gate that spares
    ordinary prose the regex scans of tokens longer than its words."""
    return max(map(len, text.split()), default=0)  # no Python call per word


def has_long_word(text: str, size: int) -> bool:
    """Whether some whitespace-separated word of ``text`` has ``size`` characters or more."""
    return longest_word(text) >= size


def prefixed(text: str) -> Iterator[Finding]:
    longest = longest_word(text)
    if longest < _SHORTEST_TOKEN:
        return
    lowered = ""
    present: set[str] = set()
    for shortest, needle, folded in _NEEDLES:
        if shortest > longest:
            break
        if folded and not lowered:
            lowered = fold_case(text)
        if needle in (lowered if folded else text):
            present.add(needle)
    for token in _PREFIXED:
        if token.shortest > longest or present.isdisjoint(token.needles):
            continue
        yield from _found(text, token)


def _found(text: str, token: _Token) -> Iterator[Finding]:
    group = "secret" if "secret" in token.pattern.groupindex else 0
    if token.back:
        for needle in token.needles:
            at = text.find(needle, token.back)
            while at != -1:
                match = token.pattern.match(text, at - token.back)
                if match and word_start(text, match.start()) and token.check(match[group]):
                    yield Finding(match.start(group), match.end(group), token.kind)
                at = text.find(needle, at + 1)
        return
    for match in token.pattern.finditer(text):
        if word_start(text, match.start()) and token.check(match[group]):
            yield Finding(match.start(group), match.end(group), token.kind)


# ================================================================================================
# Secret-named fields
#
# The value of a secret-named field, whatever the value looks like.
#
# ``DB_PASSWORD=...``, ``"password": "..."``, ``api_key: ...``, ``export GITHUB_TOKEN=...``,
# ``--password ...``, ``?token=...``, ``Password=...;`` in a connection string, and the prose form
# "the password is ...": the name says it is a secret, so the value is cut out whatever its shape,
# unless it is plainly not a value (a placeholder, an environment reference, a type annotation).
#
# Scanning starts from the *end* of the name (the keyword right before the separator), so a
# non-secret assignment before it (``user=bob&password=...``) is never consumed by the regex; the
# rest of the name is read backwards, a bounded number of characters.
# ================================================================================================

_KEYWORDS: Final = (
    "password", "passwd", "passphrase", "passwort", "contrasena", "contrase\u00f1a", "pass",
    "pwd", "pw", "psk", "secret", "token", "credentials", "credential", "key", "sig",
    "signature",
)  # fmt: skip
"""The last word of a secret field's name; found with `str.find` on the case-folded text (a
case-insensitive regex alternation would try every position of every text)."""
# What may follow the keyword, matched on the case-folded text: an environment suffix, closing
# quotes or brackets or Markdown emphasis, then the separator (or a space, for `--flag value`).
_TAIL: Final = re.compile(
    r"(?P<suffix>[_-](?:[0-9]{1,3}|prod|production|dev|test|staging|stage|live|old|new|v[0-9]{1,2}))?"
    r"(?P<close>[\"'\]*_`]{0,4})"
    r"(?P<sep>[ \t]{0,8}(?::=|=>|===?|!==?|=|:(?![/:]))[ \t]{0,16}(?:[*_]{1,3}[ \t]*)?"
    r"|[ \t]+(?:is|was)[ \t]+"
    r"|[ \t]+)"
)
_NAME_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_MAX_NAME: Final = 64
# A quoted value may be wrapped once onto the next line; quoted and backquoted values are
# bounded so an unclosed quote costs at most two lines' scan.
_VALUE: Final = re.compile(
    r"\"(?P<dq>(?:[^\"\\\n]|\\.){1,1024}(?:\n(?![ \t])(?:[^\"\\\n]|\\.){0,1024})?)\""
    r"|'(?P<sq>(?:[^'\\\n]|\\.){1,1024}(?:\n(?![ \t])(?:[^'\\\n]|\\.){0,1024})?)'"
    r"|`(?P<bq>[^`\s](?:[^`\n]{0,1022}[^`\s])?)`"  # a Markdown code span: no edge spaces
    r"|(?P<bare>[^\s\"'`;]{1,512})"
)
_BARE_END: Final = re.compile(r"[\s\"'`;]")
_CHECKED: Final = 512
"""An unquoted value is read (and judged) up to this many characters; a longer one is cut out
to its end, found once per run of text: `password=` repeated over a megabyte without a space
stays linear."""
_COMPONENT: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

_PASSWORD_WORDS: Final = frozenset(
    {"password", "passwd", "passphrase", "passwort", "contrasena", "contraseña"}
)
_WHOLE_WORDS: Final = frozenset({"pass", "pwd", "pw", "psk", "sig", "signature"})
_PASS_COMPOUNDS: Final = ("storepass", "keypass")
"""Java's `keytool -storepass x`, `-srckeypass x`: a `pass` that ends a longer word."""
_KEY_QUALIFIERS: Final = frozenset(
    {
        "api", "auth", "access", "secret", "private", "priv", "client", "service", "account",
        "db", "database", "master", "signing", "sign", "encryption", "enc", "crypt", "session",
        "app", "application", "license", "subscription", "storage", "shared", "webhook", "hmac",
        "consumer", "ssh", "gpg", "pgp", "jwt", "cookie", "csrf", "admin", "root", "deploy",
        "preshared", "psk", "wpa",
    }
)  # fmt: skip
_STOPWORDS: Final = frozenset(
    {
        "a", "an", "and", "any", "are", "be", "bool", "bytes", "can", "changed", "empty",
        "env", "environment", "expired", "false", "field", "for", "from", "given", "hidden",
        "in", "int", "is", "manager", "masked", "must", "nil", "no", "none", "not", "null",
        "object", "of", "on", "optional", "or", "password", "policy", "protected", "provided",
        "redacted", "required", "reset", "rotated", "secret", "secretstr", "see", "set",
        "should", "str", "string", "text", "the", "to", "token", "true", "undefined", "unset",
        "vault", "via", "was", "will", "yes",
    }
)  # fmt: skip
_PLACEHOLDER: Final = re.compile(
    r"<[^<>]*>|\{\{.*\}\}|\$\{.*\}|\$\(.*\)|\$[A-Z_][A-Z0-9_]*|%\(\w+\)s|%[A-Z_]+%"
    r"|[*xX\u2022.\u2026#-]+|.*(?:\.\.\.|\u2026).*"
    r"|[|>][-+]?[0-9]?"  # a YAML block scalar: the value is on the next lines
    r"|(?i:(?:your|my|insert|enter|replace|example|sample|dummy|fake|placeholder|redacted"
    r"|changeme|todo|tbd|xxx+)(?:[\s_-].*)?|.*[_-](?:here|goes[_-]here)"
    r"|pass|password|passwd|pw|pwd|secret|token|key|credentials?)"
    r"|(?:Optional|SecretStr|Secret|str|bytes|Union)\[.*\]?"
)
_CODE_REFERENCE: Final = re.compile(
    r"(?:process\.env|os\.environ|import\.meta\.env|ENV|env|secrets|vars|settings|config)[.\[(]"
    r"|[A-Za-z_][\w.]*[(\[]"
)
_NOT_A_SECRET: Final = re.compile(
    r"!\w+"  # a YAML tag (`!vault |`)
    # A file path: two segments or more, or one with an extension (a base64 key may start
    # with `/` too, but has `+`, or no second `/` and no extension).
    r"|(?:~|\.{1,2})?(?:/[\w.@-]+){2,}/?|(?:~|\.{1,2})?/[\w@-]*\.\w{1,5}"
    r"|[A-Za-z][A-Za-z0-9+.-]*://\S*"  # a URL (its credentials have their own detector)
)
_MARKER: Final = re.compile(r"\[REDACTED:[a-z_]{1,40}\]")
_CLOSERS: Final = {")": "(", "]": "[", "}": "{", ">": "<"}
_PROSE_WORD: Final = re.compile(r"[A-Za-z][a-z]*\Z")


def _components(name: str) -> list[str]:
    return [part.lower() for part in _COMPONENT.findall(name)]


def _family(name: str, keyword: str) -> str | None:
    """``"password"``, ``"secret"`` or None (not a secret's name), from the whole field name."""
    word = keyword.lower()
    parts = _components(name)
    if not parts:
        return None
    last = parts[-1]
    if word in _PASSWORD_WORDS or word.startswith("contrase"):
        return "password"
    if word in _WHOLE_WORDS:
        if word == "pass" and last.endswith(_PASS_COMPOUNDS):
            return "password"
        if last != word:  # `bypass`, `compass`, `config_sig` inside a word
            return None
        return "password" if word in {"pass", "pwd", "pw", "psk"} else "secret"
    if word == "key":
        qualified = last == "key" and len(parts) > 1 and parts[-2] in _KEY_QUALIFIERS
        joined = last.endswith("key") and last[:-3] in _KEY_QUALIFIERS
        return "secret" if qualified or joined else None
    return "secret"  # secret, token, credential(s): the name ends with them


def _kind(name: str, family: str) -> str:
    if family == "password":
        return "password"
    joined = "".join(_components(name))
    if "secretaccesskey" in joined and ("aws" in joined or joined.startswith("secretaccesskey")):
        return "aws_secret_access_key"
    if joined.endswith(("sessiontoken", "securitytoken")) and (
        "aws" in joined or "amz" in joined or joined in {"sessiontoken", "securitytoken"}
    ):
        return "aws_session_token"
    if joined.endswith("accountkey"):
        return "azure_storage_key"
    return "secret_assignment"


def _looks_random(value: str) -> bool:
    """A credential, not a word: long enough, with digits, inner capitals or punctuation."""
    if len(value) < 8:
        return False
    return any(c.isdigit() or not c.isalnum() for c in value) or any(c.isupper() for c in value[1:])


def is_placeholder(value: str) -> bool:
    """Whether ``value`` stands for a secret rather than being one: a marker, a template or
    environment reference, a masked or elided value, a word like ``password``."""
    return (
        not any(char.isalnum() for char in value)
        or value.startswith("[REDACTED")
        or _PLACEHOLDER.fullmatch(value) is not None
    )


def _is_value(value: str, name: str, family: str, *, prose: bool, rest_of_line: str) -> bool:
    if not value or is_placeholder(value) or value.lower() == name.lower():
        return False
    if _NOT_A_SECRET.fullmatch(value):
        return False
    if _CODE_REFERENCE.match(value):
        return False
    if prose or family != "password":
        return _looks_random(value)
    if value.lower() in _STOPWORDS:
        return False
    # `Password: Rotated quarterly` is a sentence; `password: hunter` is a value.
    return not (_PROSE_WORD.match(value) and re.match(r"[ \t]+[A-Za-z]", rest_of_line))


def _name_start(text: str, end: int) -> int:
    start = end
    limit = max(0, end - _MAX_NAME)
    while start > limit and text[start - 1] in _NAME_CHARS:
        start -= 1
    return start


def assignments(text: str) -> Iterator[Finding]:
    """Yield the value of every secret-named field in ``text``."""
    folded = fold_case(text)
    run = [0, 0]  # the last long unquoted run measured: [start, end)
    for keyword in _KEYWORDS:
        at = folded.find(keyword)
        while at != -1:
            found = _assignment_at(text, folded, at, at + len(keyword), run)
            if found is not None:
                yield found
            at = folded.find(keyword, at + 1)


def _run_end(text: str, start: int, run: list[int]) -> int:
    """End of the unquoted run containing ``start`` (cached: every position of one run shares
    its end)."""
    if not run[0] <= start < run[1]:
        stop = _BARE_END.search(text, start)
        run[:] = [start, stop.start() if stop else len(text)]
    return run[1]


def _assignment_at(
    text: str, folded: str, keyword_start: int, keyword_end: int, run: list[int]
) -> Finding | None:
    tail = _TAIL.match(folded, keyword_end)
    if tail is None:
        return None
    name_start = _name_start(text, keyword_start)
    name = text[name_start:keyword_end]
    sep = tail["sep"]
    if sep.strip() == "" and not name.startswith("-"):
        return None  # `the token budget`: a word followed by a space, not `--token value`
    name = name.lstrip("-.")
    family = _family(name, folded[keyword_start:keyword_end])
    if family is None:
        return None
    value_match = _VALUE.match(text, tail.end())
    if value_match is None:
        return None
    group = next(g for g in ("dq", "sq", "bq", "bare") if value_match[g] is not None)
    if group in {"bare", "bq"} and sep.strip().startswith(("==", "!=")):
        return None  # `if password == expected:` compares two names; a quoted literal is a value
    start, end = value_match.span(group)
    if is_placeholder(value_match[group]):
        return None  # before trimming: `sk-...` is a placeholder, `sk-` would not be
    if group == "bare":
        in_query = name_start > 0 and text[name_start - 1] in "?&"
        end = _trim_bare(text, start, end, in_query=in_query)
        if end - start == _CHECKED:
            return Finding(start, _run_end(text, start, run), _kind(name, family))
    value = text[start:end]
    prose = sep.strip() in {"is", "was"}
    if _is_value(value, name, family, prose=prose, rest_of_line=text[end : end + 3]):
        return Finding(start, end, _kind(name, family))
    return None


def field_kind(name: str, value: str) -> str | None:
    """The kind of secret `value` is as the value of a field called `name`, or None.

    For structured data (a key of a saved JSON object): `{"password": "hunter2"}` holds the
    same secret as the text `password=hunter2`, but the text detectors see the key and the
    value as two separate strings, neither a secret alone. The name is read as in text (its
    last word, an environment suffix such as `_PROD`), and the value judged as an unquoted
    value of an assignment (placeholders, references and plain words are left alone).
    """
    # A marker is no name: a key redacted before (`[REDACTED:github_token]`, saved again by
    # the next tier of a store) must not make its value a `token`.
    if "[REDACTED:" in name:
        name = _MARKER.sub(" ", name)
    folded = fold_case(name)
    for keyword in _KEYWORDS:
        at = folded.rfind(keyword)
        if at == -1:
            continue
        # The keyword ends the name (an environment suffix or closing quotes aside): matched
        # as if `=` followed it, the way `_assignment_at` reads `name=value`.
        tail = _TAIL.match(folded + "=", at + len(keyword))
        if tail is None or tail.end() <= len(folded) or tail["sep"].strip() != "=":
            continue
        field = name[_name_start(name, at) : at + len(keyword)].lstrip("-.")
        family = _family(field, folded[at : at + len(keyword)])
        if family is None:
            return None
        # Judged on its start, as an unquoted value in text is: a megabyte-long value costs
        # no more than a short one.
        stripped = value.strip()[:_CHECKED]
        if _is_value(stripped, field, family, prose=False, rest_of_line=""):
            return _kind(field, family)
        return None
    return None


def _trim_bare(text: str, start: int, end: int, *, in_query: bool) -> int:
    """End of an unquoted value: before `&`/`#` in a query string, before closing punctuation."""
    if in_query:
        for stop in "&#":
            found = text.find(stop, start, end)
            if found != -1:
                end = found
    while end > start:
        last = text[end - 1]
        closer = _CLOSERS.get(last)
        value = text[start:end]
        if last in ".," or (closer is not None and value.count(closer) < value.count(last)):
            end -= 1
        else:
            break
    return end


# ================================================================================================
# Command-line passwords and credential files
#
# Passwords where a tool or a credential file puts them: command-line flags whose meaning
# depends on the command (`mysql -pX`, `redis-cli -a X`, `ldapsearch -w X`, `sshpass -p X`,
# `docker login -p X`, `sqlcmd -P X`, `smbclient -U user%X`), Oracle's `user/password@host`,
# `.pgpass` lines and `.netrc` entries.
#
# A flag is read only on a line that runs its command (`-p` is a port to `ssh` and `psql`, a
# password to `mysql`), from the command's name to the end of the line (at most `_LINE` chars);
# each line is read once, however often a command's name appears in it, so hostile text stays
# linear. Every pattern is bounded and starts with a literal or is matched at a known position.
# ================================================================================================

_LINE: Final = 1024
"""Characters of a command line read after the command's name."""
_FLAG_VALUE: Final = (
    r"(?:'(?P<sq>[^'\n]{1,256})'|\"(?P<dq>[^\"\n]{1,256})\"|(?P<bare>[^\s'\"`;|&<>]{1,256}))"
)
# (names that run the command, its password and the blank that must precede it: a flag
# follows a blank; Oracle's `user/password@host` follows a blank or the URL's `thin:`).
_COMMANDS: Final[tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...]] = (
    (("mysql", "mariadb"), re.compile(rf"-p{_FLAG_VALUE}"), " \t"),  # attached: `-p` alone prompts
    (("redis-cli",), re.compile(rf"(?:-a|--pass)[ \t]+{_FLAG_VALUE}"), " \t"),
    (("ldap",), re.compile(rf"-w[ \t]+{_FLAG_VALUE}"), " \t"),  # ldapsearch, ldapmodify, ...
    (("sshpass",), re.compile(rf"-p[ \t]*{_FLAG_VALUE}"), " \t"),
    (("mongo",), re.compile(rf"-p[ \t]+{_FLAG_VALUE}"), " \t"),
    (
        (
            "docker login",
            "podman login",
            "buildah login",
            "nerdctl login",
            "skopeo login",
            "registry login",
            "oc login",
            "az login",
        ),
        re.compile(rf"-p[ \t]+{_FLAG_VALUE}"),
        " \t",
    ),
    (("sqlcmd", "bcp ", "osql"), re.compile(rf"-P[ \t]*{_FLAG_VALUE}"), " \t"),
    (
        ("smbclient", "rpcclient", "smbmap"),
        re.compile(rf"-U[ \t]*[^\s%'\"]{{1,128}}+%{_FLAG_VALUE}"),
        " \t",
    ),
    (
        ("sqlplus", "jdbc:oracle:thin:", "expdp", "impdp", "sqlldr", "rman "),
        re.compile(r"(?<![\w$#])[A-Za-z][\w$#]{0,127}+/(?P<bare>[^\s@/'\"]{1,256}+)@(?://)?\w"),
        " \t:",
    ),
)
# `host:port:database:user:password`, a whole line (a port number or `*`).
_PGPASS_PORT: Final = re.compile(r":(?:[0-9]{1,5}|\*):")
_PGPASS_LINE: Final = re.compile(
    r"[^\s:#][^\s:]{0,252}:(?:[0-9]{1,5}|\*):[^\s:]{1,63}:[^\s:]{1,63}:(?P<bare>\S{1,256})"
)
# `machine host [login user] [account x] [port n] password secret`, on one line or several.
_NETRC: Final = re.compile(
    r"machine[ \t]++\S{1,253}+(?:\s{1,64}+(?:login|account|port)\s{1,64}+\S{1,256}+){0,3}+"
    r"\s{1,64}+password\s{1,64}+(?P<bare>\S{1,256}+)"
)


def credentials(text: str) -> Iterator[Finding]:
    """Yield the passwords of command lines and credential files in ``text``."""
    # Most prose has no flag after a blank and no `@`: it skips every command's name search.
    flags = " -" in text or "\t-" in text
    at_sign = "@" in text
    for names, password, blanks in _COMMANDS:
        if not (at_sign if ":" in blanks else flags):
            continue
        for name in names:
            yield from _command_line(text, name, password, blanks)
    yield from _pgpass(text)
    if "machine" in text:
        for match in _NETRC.finditer(text):
            yield from _value(match)


def _command_line(
    text: str, name: str, password: re.Pattern[str], blanks: str
) -> Iterator[Finding]:
    """The passwords on each line from ``name`` on (each stretch of text read once)."""
    read_to = 0
    at = text.find(name)
    while at != -1:
        if at >= read_to:
            end = text.find("\n", at)
            read_to = min(len(text) if end == -1 else end, at + _LINE)
            for match in password.finditer(text, at + len(name), read_to):
                if text[match.start() - 1] in blanks:
                    yield from _value(match)
        at = text.find(name, at + 1)


def _pgpass(text: str) -> Iterator[Finding]:
    line_end = -1
    for port in _PGPASS_PORT.finditer(text):
        if port.start() < line_end:
            continue  # this line was read
        start = text.rfind("\n", 0, port.start()) + 1
        end = text.find("\n", port.end())
        line_end = len(text) if end == -1 else end
        line = _PGPASS_LINE.fullmatch(text, start, line_end)
        host = text[start : text.find(":", start)]
        if line is not None and (
            host == "*" or any(char.isalpha() or char == "." for char in host)
        ):
            yield from _value(line)


def _value(match: re.Match[str]) -> Iterator[Finding]:
    group = next(name for name in ("sq", "dq", "bare") if match.groupdict().get(name) is not None)
    value = match[group]
    if not is_placeholder(value) and not value.startswith(("-", "$")):
        yield Finding(match.start(group), match.end(group), "password")


# ================================================================================================
# Secrets with a structure
#
# Detectors of secrets with a structure: key blocks (PEM, PGP, PuTTY), credentials in URLs
# and Authorization headers, and bare AWS secret access keys.
#
# Every scan here is linear on any input: literal starts found with `str.find` or a literal-first
# pattern, bounded lookarounds, and searches whose result is remembered (the END line of a key
# block is looked for once, not once per BEGIN line). `tests/writeback/redaction` runs megabytes of
# adversarial text through all of them in a subprocess with a time limit.
# ================================================================================================

_PEM_BEGIN: Final = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?|OpenVPN Static key V[0-9])-----"
    r"|PuTTY-User-Key-File-[0-9]: "
)
# A key block base64-encoded as a whole (kubeconfig `client-key-data`, Kubernetes secrets,
# environment variables): `-----BEGIN ` encodes to this at the start of the data.
_PEM_B64: Final = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{16,}={0,2}")
_PEM_B64_LABEL: Final = re.compile(rb"-----BEGIN [A-Za-z0-9 ]{0,40}(?:PRIVATE KEY|Static key)")
# A key block cut short (no END line): armor headers (`Proc-Type: ...`, each may be followed by
# one blank line) and base64 lines, up to the first line that is neither. Every repetition
# consumes a whole line and each part of a line is bounded, so a hostile block stays linear.
_KEY_LINES: Final = (
    r"(?:[A-Za-z][\w-]{0,40}:[^\n]{0,200}(?:\r?\n|\Z)(?:[ \t]*\r?\n)?"
    r"|[ \t]*[A-Za-z0-9+/=]+[ \t]*(?:\r?\n|\Z))*"
)
_PEM_TAIL: Final = re.compile(r"[ \t]*(?:\r?\n)?" + _KEY_LINES)
_PUTTY_TAIL: Final = re.compile(r"[^\n]{0,200}(?:\r?\n|\Z)" + _KEY_LINES)  # after the key type
_PUTTY_END: Final = re.compile(r"Private-MAC: [0-9a-fA-F]+")

# `scheme://user:password@host`, tried only where `://` occurs, and only where an `@` follows
# within reach, so ordinary URLs cost one failed match. The password may hold `/`, `@` and `:`
# (written unescaped by people).
_URL_SCHEME_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-"
)
_URL_USERINFO: Final = re.compile(r"(?P<user>[^\s:/?#@\[\]\"'<>`]{0,128}):(?=[^\s\"'<>`]{0,128}@)")
_URL_RUN: Final = re.compile(r"[^\s\"'<>`]{0,192}")
_URL_HOST: Final = re.compile(
    r"(?:[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,16}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?"
)
_PORT_THEN_PATH: Final = re.compile(r"[0-9]{1,5}(?:/|\Z)")

# A run of base64 characters, consumed whole (so the engine never re-tries inside a word).
_B64_RUN: Final = re.compile(r"[A-Za-z0-9/+]+(?P<padding>=*)")

# These run on the lower-cased text (same length, same positions), where their literal start
# lets the engine skip ahead; case-insensitive patterns would try every position.
_BEARER: Final = re.compile(r"bearer[ \t]+(?P<secret>[a-z0-9._~+/-]{16,}=*)")
_BASIC: Final = re.compile(r"basic[ \t]+(?P<secret>[a-z0-9+/]{8,}={0,2})(?![a-z0-9+/=])")
_CURL_USER: Final = re.compile(
    r"(?<!\S)(?:-u|--user)[ \t]+[\"']?[^\s:\"'\[]{1,128}:(?P<secret>[^\s\"'`]*[^\s\"'`.,;)])"
)
# A registry login stored as base64 `user:password` (Docker's `config.json` `"auth"`, npm's
# `_auth=`), on the lower-cased text; `_is_basic_credential` decodes the original.
_AUTH_FIELD: Final = re.compile(
    r"auth[\"']?[ \t]*[:=][ \t]*[\"']?(?P<secret>[a-z0-9+/]{12,}={0,2})(?![a-z0-9+/=])"
)
_NPM_AUTH_FIELD: Final = re.compile(r"_" + _AUTH_FIELD.pattern)
_AUTHORIZATION: Final = re.compile(
    r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|apikey|api-key|key|sso-key|bot|dsn)[ \t]+)?"
    r"(?P<secret>[^\s\"'`]{8,})"
)


def _private_keys(text: str) -> Iterator[Finding]:
    # The END marker of a label is searched once from where it was last needed: a text holding
    # thousands of BEGIN lines and no END stays linear.
    if "-----BEGIN " not in text and "PuTTY-User-Key-File-" not in text:
        return
    next_end: dict[str, int] = {}
    for match in _PEM_BEGIN.finditer(text):
        label = match["label"]
        if label is None:  # PuTTY key file: ends at its Private-MAC line
            known = next_end.get("", -2)
            if known == -2 or (known != -1 and known < match.end()):
                mac = _PUTTY_END.search(text, match.end())
                known = mac.end() if mac else -1
                next_end[""] = known
            tail = _PUTTY_TAIL.match(text, match.end())
            end = known if known != -1 else match.end() + len(tail[0].rstrip()) if tail else 0
            yield Finding(match.start(), max(end, match.end()), "private_key")
            continue
        marker = f"-----END {label}-----"
        known = next_end.get(label, -2)
        if known == -2 or (known != -1 and known < match.end()):
            known = text.find(marker, match.end())
            next_end[label] = known
        if known != -1:
            yield Finding(match.start(), known + len(marker), "private_key")
            continue
        tail = _PEM_TAIL.match(text, match.end())
        if tail is not None and any(c.isalnum() for c in tail[0]):
            yield Finding(match.start(), match.end() + len(tail[0].rstrip()), "private_key")


def _encoded_private_keys(text: str) -> Iterator[Finding]:
    if "LS0tLS1CRUdJTi" not in text:
        return
    for match in _PEM_B64.finditer(text):
        head = match[0][:88]
        try:
            decoded = base64.b64decode(head[: len(head) - len(head) % 4], validate=True)
        except (binascii.Error, ValueError):
            continue
        if _PEM_B64_LABEL.match(decoded):
            yield Finding(match.start(), match.end(), "private_key")


def _url_credentials(text: str) -> Iterator[Finding]:
    at_scheme = text.find("://")
    while at_scheme != -1:
        scheme_start = at_scheme
        while scheme_start > max(0, at_scheme - 32) and text[scheme_start - 1] in _URL_SCHEME_CHARS:
            scheme_start -= 1
        if scheme_start < at_scheme and text[scheme_start].isalpha():
            found = _password_of(text, at_scheme + 3)
            if found is not None:
                yield found
        at_scheme = text.find("://", at_scheme + 3)


def _password_of(text: str, start: int) -> Finding | None:
    userinfo = _URL_USERINFO.match(text, start)
    if userinfo is None:
        return None
    start = userinfo.end()
    run = _URL_RUN.match(text, start)
    end = run.end() if run else start
    # The host follows the last `@` that is followed by a host: a password may contain `@`.
    at = text.rfind("@", start, end)
    for _ in range(4):
        if at == -1:
            return None
        host = _URL_HOST.match(text, at + 1, end)
        if host is not None and (host.end() == end or text[host.end()] in "/?#"):
            password = text[start:at]
            # `host:8080/path/@handle` is a port and a path, not a password.
            if is_placeholder(password) or _PORT_THEN_PATH.match(password):
                return None
            return Finding(start, at, "url_credentials") if password else None
        at = text.rfind("@", start, at)
    return None


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _aws_secret_keys(text: str) -> Iterator[Finding]:
    # AWS secret access keys have no prefix: 40 base64 characters on their own. Commit hashes
    # (lower-case hex), base64 data (longer runs) and paths (low entropy, no digits) are not.
    if not has_long_word(text, 40):
        return
    for match in _B64_RUN.finditer(text):
        if match["padding"]:
            continue  # padded: base64 data, not a key
        secret = match[0]
        if len(secret) == 40 and mixed(secret) and _entropy(secret) >= 4.2:
            yield Finding(match.start(), match.end(), "aws_secret_access_key")


def _authorization(text: str) -> Iterator[Finding]:
    lowered = fold_case(text)
    for needle, pattern, kind, check in _HEADERS:
        if needle not in lowered:
            continue
        for match in pattern.finditer(lowered):
            if not word_start(lowered, match.start()):
                continue
            start, end = match.span("secret")
            if check(text[start:end]):
                yield Finding(start, end, kind)


def _not_a_reference(secret: str) -> bool:
    return not is_placeholder(secret)


def _credential_like(secret: str) -> bool:
    """A credential after a scheme the patterns do not know: random, so it has digits
    (``Basic|Bearer|Token`` in documentation has none)."""
    return not is_placeholder(secret) and any(char.isdigit() for char in secret)


def _is_basic_credential(secret: str) -> bool:
    """``Basic <base64 of user:password>``, not the words after "basic" in prose."""
    try:
        decoded = base64.b64decode(secret + "=" * (-len(secret) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


_HEADERS: Final[tuple[tuple[str, re.Pattern[str], str, Check], ...]] = (
    ("bearer", _BEARER, "bearer_token", has_digit_or_caps),
    ("basic", _BASIC, "basic_auth", _is_basic_credential),
    ("-u", _CURL_USER, "basic_auth", _not_a_reference),
    ("authorization", _AUTHORIZATION, "authorization_header", _credential_like),
    ("auth", _AUTH_FIELD, "basic_auth", _is_basic_credential),
    ("_auth", _NPM_AUTH_FIELD, "basic_auth", _is_basic_credential),
)

TOKEN_DETECTORS: Final = (
    _private_keys,
    _encoded_private_keys,
    prefixed,
    _aws_secret_keys,
    _authorization,
    _url_credentials,
)
"""The detectors of this section and the prefixed tokens, in precedence order."""


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


# ================================================================================================
# The scanning view
#
# The scanning view of a text: what a secret looks like once its disguises are taken off.
#
# Detectors run on a *view* of the text in which
#
# 1. invisible characters are gone (zero-width spaces and joiners, soft hyphens, bidi controls,
#    variation selectors, Unicode tag characters: every format character, category Cf),
# 2. percent-escapes of ASCII characters are decoded (``sk%5Flive%5F...`` reads ``sk_live_...``),
# 3. a line break between two pieces of one token is removed (a key wrapped over two lines, a
#    URL's password on the line after its `user:`).
#
# The view keeps a map back to the original, so a secret found in the view is cut out of the
# original text at exactly the characters it spans there (its invisible characters, escapes and
# line breaks included), and every other character of the original is left as it was.
#
# Each step is one linear regex pass; a text without anything to undo is its own view (no copy,
# no map), which is the common case for write-back.
# ================================================================================================

_INVISIBLE: Final = (
    "\x00-\x08\x0e-\x1f\x7f"  # C0 controls but tab and line breaks, and DEL: `PASSWORD\x00=`
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f"
    "\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef"
)
"""Control characters a terminal shows as nothing, format characters (Unicode category Cf)
plus the other code points that render as nothing
(combining grapheme joiner, Hangul fillers, variation selectors): written out rather than
computed from `unicodedata` at import, which would walk all 1.1 million code points."""

# Stage 1: invisible characters and percent-escapes (ASCII ones, and UTF-8 sequences, which
# may spell an invisible character: `%E2%80%8B`). Run twice: `%255F` is `_` encoded twice.
_HIDDEN: Final = re.compile(
    f"[{_INVISIBLE}]+|%[0-7][0-9A-Fa-f]|%[C-Fc-f][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){{1,3}}"
)
_INVISIBLE_CHAR: Final = re.compile(f"[{_INVISIBLE}]")
_ASCII_CONTROL: Final = re.compile("[\x00-\x08\x0e-\x1f\x7f]")

# Stage 2: a line break (an optional shell continuation `\`, CR, indentation of the next line)
# between two visible characters. Whether it really cuts a token is decided in Python.
# A line ending in `:`, `=`, `,`, `;` or an opening bracket ends a statement (`if x:`,
# `key =`), so the next line is never read as its continuation.
_BREAK: Final = re.compile(r"(?<=[^\s:=,;(\[{])\\?\r?\n[ \t]*(?=\S)")
# The one `:` a line may end with and still continue: a URL's `user:` (`postgres://admin:`,
# the password and `@host` on the next line). Only a view: the URL detector still decides
# whether a password and a host follow. Starts with the literal `://` and is bounded: linear.
_URL_USER_BREAK: Final = re.compile(r"://[^\s:/?#@\[\]\"'<>`]{0,128}:(?P<brk>\r?\n[ \t]*)(?=\S)")
# `NAME=value`, `name: value`, `name = value`; not base64 padding (`...b3==`, `...==;k=v`,
# `...I="}}` closing a JSON string).
_ASSIGNMENT: Final = re.compile(
    r"[A-Za-z_][\w.-]*(?:[ \t]+[=:]|:(?!//)|=(?!=|[ \t]*\Z|[\"'][\s,;)\]}]*\Z))"
)
_WORD_LIKE: Final = re.compile(r"[a-z]+|[A-Z][a-z]+|[A-Z]+|[0-9]{1,5}")
_LINE_WORD_LIKE: Final = re.compile(r"[a-z]+|[A-Z][a-z]+|[0-9]{1,5}")
_FRAMING: Final = "()[]{}<>\"'*_`,.;:!?"


@dataclass(frozen=True, slots=True)
class _Edits:
    """Where a view differs from its source: parallel sorted lists, one entry per edit.

    Edit ``i`` replaced ``src_len[i]`` source characters at ``src_at[i]`` by ``view_len[i]``
    view characters at ``view_at[i]``.
    """

    view_at: list[int]
    view_len: list[int]
    src_at: list[int]
    src_len: list[int]

    def start(self, position: int) -> int:
        """Source offset of the view character at ``position`` (removed text before it is not
        part of it)."""
        i = bisect_right(self.view_at, position) - 1
        if i < 0:
            return position
        if position < self.view_at[i] + self.view_len[i]:
            return self.src_at[i]
        return self.src_at[i] + self.src_len[i] + position - self.view_at[i] - self.view_len[i]

    def end(self, position: int) -> int:
        """Source offset just after the view character before ``position`` (removed text after
        it is not part of it)."""
        i = bisect_left(self.view_at, position) - 1
        if i < 0:
            return position
        if position < self.view_at[i] + self.view_len[i]:
            return self.src_at[i] + self.src_len[i]
        return self.src_at[i] + self.src_len[i] + position - self.view_at[i] - self.view_len[i]


@dataclass(frozen=True, slots=True)
class View:
    """A text as the detectors see it, with the way back to the original.

    Attributes:
        text: The scanning view.
    """

    text: str
    _maps: tuple[_Edits, ...]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The original text's span covered by the view's ``[start, end)``."""
        for edits in reversed(self._maps):
            start, end = edits.start(start), edits.end(end)
        return start, end


def scanning_view(text: str) -> View:
    """Build the scanning view of ``text`` (see the module docstring)."""
    maps: list[_Edits] = []
    current = text
    for stage in (_undo_hidden, _undo_hidden, _join_broken_tokens):
        result = stage(current)
        if result is not None:
            current, edits = result
            maps.append(edits)
    return View(current, tuple(maps))


def _apply(text: str, edits: list[tuple[int, int, str]]) -> tuple[str, _Edits]:
    """Apply ``(start, end, replacement)`` edits (sorted, disjoint) and record the map."""
    parts: list[str] = []
    view_at: list[int] = []
    view_len: list[int] = []
    src_at: list[int] = []
    src_len: list[int] = []
    last = 0
    size = 0
    for start, end, replacement in edits:
        parts.append(text[last:start])
        size += start - last
        parts.append(replacement)
        view_at.append(size)
        view_len.append(len(replacement))
        src_at.append(start)
        src_len.append(end - start)
        size += len(replacement)
        last = end
    parts.append(text[last:])
    return "".join(parts), _Edits(view_at, view_len, src_at, src_len)


def _undo_hidden(text: str) -> tuple[str, _Edits] | None:
    if "%" not in text and text.isascii() and _ASCII_CONTROL.search(text) is None:
        return None
    edits = [(m.start(), m.end(), _decoded(m[0])) for m in _HIDDEN.finditer(text)]
    return _apply(text, edits) if edits else None


def _decoded(found: str) -> str:
    if found[0] != "%":
        return ""  # invisible characters
    raw = bytes(int(found[i + 1 : i + 3], 16) for i in range(0, len(found), 3))
    try:
        char = raw.decode("utf-8")
    except UnicodeDecodeError:
        return found
    return "" if _INVISIBLE_CHAR.fullmatch(char) else char


def _join_broken_tokens(text: str) -> tuple[str, _Edits] | None:
    if "\n" not in text:
        return None
    edits = [
        (m.start(), m.end(), "") for m in _BREAK.finditer(text) if _continues_token(text, m.end())
    ]
    if "://" in text:
        # Disjoint from the breaks above, which never follow a `:`.
        edits.extend((m.start("brk"), m.end("brk"), "") for m in _URL_USER_BREAK.finditer(text))
        edits.sort()
    return _apply(text, edits) if edits else None


def _continues_token(text: str, start: int) -> bool:
    """Whether the line starting at ``start`` begins with the rest of a cut token.

    Joining is only a view, but a secret found across the join is cut out through it, so the
    next line must not look like the start of ordinary text: a word (``Rotate it``, ``Done``),
    a list marker (``- item``, ``1. step``) or a new assignment (``DB_HOST=...``, ``user: x``).
    Its first word is taken as the tail of the token above when it is the whole line (and not
    a plain word), or when it is unlike a word (digits, inner capitals, symbols) and not
    shorter than four characters.
    """
    end = text.find("\n", start)
    line = text[start : len(text) if end == -1 else end].rstrip()
    word = line.split(None, 1)[0] if line else ""
    if not any(char.isalnum() for char in word) or _ASSIGNMENT.match(line):
        return False
    core = word.strip(_FRAMING)
    if word == line:
        return _LINE_WORD_LIKE.fullmatch(core) is None
    return len(word) >= 4 and _WORD_LIKE.fullmatch(core) is None
