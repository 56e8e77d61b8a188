"""Connection URLs in messages: never a password, even in URLs too malformed to parse.

Drivers echo the connection string in their errors (psycopg: ``... in URI:
"postgresql://app:PW@[::1/test"``), so hiding the password in the URL a message names is not
enough: every driver message is scrubbed too. Both work on the text with regular expressions
rather than a URL parser, because the URLs that most need hiding are the ones a parser rejects
(an unclosed ``[``, a raw ``@`` or ``/`` in the password).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["redact_url", "scrub"]

MASK = "***"

# `scheme://user:password@`. The password runs to the last `@` before a space or quote: an
# unencoded `@` or `/` in a password is common, and libpq and urllib split such a URL
# differently, so hiding everything up to the last `@` covers both readings.
_USERINFO = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s\"'<>]*:)(?P<secret>[^\s\"'<>]*)@"
)
# Parameters whose value is (or may be) a secret: `password=`, `sslpassword=`, a misspelt
# `passwd=`, `?token=`... Over-hiding a file path (`sslkey=`) costs nothing.
_SECRET_NAME = r"[A-Za-z0-9_.\-]*(?:pass|pwd|secret|token|key|auth|credential)[A-Za-z0-9_.\-]*"
_QUOTED = r"'(?:[^'\\]|\\.)*'?|\"[^\"]*\"?"
# In a URL query or in free text a value ends at `&`, `#`, a space or a quote...
_QUERY_PARAM = re.compile(
    rf"(?P<head>\b{_SECRET_NAME}\s*=\s*)(?P<secret>{_QUOTED}|[^\s&#'\"]*)", re.IGNORECASE
)
# ...in a libpq `key=value` string only at a space (`password=a&b` is one value).
_CONNINFO_PARAM = re.compile(
    rf"(?P<head>\b{_SECRET_NAME}\s*=\s*)(?P<secret>{_QUOTED}|\S*)", re.IGNORECASE
)
# A malformed `key=value` string that forgot the `=`: `host=h password PW`.
_CONNINFO_SPACED = re.compile(
    rf"(?P<head>\b{_SECRET_NAME}\s+)(?P<secret>{_QUOTED}|[^\s=]+)(?=\s|$)", re.IGNORECASE
)
_SEPARATORS = re.compile(r"[@:/?#&;,\s]+")
_MIN_FRAGMENT = 3


def _mask(match: re.Match[str]) -> str:
    return match.group("head") + MASK + ("@" if match.re is _USERINFO else "")


def redact_url(url: str) -> str:
    """Return ``url`` with every password replaced by ``***``, fit for errors, logs and output.

    Handles ``scheme://user:password@host`` URLs (also unparsable ones), secret query
    parameters (``?password=``, ``?sslpassword=``) and libpq ``key=value`` strings (quoted
    values included).

    Example:
        >>> redact_url("postgresql://app:s3cret@[::1/test")
        'postgresql://app:***@[::1/test'
    """
    text = _USERINFO.sub(_mask, url)
    if "://" in url:
        text = _QUERY_PARAM.sub(_mask, text)
    else:
        text = _CONNINFO_SPACED.sub(_mask, _CONNINFO_PARAM.sub(_mask, text))
    return _replace_secrets(text, _secrets_in(url))


def scrub(text: str, url: str | None) -> str:
    """Remove from ``text`` (a driver's message) every password of ``url`` and any URL password.

    The passwords found in ``url`` are removed as written, percent-decoded and, when they
    contain separators a parser may split them at (``@``, ``:``, ``/``), piece by piece: libpq
    reads ``app:PW@SECRET@host`` as password ``PW`` and host ``SECRET@host``, and says so.
    """
    text = _QUERY_PARAM.sub(_mask, _USERINFO.sub(_mask, text))
    return _replace_secrets(text, _secrets_in(url)) if url else text


def _secrets_in(url: str) -> list[str]:
    """Every string of ``url`` that may be (part of) a password, longest first."""
    found: set[str] = set()
    is_url = "://" in url
    patterns = (_USERINFO, _QUERY_PARAM) if is_url else (_CONNINFO_PARAM, _CONNINFO_SPACED)
    for pattern in patterns:
        for match in pattern.finditer(url):
            secret = match.group("secret")
            if secret[:1] in ("'", '"'):
                closed = len(secret) > 1 and secret[-1:] == secret[:1]
                secret = secret[1:-1] if closed else secret[1:]
            found.add(secret)
            found.add(secret.replace("\\'", "'"))
    for secret in list(found):
        decoded = unquote(secret)
        found.add(decoded)
        for form in (secret, decoded):
            found.update(_SEPARATORS.split(form))
    return sorted((s for s in found if len(s) >= _MIN_FRAGMENT), key=len, reverse=True)


def _replace_secrets(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text
