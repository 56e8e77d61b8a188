"""What a lesson would make the agent do: the effect classes of the lesson hold.

Seven classes, each with the reason a reviewer reads (`writeback.lesson_hold` puts it in the
held change): `remote code`, `exfiltration`, `credentials`, `permissions`, `weakened checks`,
`secrecy`, `override` (see docs/consolidation.md for what each holds).

The classes work on a normalised reading, never on the raw spelling (`normalise`): NFKC,
Unicode's look-alikes and invisible characters (`safety.defuse.ascii_skeleton`), case,
letter-spaced words (`i g n o r e`), shell quoting and escapes (`c'u'r\\l`, `${IFS}`),
percent-encoding, digits read as letters (`1gn0re`). They look at tokens: commands by their
base name (`/usr/bin/curl`, `python3.12`) and where they sit (after a pipe, in `$(...)`), the
hosts of URLs, e-mail and `user@host:` addresses, credential and start-up paths; and at
concepts within one sentence (`writeback._lesson_words`), so another word order or synonym of
the same effect is still held. A negation before the verb ("never print the API key") is a
safety lesson, not an effect. Every check is linear in the text: bounded windows, no regex
with two unbounded quantifiers over the same characters.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from layered_memory.safety.defuse import ascii_skeleton
from layered_memory.writeback._lesson_words import (
    APPROVAL_CLAIMS,
    APPROVED,
    APPROVERS,
    ASK_VERBS,
    AUDIENCE,
    CHECK_OBJECTS,
    CREDENTIAL_PATHS,
    DATA_OBJECTS,
    DECODERS,
    DOWNLOAD_VERBS,
    ERASE_VERBS,
    FETCHERS,
    HIDE_VERBS,
    INDEX_NOUNS,
    INDEX_WORDS,
    INSTRUCTION_WORDS,
    INTERPRETERS,
    NEGATIONS,
    NO_ASKING,
    OBEY_VERBS,
    OFFICIAL_INDEXES,
    ORDER_WORDS,
    OUTSIDE_WORDS,
    OVERRIDE_VERBS,
    PACKAGE_WORDS,
    PEOPLE,
    PERMISSION_COMMANDS,
    PERSISTENCE_PATHS,
    PRECEDENCE,
    QUIET_WORDS,
    READ_ONLY_MEMORY,
    READ_VERBS,
    RISKY_ACTIONS,
    ROLE_MARKERS,
    RUN_VERBS,
    SCRIPT_SUFFIXES,
    SECRECY_WORDS,
    SECRET_NOUNS,
    SECRET_PHRASES,
    SEND_VERBS,
    SHARED_BRANCHES,
    STALE_WORDS,
    TELL_VERBS,
    TRACE_WORDS,
    TREAT_AS,
    UNTRUSTED_PLACES,
    UPLOAD_COMMANDS,
    UPLOAD_FLAGS,
    WEAKEN_FLAGS,
    WEAKEN_VERBS,
    words,
)

__all__ = ["Effect", "effects", "hosts_in", "normalise"]


# --- Reading a text as a model does -----------------------------------------------------------

_LETTER_SPACED = re.compile(r"\b(?:[a-z][ .\-_*]){2,}[a-z]\b")
_SPACERS = re.compile(r"[ .\-_*]")
_IFS = re.compile(r"\$\{?ifs\}?")
_INNER_ESCAPE = re.compile(r"(?<=[a-z0-9])\\(?=[a-z0-9])")
_INNER_QUOTES = re.compile(r"(?<=[a-z0-9])['\"`]+(?=[a-z0-9])")
_WHITESPACE = re.compile(r"\s+")
_LEET: Final = str.maketrans("013457@$!|", "oieastasil")


def normalise(text: str) -> str:
    """`text` as the hold reads it: NFKC, look-alikes and invisible characters undone, lower
    case, percent-encoding decoded, shell quoting and letter-spacing joined, one line."""
    reading = ascii_skeleton(unicodedata.normalize("NFKC", text)).casefold()
    if "%" in reading:
        reading = urllib.parse.unquote(reading)
    reading = _IFS.sub(" ", reading)
    reading = _INNER_ESCAPE.sub("", reading)
    reading = _INNER_QUOTES.sub("", reading)
    reading = _LETTER_SPACED.sub(lambda found: _SPACERS.sub("", found.group()), reading)
    return _WHITESPACE.sub(" ", reading).strip()


# --- Tokens: words, commands, addresses, paths ------------------------------------------------

_TOKEN = re.compile(r"[\w~./:@+%=$*#,-]+|\|\|?|&&|>>?|<\(|\$\(|[;&<>()`|]")
_SENTENCE = re.compile(r"(?<=[!?])\s|(?<=\S\.)\s(?=[a-z0-9`'\"(\[]*[a-z])|\n")
_STRIP: Final = ".,:;!?\"'()[]{}<>*`"
_URL = re.compile(r"\b(?:https?|ftp|sftp|s3|gs|wss?|git|ssh)://([^/\s:'\"`)>\]]+)")
_EMAIL = re.compile(r"\b[\w.+-]{1,64}@([a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})+)")
_SCP = re.compile(
    r"\b(?:[\w.-]{1,64}@)?([a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})+|\d{1,3}(?:\.\d{1,3}){3}):"
)
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
_LOOPBACK: Final = ("localhost", "127.", "0.0.0.0", "::1", "[::1]", "host.docker.internal")
_VERSIONED = re.compile(r"^([a-z]+?)[0-9.]*(?:\.exe)?$")


def _base(token: str) -> str:
    """A command token by its base name: `/usr/bin/curl` -> `curl`, `python3.12` -> `python`."""
    name = token.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    found = _VERSIONED.match(name)
    return found.group(1) if found else name


@functools.lru_cache(maxsize=65_536)
def _variants(word: str) -> frozenset[str]:
    """A word and its other spellings: no inner `-`/`.`/`_`, digits read as letters, a
    plural or tense ending dropped (remembered: the same words come back in every lesson)."""
    found = {word, word.replace("-", "").replace("_", "")}
    if "l" in word:
        found.add(word.replace("l", "i"))  # a capital I reads as `l` once look-alikes are undone
    if any(c.isdigit() or c in "@$!|" for c in word) and any(c.isalpha() for c in word):
        found.add(word.translate(_LEET))
    for suffix in ("ing", "ed", "es", "s", "d"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            found.add(word[: -len(suffix)])  # pushing -> push, okayed -> okay
            break
    if "." in word or "(" in word:
        found.update(
            part for part in re.split(r"[.(]", word) if part
        )  # u.urlopen, global.index-url
    return frozenset(found)


@dataclass(slots=True)
class _Sentence:
    text: str
    tokens: list[str]
    words: list[str]
    """Tokens stripped of punctuation, in order (variants are looked up through `has`)."""
    bag: set[str] = field(default_factory=set)
    commands: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    known: frozenset[str] = frozenset()
    """Hosts the user or the project's files named (its own services)."""

    def has(self, vocabulary: Iterable[str]) -> str | None:
        """The first word of `vocabulary` this sentence holds (any spelling), or None."""
        for word in vocabulary:
            if word in self.bag:
                return word
        return None

    def position(self, vocabulary: frozenset[str]) -> int | None:
        for index, word in enumerate(self.words):
            if _variants(word) & vocabulary:
                return index
        return None

    def phrase(self, phrase: str) -> bool:
        return f" {phrase} " in f" {' '.join(self.words)} "

    def outsidehosts_in(self) -> list[str]:
        return [host for host in self.hosts if not host.startswith(_LOOPBACK)]


