"""Secret detectors: vendor tokens and fixed shapes.

Detectors of tokens that announce themselves: vendor prefixes (``sk_live_``, ``ghp_``,
``glpat-``, ``hf_``, ...) and fixed shapes (JWTs, SendGrid, Discord, Telegram tokens).

Every pattern is linear on any input: it starts with a literal (so the regex engine skips
ahead to it) and its only unbounded part is a final greedy run that cannot fail once started.
A pattern runs only on a text holding one of its needles, and none runs on a text without a
word long enough to be a token: ordinary prose costs a few `in` checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, NamedTuple

from layered_memory.safety._detector import (
    Check,
    Finding,
    always,
    fold_case,
    has_digit_or_caps,
    longest_word,
    mixed,
    word_start,
)


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
    check: Check = always
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
    _Token(
        "service_token",
        ("HRKU-",),
        re.compile(
            r"HRKU-AA[A-Za-z0-9_-]{58}"
            r"|HRKU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
        ),
        41,
    ),  # Heroku: platform keys, and the UUID form `heroku authorizations:create` prints
    _Token(
        "service_token",
        ("sk.eyJ", "tk.eyJ"),
        re.compile(r"[st]k\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
        46,
    ),  # Mapbox secret and temporary tokens (`pk.` is public)
    _Token(
        "service_token",
        ("4b1d", "bedrock-api-key-"),
        re.compile(
            r"4b1d[A-Za-z0-9]{38}(?![A-Za-z0-9])"  # ClickHouse Cloud
            r"|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%_-]{20,}"  # Bedrock
        ),
        42,
        has_digit_or_caps,
    ),
    _Token(
        "service_token",
        ("_gitlab_session=",),
        re.compile(r"_gitlab_session=(?P<secret>[0-9a-z]{32})(?![A-Za-z0-9])"),
        48,
    ),  # GitLab session cookie
    _Token(
        "service_token",
        ("s.",),
        re.compile(r"s\.[A-Za-z0-9]{24}(?![A-Za-z0-9_.])"),
        26,
        mixed,
    ),  # HashiCorp Vault legacy service token
    _Token(
        "service_token",
        ("|", "%7C"),
        re.compile(r"[0-9]{15,16}(?:\||%7C)[0-9A-Za-z_-]{27,40}(?![A-Za-z0-9_-])"),
        43,
        mixed,
    ),  # Facebook app access token: app id | app secret
    _Token(
        "service_token",
        (".acc_", ".acc-"),
        re.compile(
            r"(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-]"
            r"[A-Za-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}"
        ),
        53,
    ),  # Authress service client access key
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
        "url_credentials",
        ("://",),
        re.compile(r"https?://(?P<secret>[0-9a-f]{32}(?::[0-9a-f]{32})?)@[A-Za-z0-9-]"),
        42,
    ),  # Sentry DSN (`https://<key>@o1.ingest.sentry.io/2`): the key is the URL's user
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
