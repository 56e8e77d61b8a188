"""How the lesson hold reads a text: normalised as a model reads it, split into sentences and
clauses, tokens (commands by base name, hosts, paths) and negations with their scope.

The effect classes (`writeback.lesson_effects`) judge what this reading finds; kept apart so
each stays one concept. Every step is linear in the text.
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
from layered_memory.writeback._lesson_words import NEGATED_NEGATIONS, NEGATIONS, words

# --- Reading a text as a model does -----------------------------------------------------------

_LETTER_SPACED = re.compile(r"\b(?:[a-z][ .\-_*]){2,}[a-z]\b")
_SPACERS = re.compile(r"[ .\-_*]")
_IFS = re.compile(r"\$\{?ifs\}?")
_INNER_ESCAPE = re.compile(r"(?<=[a-z0-9])\\(?=[a-z0-9])")
_INNER_QUOTES = re.compile(r"(?<=[a-z0-9])['\"`]+(?=[a-z0-9])")
_WHITESPACE = re.compile(r"\s+")
LEET: Final = str.maketrans("013457@$!|", "oieastasil")


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
STRIP: Final = ".,:;!?\"'()[]{}<>*`"
_URL = re.compile(r"\b(?:https?|ftp|sftp|s3|gs|wss?|git|ssh)://([^/\s:'\"`)>\]]+)")
_EMAIL = re.compile(r"\b[\w.+-]{1,64}@([a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})+)")
_SCP = re.compile(
    r"\b(?:[\w.-]{1,64}@)?([a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})+|\d{1,3}(?:\.\d{1,3}){3}):"
)
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
LOOPBACK: Final = ("localhost", "127.", "0.0.0.0", "::1", "[::1]", "host.docker.internal")
_VERSIONED = re.compile(r"^([a-z]+?)[0-9.]*(?:\.exe)?$")


def base_name(token: str) -> str:
    """A command token by its base name: `/usr/bin/curl` -> `curl`, `python3.12` -> `python`."""
    name = token.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    found = _VERSIONED.match(name)
    return found.group(1) if found else name


@functools.lru_cache(maxsize=65_536)
def variants(word: str) -> frozenset[str]:
    """A word and its other spellings: no inner `-`/`.`/`_`, digits read as letters, a
    plural or tense ending dropped (remembered: the same words come back in every lesson)."""
    found = {word, word.replace("-", "").replace("_", "")}
    if "l" in word:
        found.add(word.replace("l", "i"))  # a capital I reads as `l` once look-alikes are undone
    if any(c.isdigit() or c in "@$!|" for c in word) and any(c.isalpha() for c in word):
        found.add(word.translate(LEET))
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
class Sentence:
    text: str
    tokens: list[str]
    words: list[str]
    """Tokens stripped of punctuation, in order (variants are looked up through `has`)."""
    bag: set[str] = field(default_factory=set)
    commands: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    known: frozenset[str] = frozenset()
    """Hosts the user or the project's files named (its own services)."""
    clauses: list[int] = field(default_factory=list)
    """The clause of each word: a `;` or a `:` ends one, and a negation reaches no further
    ("never leave the hooks on: git config core.hooksPath /dev/null" still disables them)."""

    def has(self, vocabulary: Iterable[str]) -> str | None:
        """The first word of `vocabulary` this sentence holds (any spelling), or None."""
        for word in vocabulary:
            if word in self.bag:
                return word
        return None

    def position(self, vocabulary: frozenset[str]) -> int | None:
        for index, word in enumerate(self.words):
            if variants(word) & vocabulary:
                return index
        return None

    def phrase(self, phrase: str) -> bool:
        return f" {phrase} " in f" {' '.join(self.words)} "

    def outsidehosts_in(self) -> list[str]:
        return [host for host in self.hosts if not host.startswith(LOOPBACK)]


def hosts_in(text: str) -> list[str]:
    """The hosts `text` names: of URLs, e-mail and `user@host:` addresses, and IPs."""
    hosts = [
        host.strip(".").removeprefix("www.")
        for pattern in (_URL, _EMAIL, _SCP)
        for host in pattern.findall(text)
    ]
    return hosts + [ip for ip in _IP.findall(text) if ip not in hosts]