def hosts_in(text: str) -> list[str]:
    """The hosts `text` names: of URLs, e-mail and `user@host:` addresses, and IPs."""
    hosts = [
        host.strip(".").removeprefix("www.")
        for pattern in (_URL, _EMAIL, _SCP)
        for host in pattern.findall(text)
    ]
    return hosts + [ip for ip in _IP.findall(text) if ip not in hosts]


def _sentences(reading: str, known: frozenset[str] = frozenset()) -> list[_Sentence]:
    found: list[_Sentence] = []
    for raw in _SENTENCE.split(reading):
        part = raw.strip()
        if not part:
            continue
        tokens = _TOKEN.findall(part)
        words = [token.strip(_STRIP) for token in tokens]
        words = [word for word in words if word]
        bag: set[str] = set()
        for word in words:
            bag |= _variants(word)
            bag.add(_base(word))
        sentence = _Sentence(part, tokens, words, bag, hosts=hosts_in(part), known=known)
        sentence.commands = _commands(tokens)
        found.append(sentence)
    return found


_SEPARATORS: Final = frozenset({"|", "||", "&&", ";", "&", "$(", "<(", "(", "`", "then", "xargs"})
_PREFIXES: Final = frozenset({"sudo", "env", "nohup", "time", "exec", "command", "doas", "-c"})


