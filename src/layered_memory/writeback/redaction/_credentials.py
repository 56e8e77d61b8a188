"""Passwords where a tool or a credential file puts them: command-line flags whose meaning
depends on the command (`mysql -pX`, `redis-cli -a X`, `ldapsearch -w X`, `sshpass -p X`,
`docker login -p X`, `sqlcmd -P X`, `smbclient -U user%X`), Oracle's `user/password@host`,
`.pgpass` lines and `.netrc` entries.

A flag is read only on a line that runs its command (`-p` is a port to `ssh` and `psql`, a
password to `mysql`), from the command's name to the end of the line (at most `_LINE` chars);
each line is read once, however often a command's name appears in it, so hostile text stays
linear. Every pattern is bounded and starts with a literal or is matched at a known position.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from layered_memory.writeback.redaction._assignments import is_placeholder
from layered_memory.writeback.redaction._types import Finding

__all__ = ["CREDENTIAL_KINDS", "credentials"]

_LINE: Final = 1024
"""Characters of a command line read after the command's name."""
_VALUE: Final = (
    r"(?:'(?P<sq>[^'\n]{1,256})'|\"(?P<dq>[^\"\n]{1,256})\"|(?P<bare>[^\s'\"`;|&<>]{1,256}))"
)
# (names that run the command, its password and the blank that must precede it: a flag
# follows a blank; Oracle's `user/password@host` follows a blank or the URL's `thin:`).
_COMMANDS: Final[tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...]] = (
    (("mysql", "mariadb"), re.compile(rf"-p{_VALUE}"), " \t"),  # attached: `-p` alone prompts
    (("redis-cli",), re.compile(rf"(?:-a|--pass)[ \t]+{_VALUE}"), " \t"),
    (("ldap",), re.compile(rf"-w[ \t]+{_VALUE}"), " \t"),  # ldapsearch, ldapmodify, ...
    (("sshpass",), re.compile(rf"-p[ \t]*{_VALUE}"), " \t"),
    (("mongo",), re.compile(rf"-p[ \t]+{_VALUE}"), " \t"),
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
        re.compile(rf"-p[ \t]+{_VALUE}"),
        " \t",
    ),
    (("sqlcmd", "bcp ", "osql"), re.compile(rf"-P[ \t]*{_VALUE}"), " \t"),
    (
        ("smbclient", "rpcclient", "smbmap"),
        re.compile(rf"-U[ \t]*[^\s%'\"]{{1,128}}+%{_VALUE}"),
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


CREDENTIAL_KINDS: Final = ("password",)
"""The kinds this module reports."""