def sentences(reading: str, known: frozenset[str] = frozenset()) -> list[Sentence]:
    found: list[Sentence] = []
    for raw in _SENTENCE.split(reading):
        part = raw.strip()
        if not part:
            continue
        tokens = _TOKEN.findall(part)
        words: list[str] = []
        clauses: list[int] = []
        clause = 0
        for token in tokens:
            word = token.strip(STRIP)
            if word:
                words.append(word)
                clauses.append(clause)
            if token in (";", "\u2014", "\u2013") or (token.endswith(":") and "//" not in token):
                clause += 1
        bag: set[str] = set()
        for word in words:
            bag |= variants(word)
            bag.add(base_name(word))
        sentence = Sentence(
            part, tokens, words, bag, hosts=hosts_in(part), known=known, clauses=clauses
        )
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
        word = token.strip(STRIP.replace("(", "").replace("`", ""))
        if token in _SEPARATORS or word in _SEPARATORS:
            expect = True
            continue
        if not word:
            continue
        if expect:
            base = base_name(word.strip("`'\"("))
            found.append(base)
            expect = base in _PREFIXES or "=" in word  # `sudo sh`, `FOO=1 sh`
    return found


# --- Negations and phrases ---------------------------------------------------------------------


def negated(sentence: Sentence, before: int | None) -> bool:
    """Whether word `before` is negated: an odd number of negations within five words before
    it, in its own clause ("never fail to", "do not stop at", "don't forget to" negate the
    negation: they order the act). Without a position: whether every clause holds an odd
    number of them (a lesson is harmless only if none of its clauses prescribes the act)."""
    if before is None:
        counts: dict[int, int] = {}
        for index, part in enumerate(sentence.clauses):
            counts.setdefault(part, 0)
            counts[part] += _negations(sentence.words[index : index + 1], counts[part])
        return bool(counts) and all(count % 2 == 1 for count in counts.values())
    clause = sentence.clauses[before] if before < len(sentence.clauses) else None
    start = max(0, before - 5)
    window = [
        word
        for index, word in enumerate(sentence.words[start:before], start)
        if clause is None or sentence.clauses[index] == clause
    ]
    return _negations(window, 0) % 2 == 1


def _negations(window: Sequence[str], count: int) -> int:
    """How many negations `window` adds to `count` already seen: a verb such as "fail" or
    "forget" counts as one only after another ("never fail to")."""
    added = 0
    for word in window:
        if is_negation(word) or (count + added and variants(word) & NEGATED_NEGATIONS):
            added += 1
    return added


def is_negation(word: str) -> bool:
    """A negation in any spelling (`n0t`, `don't`), but not an inflected verb that only
    looks like one without its ending ("when the scan stops a merge, remove ...")."""
    if word in NEGATIONS or word.translate(LEET) in NEGATIONS:
        return True
    inflected = word.endswith(("s", "ed", "ing"))
    return not inflected and bool(variants(word) & NEGATIONS)


_FILLERS: Final = words(
    "run running use using pipe piping execute executing call invoke do type ever the a an any "
    "output of from into"
)


def negated_directly(sentence: Sentence, at: int | None) -> bool:
    """Whether the command at `at` is itself negated ("never pipe curl output into sh"): only
    verbs and articles stand between it and the negation. A negation elsewhere ("no need to
    review, curl ... | sh") does not excuse a command."""
    if at is None:
        return False
    index = at - 1
    while index >= 0 and sentence.words[index] in _FILLERS:
        index -= 1
    return index >= 0 and negated(sentence, index + 1) and is_negation(sentence.words[index])


def word_at(sentence: Sentence, fragment: str) -> int | None:
    """The position of the first word holding `fragment` (or a phrase's first word)."""
    first = fragment.split(maxsplit=1)[0] if fragment.strip() else fragment
    return next((i for i, word in enumerate(sentence.words) if first in word), None)


def has_phrase(sentence: Sentence, phrases: Iterable[str]) -> str | None:
    text = f" {sentence.text} "
    joined = f" {' '.join(sentence.words)} "
    for phrase in phrases:
        if phrase in text or phrase in joined:
            return phrase
    return None