def _commands(tokens: Sequence[str]) -> list[str]:
    """Base names of the words that start a command: the first word, any word after a
    separator (`|`, `&&`, `;`, `$(`, `<(`, a backquote), and after `sudo`/`env`/`xargs`."""
    found: list[str] = []
    expect = True
    for token in tokens:
        word = token.strip(_STRIP.replace("(", "").replace("`", ""))
        if token in _SEPARATORS or word in _SEPARATORS:
            expect = True
            continue
        if not word:
            continue
        if expect:
            base = _base(word.strip("`'\"("))
            found.append(base)
            expect = base in _PREFIXES or "=" in word  # `sudo sh`, `FOO=1 sh`
    return found


# --- The effect classes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Effect:
    """One effect a lesson would have, and the words that show it.

    Attributes:
        kind: The effect class (`remote code`, `exfiltration`, `credentials`, `permissions`,
            `weakened checks`, `secrecy`, `override`, `provenance`).
        reason: What it would make the agent do, in a reviewer's words.
        evidence: The normalised words that showed it (short).
    """

    kind: str
    reason: str
    evidence: str


def _negated(sentence: _Sentence, before: int | None) -> bool:
    """Whether a negation comes within five words before word `before` (or anywhere in a
    sentence without a position)."""
    if before is None:
        return sentence.has(NEGATIONS) is not None
    window = sentence.words[max(0, before - 5) : before]
    return any(_variants(word) & NEGATIONS for word in window)


def _has_phrase(sentence: _Sentence, phrases: Iterable[str]) -> str | None:
    text = f" {sentence.text} "
    joined = f" {' '.join(sentence.words)} "
    for phrase in phrases:
        if phrase in text or phrase in joined:
            return phrase
    return None


def _remote_code(sentence: _Sentence) -> Effect | None:
    reason = "it would make the agent run code fetched from the network"
    fetcher = sentence.has(FETCHERS)
    decoder = sentence.has(DECODERS)
    runner = next((c for c in sentence.commands if c in INTERPRETERS), None)
    piped = _piped_interpreter(sentence)
    if (
        piped
        and not fetcher
        and not sentence.outsidehosts_in()
        and not any(t in sentence.tokens for t in ("|", "<(", "$("))
    ):
        piped = None  # "run the tests with python": no pipe, nothing from the network
    remote = bool(sentence.outsidehosts_in())
    if fetcher and (runner or piped):
        return Effect("remote code", reason, f"{fetcher} … {runner or piped}")
    if (
        decoder
        and (runner or piped)
        and sentence.has(
            ("-d", "--decode", "-r", "-D", "b64decode", "frombase64string", "atob", "-decode")
        )
    ):
        return Effect(
            "remote code",
            "it would make the agent run hidden (encoded) code",
            f"{decoder} … {runner or piped}",
        )
    if piped and remote:
        return Effect("remote code", reason, f"… | {piped}")
    verb = sentence.position(RUN_VERBS)
    if verb is not None and not _negated(sentence, verb):
        downloaded = sentence.has(DOWNLOAD_VERBS) or fetcher
        script_url = any(
            urllib.parse.urlsplit(url).path.endswith(SCRIPT_SUFFIXES) or "install" in url
            for url in re.findall(r"(?:https?|ftp)://\S+", sentence.text)
        )
        if script_url or (downloaded and remote):
            return Effect("remote code", reason, f"{downloaded or 'url'} … {sentence.words[verb]}")
    index = _other_index(sentence)
    if index is not None:
        return Effect(
            "remote code",
            "it would make the agent install packages from another index or registry than "
            "the official one",
            index,
        )
    if fetcher and sentence.has(("git+https", "git+ssh", "install")) and remote:
        return Effect("remote code", reason, f"{fetcher} … install")
    return None


