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

__all__ = ["driver_detail", "password_hint", "redact_url", "scrub"]

MASK = "***"

# Two sets of patterns. In a connection string the user gave (`redact_url`, and to find the
# secrets `scrub` removes) a password is read generously: up to the last `@` of the string,
# spaces and quotes included, since a parser may have split it anywhere. In a driver's message
# (free text) a URL ends at a space or a quote.
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"
_INPUT_USERINFO = re.compile(rf"(?P<head>^\s*{_SCHEME}[^:/?#@]*:)(?P<secret>.*)@", re.DOTALL)
_TEXT_USERINFO = re.compile(rf"(?P<head>{_SCHEME}[^:/?#@\s\"'<>]*:)(?P<secret>[^\s\"'<>]*)@")
# Parameters whose value is (or may be) a secret: `password=`, `sslpassword=`, a misspelt
# `passwd=`, `?token=`... Over-hiding a file path (`sslkey=`) costs nothing.
_SECRET_NAME = r"[A-Za-z0-9_.\-]*(?:pass|pwd|secret|token|key|auth|credential)[A-Za-z0-9_.\-]*"
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"[^\"]*\""
# A URL query value ends at `&` or `#` (spaces included: a parser may have kept them)...
_INPUT_QUERY_PARAM = re.compile(rf"(?P<head>[?&]{_SECRET_NAME}=)(?P<secret>[^&#]*)", re.IGNORECASE)
# ...in free text also at a space or a quote...
_TEXT_PARAM = re.compile(
    rf"(?P<head>\b{_SECRET_NAME}\s*=\s*)(?P<secret>{_QUOTED}|[^\s&#'\"]*)", re.IGNORECASE
)
# ...and in a libpq `key=value` string it is a quoted value, or else everything up to the
# next `key=` (an unterminated quote, a forgotten `=` as in `password PW`, `a&b;c`).
_CONNINFO_PARAM = re.compile(
    rf"(?P<head>\b{_SECRET_NAME}(?:\s*=\s*|\s+))"
    rf"(?P<secret>(?:{_QUOTED})(?=\s|$)|.*?(?=\s+[A-Za-z_][A-Za-z0-9_]*\s*=|\s*$))",
    re.IGNORECASE | re.DOTALL,
)
_SEPARATORS = re.compile(r"[@:/?#&;,=\s'\"]+")
# Characters a URL parser ends the password at (or reads as the host) when they are not
# percent-encoded; libpq then reports the pieces, e.g. `failed to resolve host "SECRET@db"`.
_RESERVED = "@/?#[]"
_PORT_THEN_PATH = re.compile(r"^\d*/")
_MIN_FRAGMENT = 3


def _mask(match: re.Match[str]) -> str:
    at = "@" if match.re in (_INPUT_USERINFO, _TEXT_USERINFO) else ""
    return match.group("head") + MASK + at


def _input_patterns(url: str) -> tuple[re.Pattern[str], ...]:
    if "://" in url:
        return (_INPUT_USERINFO, _INPUT_QUERY_PARAM)
    return (_CONNINFO_PARAM,)


def redact_url(url: str) -> str:
    """Return ``url`` with every password replaced by ``***``, fit for errors, logs and output.

    Handles ``scheme://user:password@host`` URLs (also unparsable ones), secret query
    parameters (``?password=``, ``?sslpassword=``) and libpq ``key=value`` strings (quoted
    values included).

    Example:
        >>> redact_url("postgresql://app:s3cret@[::1/test")
        'postgresql://app:***@[::1/test'
    """
    secrets = _secrets_in(url)
    text = url
    for pattern in _input_patterns(url):
        text = pattern.sub(_mask, text)
    return _replace_secrets(text, secrets)


def scrub(text: str, url: str | None) -> str:
    """Remove from ``text`` (a driver's message) every password of ``url`` and any URL password.

    The passwords found in ``url`` are removed as written, percent-decoded and, when they
    contain separators a parser may split them at (``@``, ``:``, ``/``), piece by piece: libpq
    reads ``app:PW@SECRET@host`` as password ``PW`` and host ``SECRET@host``, and says so.
    """
    text = _TEXT_PARAM.sub(_mask, _TEXT_USERINFO.sub(_mask, text))
    return _replace_secrets(text, _secrets_in(url)) if url else text


def password_hint(url: str) -> str | None:
    """How to fix a password holding characters that make URL parsers split it, if it does.

    libpq ends the password at the first ``@`` or ``/`` and reads the rest as the host; its
    errors then quote pieces of the password. No such URL can work with PostgreSQL.
    """
    for match in _INPUT_USERINFO.finditer(url):
        secret = match.group("secret")
        if _PORT_THEN_PATH.match(secret):
            continue  # `scheme://host:5432/db?x=a@b`: a port and a path, not a password
        unencoded = [char for char in _RESERVED if char in secret]
        if unencoded:
            chars = ", ".join(repr(char) for char in unencoded)
            codes = ", ".join(f"{char} as %{ord(char):02X}" for char in unencoded)
            return f"the password holds {chars} unencoded: percent-encode it ({codes})"
    return None


def driver_detail(text: str, url: str) -> str:
    """A driver's error text fit to show for ``url``: the `password_hint` if there is one (the
    text may quote any piece of such a password, and misleads anyway), else ``text`` scrubbed.
    """
    return password_hint(url) or scrub(text, url)


def _secrets_in(url: str) -> list[str]:
    """Every string of ``url`` that may be (part of) a password, longest first."""
    found: set[str] = set()
    for pattern in _input_patterns(url):
        for match in pattern.finditer(url):
            secret = match.group("secret").strip()
            if secret[:1] in ("'", '"') and secret[-1:] == secret[:1] and len(secret) > 1:
                secret = secret[1:-1]
            found.add(secret)
            found.add(secret.replace("\\'", "'").replace("\\\\", "\\"))
            found.add(secret.strip("'\""))
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
