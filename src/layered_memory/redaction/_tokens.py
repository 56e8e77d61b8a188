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


# (kind, needles, pattern, check): the pattern runs only on a text holding one of the needles
# (most texts hold none, and `in` is far cheaper than a regex scan); it starts with a literal so
# the regex engine can skip ahead, and `_word_start` replaces a leading `\b` (which would make
# the engine try every position). The span is the group "secret" when the pattern has one, else
# the whole match; `check` gets that span's text and can veto it.
_PREFIXED: Final[tuple[tuple[str, tuple[str, ...], re.Pattern[str], _Check], ...]] = (
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
    ("openai_api_key", ("sk-",), re.compile(r"sk-[A-Za-z0-9_-]{20,}"), _mixed),
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
        _has_digit_or_caps,
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
        _mixed,
    ),
    (
        "discord_bot_token",
        (".",),
        re.compile(r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"),
        _mixed,
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

_PEM_BEGIN: Final = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?)-----"
    r"|PuTTY-User-Key-File-[0-9]: "
)
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
    r"(?<!\S)(?:-u|--user)[ \t]+[\"']?[^\s:\"']{1,128}:(?P<secret>[^\s\"']+)"
)
_AUTHORIZATION: Final = re.compile(
    r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|apikey|api-key|key|sso-key|bot|dsn)[ \t]+)?"
    r"(?P<secret>[^\s\"'`]{8,})"
)
_ASCII_LOWER: Final = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def fold_case(text: str) -> str:
    """``text`` lower-cased without changing its length (``str.lower`` may, for a few
    non-ASCII letters), so positions in it are positions in ``text``."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _word_start(text: str, start: int) -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


def _has_long_word(text: str, size: int) -> bool:
    """Whether some whitespace-separated word of ``text`` has ``size`` characters or more: a
    cheap gate that spares ordinary prose every regex scan below."""
    return any(len(word) >= size for word in text.split())


def _prefixed(text: str) -> Iterator[Finding]:
    if not _has_long_word(text, _SHORTEST_TOKEN):
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
            if _word_start(text, match.start()) and check(match[group]):
                yield Finding(match.start(group), match.end(group), kind)


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
            if password.startswith("[REDACTED") or _PORT_THEN_PATH.match(password):
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
    if not _has_long_word(text, 40):
        return
    for match in _B64_RUN.finditer(text):
        if match["padding"]:
            continue  # padded: base64 data, not a key
        secret = match[0]
        if len(secret) == 40 and _mixed(secret) and _entropy(secret) >= 4.2:
            yield Finding(match.start(), match.end(), "aws_secret_access_key")


def _authorization(text: str) -> Iterator[Finding]:
    lowered = fold_case(text)
    for needle, pattern, kind, check in _HEADERS:
        if needle not in lowered:
            continue
        for match in pattern.finditer(lowered):
            if not _word_start(lowered, match.start()):
                continue
            start, end = match.span("secret")
            if check(text[start:end]):
                yield Finding(start, end, kind)


def _not_a_reference(secret: str) -> bool:
    return not secret.startswith(("$", "[REDACTED"))


def _credential_like(secret: str) -> bool:
    return not secret.startswith(("[REDACTED", "$", "<", "{")) and _has_digit_or_caps(secret)


def _is_basic_credential(secret: str) -> bool:
    """``Basic <base64 of user:password>``, not the words after "basic" in prose."""
    try:
        decoded = base64.b64decode(secret + "=" * (-len(secret) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


_HEADERS: Final[tuple[tuple[str, re.Pattern[str], str, _Check], ...]] = (
    ("bearer", _BEARER, "bearer_token", _has_digit_or_caps),
    ("basic", _BASIC, "basic_auth", _is_basic_credential),
    ("-u", _CURL_USER, "basic_auth", _not_a_reference),
    ("authorization", _AUTHORIZATION, "authorization_header", _credential_like),
)

TOKEN_DETECTORS: Final = (
    _private_keys,
    _prefixed,
    _aws_secret_keys,
    _authorization,
    _url_credentials,
)
"""The detectors of this module, in precedence order."""

TOKEN_KINDS: Final[tuple[str, ...]] = (
    "private_key",
    *dict.fromkeys(kind for kind, _, _, _ in _PREFIXED),
    "aws_secret_access_key",
    "bearer_token",
    "basic_auth",
    "authorization_header",
    "url_credentials",
)
"""The kinds this module reports."""