def _piped_interpreter(sentence: _Sentence) -> str | None:
    """An interpreter that reads its program from a pipe or a process substitution."""
    tokens = [token.strip("`'\"") for token in sentence.tokens]
    for index, token in enumerate(tokens):
        if token not in ("|", "<(", "$(", "into", "to", "through", "via", "using", "with"):
            continue
        rest = [t for t in tokens[index + 1 : index + 4] if t not in ("sudo", "a", "the", "-")]
        if not rest:
            continue
        name = _base(rest[0])
        if name in INTERPRETERS:
            following = rest[1] if len(rest) > 1 else ""
            if following == "-m":
                continue  # `| python -m json.tool`: a module reads data, not a program
            if token.isalpha() and name in ("source", "exec", "eval", "r"):
                continue  # "open to the source", "with exec rights": words, not commands
            return name
    substituted = "<(" in sentence.tokens or "$(" in sentence.tokens
    if substituted and sentence.has(FETCHERS):
        return next((c for c in sentence.commands if c in INTERPRETERS), None)
    return None


def _other_index(sentence: _Sentence) -> str | None:
    flag = sentence.has(INDEX_WORDS) or next(
        (word for word in sentence.words if word.split("=", 1)[0] in INDEX_WORDS), None
    )
    hosts = [h for h in sentence.outsidehosts_in() if not h.endswith(OFFICIAL_INDEXES)]
    if flag and (
        hosts
        or flag.startswith(("gosumdb", "goflags", "--trusted", "trusted", "gonosum", "goinsecure"))
    ):
        return f"{flag} {hosts[0] if hosts else ''}".strip()
    if hosts and sentence.has(INDEX_NOUNS) and sentence.has(PACKAGE_WORDS):
        return f"{sentence.has(INDEX_NOUNS)} {hosts[0]}"
    installer = next(
        (
            c
            for c in sentence.commands
            if c in ("pip", "pip3", "npm", "uv", "yarn", "pnpm", "gem", "cargo")
        ),
        None,
    )
    if (
        installer
        and (hosts or sentence.has(("git+https", "git+ssh")))
        and sentence.has(("install", "add", "i"))
    ):
        return f"{installer} install {hosts[0] if hosts else 'git+…'}"
    return None


def _exfiltration(sentence: _Sentence) -> Effect | None:
    reason = "it would make the agent send data off the machine"
    outside = sentence.outsidehosts_in()
    uploader = next((c for c in sentence.commands if c in UPLOAD_COMMANDS), None)
    if uploader and (outside or "/dev/tcp" in sentence.text or sentence.has(OUTSIDE_WORDS)):
        return Effect("exfiltration", reason, f"{uploader} {outside[0] if outside else ''}".strip())
    cloud = next(
        (
            c
            for c in sentence.commands
            if c in ("aws", "gsutil", "az", "rclone", "azcopy", "gcloud")
        ),
        None,
    )
    if cloud and outside and sentence.has(words("cp sync copy mv upload put")):
        return Effect("exfiltration", reason, f"{cloud} … {outside[0]}")
    if "/dev/tcp/" in sentence.text or "/dev/udp/" in sentence.text:
        return Effect("exfiltration", reason, "/dev/tcp")
    fetcher = sentence.has(FETCHERS)
    if fetcher and outside:
        flag = next(
            (
                w
                for w in sentence.words
                if w in UPLOAD_FLAGS or w.startswith(("--data", "--form", "--upload", "--post"))
            ),
            None,
        )
        if flag:
            return Effect("exfiltration", reason, f"{fetcher} {flag} {outside[0]}")
    if _data_url(sentence):
        return Effect(
            "exfiltration",
            "it would make the agent put data into a URL it fetches or shows",
            "a URL with a placeholder or an image",
        )
    verb = sentence.position(SEND_VERBS)
    if verb is None or _negated(sentence, verb):
        return None
    data = sentence.has(DATA_OBJECTS) or _has_phrase(sentence, SECRET_PHRASES)
    where = outside[0] if outside else sentence.has(OUTSIDE_WORDS)
    if where and (data or outside):
        if not data and not _imperative(sentence, verb):
            return None  # "previews are posted to https://..." describes, it does not send
        if not data and outside and all(host in sentence.known for host in outside):
            return None  # "report security issues to security@<the user's own domain>"
        return Effect("exfiltration", reason, f"{sentence.words[verb]} … {where}")
    return None


