"""Secret detectors: secrets with a structure.

Detectors of secrets with a structure: key blocks (PEM, PGP, PuTTY), credentials in URLs
and Authorization headers, and bare AWS secret access keys.

Every scan here is linear on any input: literal starts found with `str.find` or a literal-first
pattern, bounded lookarounds, and searches whose result is remembered (the END line of a key
block is looked for once, not once per BEGIN line). `tests/writeback/redaction` runs megabytes of
adversarial text through all of them in a subprocess with a time limit.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterator
from typing import Final

from layered_memory.safety._detector import (
    Check,
    Finding,
    fold_case,
    has_digit_or_caps,
    has_long_word,
    mixed,
    word_start,
)
from layered_memory.safety._named_fields import field_kind, is_placeholder
from layered_memory.safety._vendor_tokens import prefixed

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
_SSWS: Final = re.compile(r"ssws[ \t]+(?P<secret>[a-z0-9_-]{20,})")  # Okta API tokens
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
    r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|apikey|api-key|key|sso-key|bot|dsn|ssws)"
    r"[ \t]+)?"
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


_ALIBABA_ID: Final = re.compile(r"LTAI[A-Za-z0-9]{12,28}(?![A-Za-z0-9_])")
_ALIBABA_SECRET: Final = re.compile(r"(?<![A-Za-z0-9_/+])[A-Za-z0-9]{30}(?![A-Za-z0-9_/+])")
_PAIR_REACH: Final = 160
"""Characters around an access key id searched for its secret."""


def _alibaba_secrets(text: str) -> Iterator[Finding]:
    # An Alibaba Cloud AccessKey secret has no prefix (30 letters and digits): found next to
    # its `LTAI...` id, as the console and the CLI's config show them.
    if "LTAI" not in text:
        return
    searched_to = 0
    for key_id in _ALIBABA_ID.finditer(text):
        start = max(searched_to, key_id.start() - _PAIR_REACH)
        end = min(len(text), key_id.end() + _PAIR_REACH)
        for found in _ALIBABA_SECRET.finditer(text, start, end):
            secret = found[0]
            mixed_chars = any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)
            if mixed_chars and not secret.startswith("LTAI"):
                yield Finding(found.start(), found.end(), "service_token")
        searched_to = end


# `<add key="ClearTextPassword" value="..."/>` (NuGet.config, app.config, web.config) and
# `<input name="password" value="...">`: the name is in one attribute, the value in the next.
_VALUE_ATTRIBUTE: Final = re.compile(r"[ \t]value[ \t]*=[ \t]*\"(?P<dq>[^\"\n]{1,1024})\"")
_NAME_ATTRIBUTE: Final = re.compile(r"(?:key|name)[ \t]*=[ \t]*\"(?P<name>[^\"\n]{1,64})\"[ \t]*\Z")


def _keyed_values(text: str) -> Iterator[Finding]:
    if "value" not in text:
        return
    for value in _VALUE_ATTRIBUTE.finditer(text):
        head = text[max(0, value.start() - 96) : value.start()]
        named = _NAME_ATTRIBUTE.search(head)
        if named is None:
            continue
        kind = field_kind(named["name"], value["dq"])
        if kind is not None:
            yield Finding(value.start("dq"), value.end("dq"), kind)


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
    ("ssws", _SSWS, "authorization_header", has_digit_or_caps),
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
    _alibaba_secrets,
    _keyed_values,
    _authorization,
    _url_credentials,
)
"""The detectors of this section and the prefixed tokens, in precedence order."""
