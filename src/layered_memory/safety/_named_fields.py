"""Secret detectors: the values of secret-named fields, and what a value is (a placeholder,
code, a literal).

The value of a secret-named field, whatever the value looks like.

``DB_PASSWORD=...``, ``"password": "..."``, ``api_key: ...``, ``export GITHUB_TOKEN=...``,
``--password ...``, ``?token=...``, ``Password=...;`` in a connection string, and the prose form
"the password is ...": the name says it is a secret, so the value is cut out whatever its shape,
unless it is plainly not a value (a placeholder, an environment reference, a type annotation).

Scanning starts from the *end* of the name (the keyword right before the separator), so a
non-secret assignment before it (``user=bob&password=...``) is never consumed by the regex; the
rest of the name is read backwards, a bounded number of characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from layered_memory.safety._detector import Finding, fold_case

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
    # TOML's and Python's triple-quoted strings, which may span lines.
    r"\"\"\"(?P<tdq>(?:[^\"\\]|\\.|\"(?!\"\")){1,1024}?)\"\"\""
    r"|'''(?P<tsq>(?:[^'\\]|\\.|'(?!'')){1,1024}?)'''"
    r"|\"(?P<dq>(?:[^\"\\\n]|\\.){1,1024}(?:\n(?![ \t])(?:[^\"\\\n]|\\.){0,1024})?)\""
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
    # A bind parameter or a format field stands for a value given later: SQL's `$1`, `?`,
    # `:name`, `@name`; `{0}`, `{name}` (str.format, f-strings, JSX); `%s`, `%(name)s`.
    r"|\$[0-9]{1,3}|\?|[:@][A-Za-z_]{1,64}|\{[A-Za-z_0-9.]{0,64}\}"
    r"|%[-+ #0]*[0-9]*(?:\.[0-9]+)?[sdiqxXvfr]"
)
_CODE_REFERENCE: Final = re.compile(
    r"(?:process\.env|os\.environ|import\.meta\.env|ENV|env|secrets|vars|settings|config)[.\[(]"
    r"|[A-Za-z_][\w.]*[(\[]"
)
# Code, read as code: an identifier path (`$`/`@` sigils; attribute access `a.b`, optional
# chaining `a?.b`, a non-null assertion `a!.b`, scopes `A::b`, `a->b`), each name letters with
# at most trailing digits, so a random value (`Tr0ub4dor`) is never one name.
_CODE_NAME: Final = r"[A-Za-z_$][A-Za-z_$]{0,63}[0-9]{0,3}"
_CODE_PATH: Final = re.compile(
    rf"[$@]?{_CODE_NAME}(?P<more>(?:(?:[?!]?\.|::|->){_CODE_NAME}){{0,16}})"
)
# What makes a path an expression's start: a call, a subscript, a generic (`get<string>(`,
# `get::<T>`) or a cast after it.
_CODE_AFTER_PATH: Final = re.compile(r"[(\[]|<[A-Za-z_]|::<|!\.")
# A binary or ternary operator after the value: it is an operand (`a.length < 6 ? x : y`,
# `data.password || null`, `args.password ?? prompt()`, `token as string`).
_OPERATOR_AFTER: Final = re.compile(r"[ \t]*(?:\?\?|\|\||&&|[<>]=?|[?+*/%]|===?|!==?|as[ \t])")
# One identifier in camelCase or snake_case, of letters only (`hashedPassword`, `access_token`).
_IDENTIFIER: Final = re.compile(r"[a-z]+(?:[A-Z][a-z]+|_[a-z]+)+")
_FORMAT_DIRECTIVE: Final = re.compile(r"%[-+ #0_^]*[0-9]*(?:\.[0-9]+)?[A-Za-z]")
_NOT_A_SECRET: Final = re.compile(
    r"!\w+"  # a YAML tag (`!vault |`)
    # A file path: two segments or more, or one with an extension (a base64 key may start
    # with `/` too, but has `+`, or no second `/` and no extension).
    r"|(?:~|\.{1,2})?(?:/[\w.@-]+){2,}/?|(?:~|\.{1,2})?/[\w@-]*\.\w{1,5}"
    r"|[A-Za-z][A-Za-z0-9+.-]*://\S*"  # a URL (its credentials have their own detector)
)
# A validation rule list, as Laravel (`'required|min:8|confirmed'`) and CodeIgniter
# (`'required|min_length[8]'`) write a password field's rules: two or more rule names of
# their documented lists, each argument a number or a lower-case field name (never both
# mixed: `min:hunter2` is not an argument a rule takes). A password made of these only is not
# one a person sets.
_VALIDATION_RULE_NAMES: Final = (
    "accepted|alpha|alpha_dash|alpha_num|alpha_numeric|array|bail|between|boolean|confirmed"
    "|current_password|different|email|exact_length|filled|in|integer|matches|max|max_length"
    "|min|min_length|mixed_case|nullable|numeric|password|present|required|same|sometimes"
    "|size|string|trim|uncompromised|valid_email"
)
_VALIDATION_RULE: Final = (
    rf"(?:{_VALIDATION_RULE_NAMES})"
    r"(?::(?:[0-9.,]{1,32}|[a-z_.,]{1,64})|\[(?:[0-9]{1,8}|[a-z_]{1,64})\])?"
)
_VALIDATION_RULES: Final = re.compile(rf"{_VALIDATION_RULE}(?:\|{_VALIDATION_RULE})+")
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


def looks_random(value: str) -> bool:
    """A credential, not a word: long enough, with digits, inner capitals or punctuation."""
    if len(value) < 8:
        return False
    return any(c.isdigit() or not c.isalnum() for c in value) or any(c.isupper() for c in value[1:])


def is_placeholder(value: str) -> bool:
    """Whether ``value`` stands for a secret rather than being one: a marker, a template or
    environment reference, a bind parameter or format field, a format string, a masked or
    elided value, a word like ``password``."""
    return (
        not any(char.isalnum() for char in value)
        or value.startswith("[REDACTED")
        or _PLACEHOLDER.fullmatch(value) is not None
        or is_format_string(value)
    )


def is_format_string(value: str) -> bool:
    """Whether ``value`` is a printf or strftime format (``%H:%M:%SZ``, ``%Y-%m-%d``): its
    directives taken out, fewer than three letters or digits are left."""
    if "%" not in value:
        return False
    rest, directives = _FORMAT_DIRECTIVE.subn("", value)
    return directives > 0 and sum(char.isalnum() for char in rest) < 3


def is_code(value: str, after: str, keyword: str = "") -> bool:
    """Whether an unquoted ``value`` (followed by ``after`` on its line) is code rather than a
    literal: an expression that starts with a call, a subscript or a generic
    (``req.headers.authorization?.split(``, ``Hash::make(``, ``$_POST[``), attribute access
    (``vals.password.length``, ``user?.password``), an operand of an operator
    (``data.password || null``), or one camelCase or snake_case name of letters that ends an
    argument or entry (``password: hashedPassword,``) or names the field's own word
    (``token: accessToken``).

    A random value is none of these: its names would hold inner digits or symbols.
    """
    path = _CODE_PATH.match(value)
    if path is None:
        return False
    if path.end() < len(value):
        return _CODE_AFTER_PATH.match(value, path.end()) is not None
    if path["more"]:
        return True  # attribute access: `user.password`
    operand = _OPERATOR_AFTER.match(after) is not None
    if _IDENTIFIER.fullmatch(value) is None:
        return operand and not any(char.isdigit() for char in value)
    parts = _components(value)
    return operand or after[:1] in {",", ";", ")", "}"} or keyword in parts


def is_value(
    value: str,
    name: str,
    family: str,
    *,
    prose: bool,
    rest_of_line: str,
    bare: bool = False,
    keyword: str = "",
) -> bool:
    if not value or is_placeholder(value) or value.lower() == name.lower():
        return False
    if _NOT_A_SECRET.fullmatch(value) or _VALIDATION_RULES.fullmatch(value):
        return False
    if _CODE_REFERENCE.match(value):
        return False
    if bare and is_code(value, rest_of_line, keyword):
        return False
    if prose or family != "password":
        return looks_random(value)
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
    if sep.strip() == ":" and sep[0] in " \t" and sep[-1] not in " \t":
        return None  # `type="password" :rules=...`: a blank before a colon and none after
    if sep.lstrip().startswith(":") and text[max(0, name_start - 2) : name_start] == "${":
        return None  # `${DB_PASSWORD:-default}`: a shell expansion's default, not a value
    name = name.lstrip("-.")
    family = _family(name, folded[keyword_start:keyword_end])
    if family is None:
        return None
    value_match = _VALUE.match(text, tail.end())
    if value_match is None:
        return None
    group = next(g for g in ("tdq", "tsq", "dq", "sq", "bq", "bare") if value_match[g] is not None)
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
    rest = text[end : end + 16]
    keyword = folded[keyword_start:keyword_end]
    bare = group == "bare"
    if is_value(value, name, family, prose=prose, rest_of_line=rest, bare=bare, keyword=keyword):
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
        if is_value(stripped, field, family, prose=False, rest_of_line=""):
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