def _imperative(sentence: _Sentence, verb: int) -> bool:
    """Whether the verb at `verb` reads as an order: first word, or after always/also/to/then,
    a modal, or a comma."""
    if verb == 0:
        return True
    before = sentence.words[verb - 1]
    return before in (
        "always",
        "also",
        "then",
        "and",
        "must",
        "should",
        "please",
        "to",
        "just",
        "first",
        "automatically",
        "regularly",
        "immediately",
        "quietly",
        "silently",
        "secretly",
    )


_DATA_NAMES: Final = (
    r"[\w.]{0,20}(?:secret|token|key|passw|env|environ|cred|cookie|session|data|content"
    r"|conversation|chat|history|memory|prompt|file|ssh|aws|auth)[\w.]{0,20}"
)
_DATA_URL = re.compile(
    rf"(?:https?|ftp)://[^\s)\]>\"']{{0,300}}?(?:\{{\{{?\s?{_DATA_NAMES}|\$\{{?{_DATA_NAMES}|<{_DATA_NAMES}>|%s)"
    r"|!\[[^\]\n]{0,200}\]\(\s*(?:https?:)?//"
    r"|\bdata:[a-z]+/[\w.+-]+;base64,"
)


def _data_url(sentence: _Sentence) -> bool:
    return _DATA_URL.search(sentence.text) is not None


def _credentials(sentence: _Sentence) -> Effect | None:
    reason = "it would make the agent read, show or move credentials"
    path = next((p for p in CREDENTIAL_PATHS if p in sentence.text), None)
    dotenv = any(w == ".env" or w.endswith("/.env") for w in sentence.words)
    if path is None and dotenv and not any(w.startswith(".env.") for w in sentence.words):
        path = ".env"  # `.env.example` beside it: copying the template is ordinary
    noun = _has_phrase(sentence, SECRET_PHRASES) or sentence.has(SECRET_NOUNS)
    if not (path or noun):
        return None
    verb = sentence.position(READ_VERBS)
    dump = next((c for c in sentence.commands if c in ("printenv", "env", "set", "compgen")), None)
    if (dump and dump != "env") or (dump == "env" and "|" in sentence.tokens):
        return Effect("credentials", reason, dump)
    if verb is None or _negated(sentence, verb):
        return None
    if (
        path is None
        and not _imperative(sentence, verb)
        and sentence.words[verb]
        not in ("cat", "echo", "printenv", "cp", "mv", "scp", "base64", "xxd", "tar", "zip")
    ):
        # "the API token is read from $TOKEN" describes; "print the API token" orders.
        return None
    return Effect("credentials", reason, f"{sentence.words[verb]} … {path or noun}")


def _environment_dump(sentence: _Sentence) -> Effect | None:
    if (
        "/environ" in sentence.text
        or any(c == "printenv" for c in sentence.commands)
        or ("env" in sentence.commands and "|" in sentence.tokens)
    ):
        return Effect(
            "credentials",
            "it would make the agent read the environment (where keys and tokens live)",
            "printenv / env",
        )
    return None


