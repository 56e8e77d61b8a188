"""Secret detectors: passwords on command lines and in credential files.

Passwords where a tool or a credential file puts them: command-line flags whose meaning
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

from layered_memory.safety._detector import Finding, fold_case, word_start
from layered_memory.safety._named_fields import is_placeholder, is_value, looks_random

_LINE: Final = 1024
"""Characters of a command line read after the command's name."""
_FLAG_VALUE: Final = (
    r"(?:'(?P<sq>[^'\n]{1,256})'|\"(?P<dq>[^\"\n]{1,256})\"|(?P<bare>[^\s'\"`;|&<>]{1,256}))"
)
# (names that run the command, its password and the blank that must precede it: a flag
# follows a blank; Oracle's `user/password@host` follows a blank or the URL's `thin:`).
_ARG: Final = r"[^\s'\"`;|&<>]{1,256}"
"""One unquoted shell argument."""
_COMMANDS: Final[tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...]] = (
    (("mysql", "mariadb"), re.compile(rf"-p{_FLAG_VALUE}"), " \t"),  # attached: `-p` alone prompts
    (("redis-cli",), re.compile(rf"(?:-a|--pass)[ \t]+{_FLAG_VALUE}"), " \t"),
    # `redis-cli AUTH [user] password`: an unquoted user and password are cut out together.
    (
        ("redis-cli",),
        re.compile(
            rf"(?:AUTH|auth)[ \t]+(?:(?:{_ARG}[ \t]+)?(?:'(?P<sq>[^'\n]{{1,256}})'"
            rf"|\"(?P<dq>[^\"\n]{{1,256}})\")|(?P<bare>{_ARG}(?:[ \t]+[^\s'\"`;|&<>-]{_ARG})?))"
        ),
        " \t",
    ),
    (("zip ", "zipcloak", "zipsplit"), re.compile(rf"(?:-P|--password)[ \t]+{_FLAG_VALUE}"), " \t"),
    (("7z ", "7za ", "7zz ", "7zr ", "rar ", "unrar "), re.compile(rf"-p{_FLAG_VALUE}"), " \t"),
    (("ssh-keygen",), re.compile(rf"-[NP][ \t]+{_FLAG_VALUE}"), " \t"),  # new and old passphrase
    # `htpasswd -b[c] file user password`, `htpasswd -nb user password`.
    (
        ("htpasswd",),
        re.compile(
            rf"-[A-Za-z]{{0,6}}b[A-Za-z]{{0,6}}(?:[ \t]+-[A-Za-z]{{1,8}})*+"
            rf"[ \t]+(?:[^\s-]\S{{0,255}}[ \t]+)?\S{{1,128}}[ \t]+{_FLAG_VALUE}"
        ),
        " \t",
    ),
    (
        ("openssl",),
        re.compile(
            r"-pass(?:in|out)?[ \t]+(?:'pass:(?P<sq>[^'\n]{1,256})'"
            rf"|\"pass:(?P<dq>[^\"\n]{{1,256}})\"|pass:(?P<bare>{_ARG}))"
        ),
        " \t",
    ),
    (("openssl",), re.compile(rf"-k[ \t]+{_FLAG_VALUE}"), " \t"),  # `openssl enc -k password`
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
    flags = " -" in text or "\t-" in text or " auth" in text or " AUTH" in text
    at_sign = "@" in text
    for names, password, blanks in _COMMANDS:
        if not (at_sign if ":" in blanks else flags):
            continue
        for name in names:
            yield from _command_line(text, name, password, blanks)
    yield from _pgpass(text)
    yield from _login_pairs(text)
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
    """`.pgpass` lines, alone on their line or inside a sentence ("put
    `db:5432:app:admin:pw` in ~/.pgpass"): the host starts after a blank or an opening quote,
    looked for at most a host name's length before the port (each stretch read once)."""
    read_to = -1
    for port in _PGPASS_PORT.finditer(text):
        if port.start() < read_to:
            continue  # inside the entry just read
        start = port.start()
        limit = max(0, start - 253)
        while start > limit and not text[start - 1].isspace() and text[start - 1] not in "`'\"(":
            start -= 1
        line = _PGPASS_LINE.match(text, start)
        if line is None:
            continue
        host = text[start : port.start()]
        if host == "*" or any(char.isalpha() or char == "." for char in host):
            read_to = line.end()
            value_start = line.start("bare")
            end = line.end("bare")
            while end > value_start and text[end - 1] in _SENTENCE_END:
                end -= 1  # a sentence's punctuation or a closing quote, not the password
            value = text[value_start:end]
            if value and not is_placeholder(value) and not value.startswith(("-", "$")):
                yield Finding(value_start, end, "password")


_SENTENCE_END: Final = frozenset(".,;:!?)`'\"")


def _login_pairs(text: str) -> Iterator[Finding]:
    """The password of a "login: user / password" pair in prose."""
    folded = fold_case(text)
    if "/" not in text:
        return
    for needle in _LOGIN_WORDS:
        at = folded.find(needle)
        while at != -1:
            if word_start(folded, at):
                pair = _LOGIN_PAIR.match(text, at + len(needle))
                if pair is not None:
                    end = pair.end("secret")
                    while end > pair.start("secret") and text[end - 1] in _SENTENCE_END:
                        end -= 1
                    value = text[pair.start("secret") : end]
                    spaced = pair["slash"] != "/"
                    rest = text[end : end + 16]
                    judged = spaced and is_value(
                        value, "password", "password", prose=False, rest_of_line=rest
                    )
                    if judged or (looks_random(value) and not is_placeholder(value)):
                        yield Finding(pair.start("secret"), end, "password")
            at = folded.find(needle, at + 1)


_LOGIN_WORDS: Final = ("login", "log-in", "sign-in", "signin", "credentials", "credential", "creds")
_LOGIN_PAIR: Final = re.compile(
    r"s?[ \t]*(?::|=|is|are)[ \t]*[`'\"]?(?P<user>[^\s/:`'\"]{1,64})"
    r"(?P<slash>[ \t]*/[ \t]*)(?P<secret>[^\s`'\"]{1,128})"
)


def _value(match: re.Match[str]) -> Iterator[Finding]:
    group = next(name for name in ("sq", "dq", "bare") if match.groupdict().get(name) is not None)
    value = match[group]
    if not is_placeholder(value) and not value.startswith(("-", "$")):
        yield Finding(match.start(group), match.end(group), "password")
