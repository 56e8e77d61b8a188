"""Detectors of secrets that carry their own shape: vendor prefixes, key blocks, credentials in
URLs and Authorization headers.

Every pattern here is linear on any input: each starts with a literal or a bounded prefix, and
its only unbounded part is a final greedy run that cannot fail once started, so no start
position is ever re-scanned more than a bounded number of characters (`tests/redaction` runs
1 MB of adversarial text through all of them in a subprocess with a time limit).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Iterator
from typing import Final

from layered_memory.redaction._types import Finding

__all__ = ["TOKEN_DETECTORS", "TOKEN_KINDS"]

_Check = Callable[[str], bool]


def _mixed(secret: str) -> bool:
    """Random keys mix digits and both cases; a kebab-case name (``sk-learn-pipeline``) does
    not."""
    return (
        any(c.isdigit() for c in secret)
        and any(c.isupper() for c in secret)
        and any(c.islower() for c in secret)
    )


def _has_digit_or_caps(secret: str) -> bool:
    return any(c.isdigit() or c.isupper() for c in secret)


def _always(_secret: str) -> bool:
    return True


# (kind, pattern, check): the span is the group "secret" when the pattern has one, else the
# whole match; `check` gets that span's text and can veto it.
_PREFIXED: Final[tuple[tuple[str, re.Pattern[str], _Check], ...]] = (
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        _always,
    ),
    ("anthropic_api_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}"), _always),
    ("openai_api_key", re.compile(r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"), _always),
    ("openai_api_key", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), _mixed),
    (
        "aws_access_key_id",
        re.compile(r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
        _always,
    ),
    (
        "aws_session_token",
        re.compile(r"(?:FQoGZXIvYXdz|FwoGZXIvYXdz|\b[A-Za-z0-9]{2}oJb3JpZ2luX2Vj)[A-Za-z0-9/+=]{40,}"),
        _always,
    ),
    (
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
        _always,
    ),
    (
        "gitlab_token",
        re.compile(
            r"\b(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas|glffct)-"
            r"|GR1348941)[A-Za-z0-9_-]{20,}"
        ),
        _always,
    ),
    (
        "slack_token",
        re.compile(r"\b(?:xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,})"),
        _always,
    ),
    (
        "webhook_url",
        re.compile(
            r"https://(?:hooks\.slack\.com/|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/"
            r"|[A-Za-z0-9-]{1,63}\.webhook\.office\.com/webhookb2/)"
            r"(?P<secret>[A-Za-z0-9_/@-]{20,})"
        ),
        _always,
    ),
    (
        "stripe_key",
        re.compile(r"\b(?:(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{10,}|whsec_[A-Za-z0-9+/=]{20,})"),
        _always,
    ),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), _always),
    (
        "google_oauth_secret",
        re.compile(r"\b(?:GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[0-9A-Za-z_-]{20,}|1//0[0-9A-Za-z_-]{30,})"),
        _always,
    ),
    ("huggingface_token", re.compile(r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}"), _has_digit_or_caps),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), _always),
    (
        "pypi_token",
        re.compile(r"\bpypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}"),
        _always,
    ),
    (
        "azure_storage_key",
        re.compile(r"(?i)\bAccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})"),
        _always,
    ),
    ("sendgrid_api_key", re.compile(r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"), _always),
    ("twilio_api_key", re.compile(r"\b(?:AC|SK)[0-9a-f]{32}\b"), _always),
    ("mailchimp_api_key", re.compile(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"), _always),
    ("square_token", re.compile(r"\bsq0(?:csp|atp)-[0-9A-Za-z_-]{22,}"), _always),
    ("telegram_bot_token", re.compile(r"\b[0-9]{8,10}:[0-9A-Za-z_-]{35}\b"), _mixed),
    (
        "discord_bot_token",
        re.compile(r"\b[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"),
        _mixed,
    ),
    (
        "service_token",
        re.compile(
            r"\b(?:AKCp[A-Za-z0-9]{60,}"  # Artifactory API key
            r"|cmVmdGtu[A-Za-z0-9]{50,}"  # Artifactory reference token
            r"|dapi[0-9a-f]{32}\b"  # Databricks
            r"|do[opr]_v1_[0-9a-f]{64}\b"  # DigitalOcean
            r"|shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}\b"  # Shopify
            r"|AGE-SECRET-KEY-1[0-9A-Z]{58}\b"  # age
            r"|PMAK-[0-9a-f]{24}-[0-9a-f]{34}\b"  # Postman
            r"|lin_api_[A-Za-z0-9]{40}\b"  # Linear
            r"|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"  # Doppler
            r"|hv[sb]\.[A-Za-z0-9_-]{90,}"  # HashiCorp Vault
            r"|glc_[A-Za-z0-9+/]{32,}={0,2}"  # Grafana Cloud
            r"|sntry[su]_[A-Za-z0-9+/=_-]{40,})"  # Sentry
        ),
        _always,
    ),
    (
        "softlayer_api_key",
        re.compile(r"(?i)api\.softlayer\.com/(?:soap|rest)/v3(?:\.1)?/(?P<secret>[a-z0-9]{64})"),
        _always,
    ),
)

_PEM_BEGIN: Final = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?)-----"
    r"|PuTTY-User-Key-File-[0-9]: "
)
# A key block cut short (no END line): the armor headers, then the base64 lines that follow.
_PEM_TAIL: Final = re.compile(
    r"[^\n]{0,80}?(?:[ \t]*\r?\n)?(?:[A-Za-z][\w-]{0,40}:[^\n]*\r?\n(?:[ \t]*\r?\n)?)*"
    r"(?:[ \t]*[A-Za-z0-9+/=]+[ \t]*(?:\r?\n|\Z))*"
)
_PUTTY_END: Final = re.compile(r"Private-MAC: [0-9a-fA-F]+")

# `scheme://user:password@host`: only where an `@` follows within reach, so ordinary URLs cost
# one failed lookahead. The password may hold `/`, `@` and `:` (written unescaped by people).
_URL_USERINFO: Final = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://"
    r"(?P<user>[^\s:/?#@\[\]\"'<>`]{0,128}):(?=[^\s\"'<>`]{0,256}@)"
)
_URL_RUN: Final = re.compile(r"[^\s\"'<>`]{0,256}")
_URL_HOST: Final = re.compile(
    r"(?:[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,16}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?"
)
_PORT_THEN_PATH: Final = re.compile(r"[0-9]{1,5}(?:/|\Z)")

_AWS_SECRET: Final = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")

_BEARER: Final = re.compile(r"(?i)\bbearer[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)")
_BASIC: Final = re.compile(r"(?i)\bbasic[ \t]+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_CURL_USER: Final = re.compile(r"(?<!\S)(?:-u|--user)[ \t]+[\"']?[^\s:\"']{1,128}:(?P<secret>[^\s\"']+)")
_AUTHORIZATION: Final = re.compile(
    r"(?i)\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|apikey|api-key|key|sso-key|bot|dsn)[ \t]+)?"
    r"(?P<secret>[^\s\"'`]{8,})"
)


def _prefixed(text: str) -> Iterator[Finding]:
    for kind, pattern, check in _PREFIXED:
        for match in pattern.finditer(text):
            group = "secret" if "secret" in pattern.groupindex else 0
            if check(match[group]):
                yield Finding(match.start(group), match.end(group), kind)


def _private_keys(text: str) -> Iterator[Finding]:
    # The END marker of a label is searched once from where it was last needed: a text holding
    # thousands of BEGIN lines and no END stays linear.
    next_end: dict[str, int] = {}
    for match in _PEM_BEGIN.finditer(text):
        label = match["label"]
        if label is None:  # PuTTY key file: ends at its Private-MAC line
            mac = _PUTTY_END.search(text, match.end())
            tail = _PEM_TAIL.match(text, match.end())
            end = mac.end() if mac else match.end() + len(tail[0].rstrip()) if tail else match.end()
            yield Finding(match.start(), end, "private_key")
            continue
        marker = f"-----END {label}-----"
        known = next_end.get(label)
        if known is None or (known != -1 and known < match.end()):
            known = text.find(marker, match.end())
            next_end[label] = known
        if known != -1:
            yield Finding(match.start(), known + len(marker), "private_key")
            continue
        tail = _PEM_TAIL.match(text, match.end())
        if tail is not None and any(c.isalnum() for c in tail[0]):
            yield Finding(match.start(), match.end() + len(tail[0].rstrip()), "private_key")


def _url_credentials(text: str) -> Iterator[Finding]:
    for match in _URL_USERINFO.finditer(text):
        start = match.end()
        run = _URL_RUN.match(text, start)
        end = run.end() if run else start
        # The host follows the last `@` that is followed by a host: a password may contain `@`.
        at = text.rfind("@", start, end)
        for _ in range(8):
            if at == -1:
                break
            host = _URL_HOST.match(text, at + 1, end)
            if host is not None and (host.end() == end or text[host.end()] in "/?#"):
                password = text[start:at]
                # `host:8080/path/@handle` is a port and a path, not a password.
                if (
                    password
                    and not password.startswith("[REDACTED")
                    and not _PORT_THEN_PATH.match(password)
                ):
                    yield Finding(start, at, "url_credentials")
                break
            at = text.rfind("@", start, at)


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _aws_secret_keys(text: str) -> Iterator[Finding]:
    # AWS secret access keys have no prefix: 40 base64 characters on their own. Commit hashes
    # (lower-case hex), base64 data (longer runs) and paths (low entropy, no digits) are not.
    for match in _AWS_SECRET.finditer(text):
        secret = match[0]
        if _mixed(secret) and _entropy(secret) >= 4.2:
            yield Finding(match.start(), match.end(), "aws_secret_access_key")


def _authorization(text: str) -> Iterator[Finding]:
    for match in _BEARER.finditer(text):
        if _has_digit_or_caps(match["secret"]):
            yield Finding(match.start("secret"), match.end("secret"), "bearer_token")
    for match in _BASIC.finditer(text):
        if _is_basic_credential(match["secret"]):
            yield Finding(match.start("secret"), match.end("secret"), "basic_auth")
    for match in _CURL_USER.finditer(text):
        if not match["secret"].startswith(("$", "[REDACTED")):
            yield Finding(match.start("secret"), match.end("secret"), "basic_auth")
    for match in _AUTHORIZATION.finditer(text):
        secret = match["secret"]
        if not secret.startswith(("[REDACTED", "$", "<", "{")) and _has_digit_or_caps(secret):
            yield Finding(match.start("secret"), match.end("secret"), "authorization_header")


def _is_basic_credential(secret: str) -> bool:
    """``Basic <base64 of user:password>``, not the words after "basic" in prose."""
    try:
        decoded = base64.b64decode(secret + "=" * (-len(secret) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


TOKEN_DETECTORS: Final = (_private_keys, _prefixed, _aws_secret_keys, _authorization, _url_credentials)
"""The detectors of this module, in precedence order."""

TOKEN_KINDS: Final[tuple[str, ...]] = (
    "private_key",
    *dict.fromkeys(kind for kind, _, _ in _PREFIXED),
    "aws_secret_access_key",
    "bearer_token",
    "basic_auth",
    "authorization_header",
    "url_credentials",
)
"""The kinds this module reports."""