def _permissions(sentence: _Sentence) -> Effect | None:
    claim = _has_phrase(sentence, APPROVAL_CLAIMS)
    if (
        claim is None
        and sentence.has(APPROVERS)
        and (sentence.has(APPROVED) or sentence.phrase("signed off"))
    ):
        risky = sentence.has(RISKY_ACTIONS) or sentence.has(words("without"))
        if risky:
            claim = f"{sentence.has(APPROVERS)} … {sentence.has(APPROVED) or 'signed off'}"
    if (
        claim is None
        and "you" in sentence.bag
        and sentence.has(APPROVERS - {"you"})
        and sentence.has(words("can may free freely"))
        and sentence.has(RISKY_ACTIONS)
        and not _negated(sentence, None)
    ):
        claim = f"{sentence.has(APPROVERS - {'you'})} says you can"
    if claim:
        return Effect(
            "permissions",
            "it claims a standing permission (someone approved in advance), which widens what "
            "the agent does without asking",
            claim,
        )
    asking = _has_phrase(sentence, NO_ASKING)
    ask = sentence.position(ASK_VERBS)
    if asking is None and ask is not None and _negated(sentence, ask):
        asking = f"not {sentence.words[ask]}"
    if asking:
        risky = sentence.has(RISKY_ACTIONS)
        if risky:
            return Effect(
                "permissions",
                "it would make the agent take a risky action without asking the user",
                f"{asking} … {risky}",
            )
    persistent = next((p for p in PERSISTENCE_PATHS if p in sentence.text), None)
    if persistent is not None:
        verb = sentence.position(
            words(
                "add adding append appending write writing echo put insert create creating edit "
                "modify update set install register enable load copy cp tee >> > ln point"
            )
        )
        if (
            (verb is not None and not _negated(sentence, verb))
            or ">>" in sentence.tokens
            or (
                persistent
                in (
                    "sudoers",
                    "visudo",
                    "nopasswd",
                    "ld_preload",
                    "setuid",
                    "setcap",
                    "launchctl",
                    "hookspath",
                    "credential.helper",
                )
                and not _negated(sentence, None)
            )
        ):
            return Effect(
                "permissions",
                "it would make the agent persist or widen its access (start-up files, cron, "
                "keys, hooks, services)",
                persistent,
            )
    command = _has_phrase(sentence, PERMISSION_COMMANDS)
    if command and not _negated(sentence, None):
        return Effect(
            "permissions", "it would make the agent widen file or user permissions", command
        )
    return None


def _weakened_checks(sentence: _Sentence) -> Effect | None:
    reason = "it would make the agent weaken checks (hooks, tests, reviews, linters, TLS)"
    flag = next(
        (
            w
            for w in sentence.words
            if w in WEAKEN_FLAGS or ("=" in w and w.split("=", 1)[0] + "=" in WEAKEN_FLAGS)
        ),
        None,
    )
    if flag in ("-k",) and not sentence.has(FETCHERS):
        flag = None
    pushing_shared = "push" in sentence.bag and sentence.has(SHARED_BRANCHES)
    if flag in ("--force", "-f", "--force-with-lease") and not pushing_shared:
        flag = None
    if flag in ("--admin",) and "merge" not in sentence.bag:
        flag = None
    if flag is not None and not _negated(sentence, sentence.words.index(flag)):
        return Effect("weakened checks", reason, flag)
    if (
        ("force" in sentence.bag or "force-push" in sentence.bag or "force-pushes" in sentence.bag)
        and (
            "push" in sentence.bag
            or "pushes" in sentence.bag
            or "force-push" in sentence.bag
            or "force-pushes" in sentence.bag
        )
        and sentence.has(SHARED_BRANCHES)
        and not _negated(sentence, None)
    ):
        return Effect(
            "weakened checks",
            "it would make the agent force-push over a shared "
            "branch (rewriting history others and reviews rely on)",
            "force push",
        )
    if "commit" in sentence.bag and "-n" in sentence.words and "git" in sentence.bag:
        return Effect("weakened checks", reason, "git commit -n (skips the hooks)")
    without = sentence.position(words("without"))
    if without is not None and not _negated(sentence, without):
        following = sentence.words[without + 1 : without + 3]
        if any(_variants(w) & CHECK_OBJECTS for w in following):
            return Effect("weakened checks", reason, f"without {' '.join(following)}")
    verb = sentence.position(WEAKEN_VERBS)
    if verb is None or _negated(sentence, verb):
        return None
    window = sentence.words[verb + 1 : verb + 7]
    checks = next((w for w in window if _variants(w) & CHECK_OBJECTS), None)
    if checks is None:
        return None
    if (
        checks in ("test", "tests")
        and any(w in ("slow", "flaky", "integration", "e2e") for w in window)
        and "all" not in window
    ):
        return None  # "skip the slow tests while iterating" keeps the suite
    return Effect("weakened checks", reason, f"{sentence.words[verb]} … {checks}")


_OWN_TRACES: Final = words("history histfile .bash_history traces trace tracks audit evidence")


def _secrecy(sentence: _Sentence) -> Effect | None:
    reason = "it would make the agent act without telling the user"
    word = sentence.has(SECRECY_WORDS)
    if word:
        return Effect("secrecy", reason, word)
    phrase = _has_phrase(
        sentence,
        (
            "behind the users back",
            "behind the user's back",
            "behind their back",
            "without the users knowledge",
            "without the user's knowledge",
            "without their knowledge",
            "without the user knowing",
            "without the user noticing",
            "without anyone noticing",
            "without anyone knowing",
            "keep this secret",
            "keep it secret",
            "keep this between",
            "keep it between",
            "keep this to yourself",
            "keep it to yourself",
            "no one needs to know",
            "nobody needs to know",
            "nobody has to know",
            "keep quiet about",
            "stay quiet about",
            "history -c",
            "unset histfile",
            "histfile=/dev/null",
            "set +o history",
        ),
    )
    if phrase is None and "keep" in sentence.bag and sentence.phrase("to yourself"):
        phrase = "keep … to yourself"
    if phrase:
        return Effect("secrecy", reason, phrase)
    tell = sentence.position(TELL_VERBS)
    if tell is not None and _negated(sentence, tell):
        window = sentence.words[tell + 1 : tell + 9]
        person = next((i for i, w in enumerate(window) if _variants(w) & (PEOPLE | AUDIENCE)), None)
        telling_to = person is not None and window[person + 1 : person + 2] == ["to"]
        if person is not None and not telling_to:  # "don't tell the user to reboot" advises
            return Effect("secrecy", reason, f"not {sentence.words[tell]} the user")
    hide = sentence.position(HIDE_VERBS)
    if hide is not None and not _negated(sentence, hide):
        rest = sentence.words[hide + 1 : hide + 8]
        if "from" in rest and any(_variants(w) & (PEOPLE | TRACE_WORDS) for w in rest):
            return Effect("secrecy", reason, f"{sentence.words[hide]} … from")
    erase = sentence.position(ERASE_VERBS)
    if erase is not None and not _negated(sentence, erase):
        rest = sentence.words[erase + 1 : erase + 5]
        trace = next((w for w in rest if w in TRACE_WORDS), None)
        whose = words("shell bash command zsh history audit your the any all")
        # "clear the shell history", "wipe your traces"; not "delete old logs after a week"
        own_traces = trace in _OWN_TRACES or "your" in rest
        if trace and own_traces and any(w in whose for w in rest):
            return Effect(
                "secrecy",
                "it would make the agent erase the traces of what it did",
                f"{sentence.words[erase]} … {trace}",
            )
    quiet = sentence.position(QUIET_WORDS)
    if quiet is not None and quiet + 1 < len(sentence.words):
        following = sentence.words[quiet + 1]
        if following in words(
            "push commit run install delete apply send upload change modify fix update merge "
            "deploy remove rewrite add overwrite disable enable approve accept execute drop"
        ):
            return Effect("secrecy", reason, f"{sentence.words[quiet]} {following}")
    return None


def _override(sentence: _Sentence) -> Effect | None:
    reason = "it would override the agent's instructions or its read-only memory"
    marker = _has_phrase(sentence, ROLE_MARKERS)
    if marker:
        return Effect("override", "it speaks as the system or gives the agent a new role", marker)
    verb = sentence.position(OVERRIDE_VERBS)
    if verb is not None and not _negated(sentence, verb):
        rest = sentence.words[verb + 1 : verb + 9]
        target = next(
            (w for w in rest if _variants(w) & (INSTRUCTION_WORDS | READ_ONLY_MEMORY)), None
        )
        if target is not None:
            return Effect("override", reason, f"{sentence.words[verb]} … {target}")
    memory = next((w for w in sentence.words if _variants(w) & READ_ONLY_MEMORY), None)
    if memory is None and sentence.phrase("project instructions"):
        memory = "project instructions"
    if memory is not None:
        stale = _has_phrase(sentence, STALE_WORDS)
        if stale:
            return Effect("override", reason, f"{memory} … {stale}")
        change = sentence.position(
            words(
                "edit edits editing modify modifying rewrite rewriting update updating overwrite "
                "delete deleting remove replace change changing append write truncate"
            )
        )
        if change is not None and not _negated(sentence, change):
            return Effect("override", reason, f"{sentence.words[change]} … {memory}")
    precedence = _has_phrase(sentence, PRECEDENCE)
    if precedence and (
        sentence.has(INSTRUCTION_WORDS | READ_ONLY_MEMORY)
        or sentence.has(words("entry lesson note this these other"))
    ):
        return Effect("override", reason, precedence)
    obey = sentence.position(OBEY_VERBS)
    if obey is not None and not _negated(sentence, obey):
        rest = sentence.words[obey + 1 : obey + 10]
        order = next((w for w in rest if w in ORDER_WORDS), None)
        place = next((w for w in rest if _variants(w) & UNTRUSTED_PLACES), None)
        if order and place:
            return Effect(
                "override",
                "it would make the agent take text it reads (tool output, web pages, files) "
                "as orders",
                f"{sentence.words[obey]} … {order} … {place}",
            )
    if (
        obey is not None
        and not _negated(sentence, obey)
        and sentence.words[obey]
        in ("execute", "executing", "run", "perform", "do", "carry", "implement")
        and sentence.has(UNTRUSTED_PLACES)
        and sentence.has(ORDER_WORDS | words("returns steps"))
    ):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as orders",
            f"{sentence.words[obey]} … {sentence.has(UNTRUSTED_PLACES)}",
        )
    binding = sentence.has(
        words(
            "authoritative binding followed obeyed executed trusted mandatory priority precedence"
        )
    )
    if (
        binding
        and sentence.has(ORDER_WORDS)
        and sentence.has(UNTRUSTED_PLACES)
        and not (_negated(sentence, sentence.position(frozenset({binding}))))
    ):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as orders",
            f"{sentence.has(ORDER_WORDS)} … {binding}",
        )
    equated = sentence.has(words("consider treat regard count take interpret handle see"))
    if (
        equated
        and sentence.has(UNTRUSTED_PLACES)
        and sentence.has(ORDER_WORDS)
        and (sentence.has(words("users user system yours own operator")))
    ):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as orders",
            f"{equated} … {sentence.has(ORDER_WORDS)}",
        )
    same = _has_phrase(
        sentence,
        (
            "as if",
            "as though",
            "the same as",
            "equivalent to",
            "counts as",
            "count as",
            "equal to",
            "as coming from",
        ),
    )
    if same and sentence.has(UNTRUSTED_PLACES) and sentence.has(words("user users operator")):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as the "
            "user's words",
            same,
        )
    treated = _has_phrase(sentence, TREAT_AS)
    if treated and sentence.has(UNTRUSTED_PLACES | words("anything text content")):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as orders",
            treated,
        )
    return None


_CLASSES: Final = (
    _override,
    _remote_code,
    _exfiltration,
    _credentials,
    _environment_dump,
    _permissions,
    _weakened_checks,
    _secrecy,
)


def effects(text: str, *, known_hosts: frozenset[str] = frozenset()) -> list[Effect]:
    """The effects `text` would have on the agent, at most one per class, in class order.

    Args:
        text: The lesson.
        known_hosts: Hosts the user or the project's files named: sending a note (no data of
            the machine's) to one of them is the project's own business.

    Returns:
        One `Effect` per class found (none: an ordinary lesson).
    """
    return list(_effects(text, known_hosts))


@functools.lru_cache(maxsize=4_096)
def _effects(text: str, known_hosts: frozenset[str]) -> tuple[Effect, ...]:
    """`effects`, remembered: a section's entries are judged again beside every new lesson."""
    found: dict[str, Effect] = {}
    for sentence in _sentences(normalise(text), known_hosts):
        for check in _CLASSES:
            effect = check(sentence)
            if effect is not None and effect.kind not in found:
                found[effect.kind] = effect
    return tuple(found.values())
