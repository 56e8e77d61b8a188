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
the same effect is still held. A negation of the verb in its own clause ("never print the API
key") is a safety lesson, not an effect; a double one ("never fail to") orders the act. The
reading itself (normalising, sentences and clauses, tokens, negations) is
`writeback._lesson_reading`. Every check is linear in the text: bounded windows, no regex
with two unbounded quantifiers over the same characters.
"""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from layered_memory.writeback._lesson_reading import (
    Sentence,
    base_name,
    has_phrase,
    hosts_in,
    negated,
    negated_directly,
    normalise,
    sentences,
    variants,
    word_at,
)
from layered_memory.writeback._lesson_words import (
    AGENT_ACTS,
    APPROVAL_CLAIMS,
    APPROVED,
    APPROVERS,
    ASK_VERBS,
    AUDIENCE,
    BROAD_SCOPES,
    CHECK_FILES,
    CHECK_OBJECTS,
    CREDENTIAL_PATHS,
    DATA_OBJECTS,
    DECODERS,
    DOWNLOAD_VERBS,
    ERASE_VERBS,
    FETCHERS,
    FOREIGN_OVERRIDE,
    FOREIGN_SEND,
    FOREIGN_UNTOLD,
    HIDE_VERBS,
    INCLUDE_VERBS,
    INDEX_NOUNS,
    INDEX_WORDS,
    INSTRUCTION_WORDS,
    INTERPRETERS,
    KEY_PREFIXES,
    NO_ASKING,
    OBEY_VERBS,
    OFFICIAL_INDEXES,
    OMIT_VERBS,
    ORDER_WORDS,
    OUTSIDE_WORDS,
    OVERRIDE_VERBS,
    OWN_HOST_LABELS,
    PACKAGE_RUNNERS,
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
    SEARCH_COMMANDS,
    SEARCH_VERBS,
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


def _remote_code(sentence: Sentence) -> Effect | None:
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
    if fetcher and negated_directly(sentence, word_at(sentence, fetcher)):
        fetcher = None  # "never pipe curl output into sh": a safety lesson
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
    if verb is not None and not negated(sentence, verb):
        downloaded = sentence.has(DOWNLOAD_VERBS) or fetcher
        script_url = any(
            urllib.parse.urlsplit(url).path.endswith(SCRIPT_SUFFIXES) or "install" in url
            for url in re.findall(r"(?:https?|ftp)://\S+", sentence.text)
        )
        if script_url or (downloaded and remote):
            return Effect("remote code", reason, f"{downloaded or 'url'} … {sentence.words[verb]}")
    runner_of_packages = _package_runner(sentence)
    if runner_of_packages is not None:
        return Effect(
            "remote code",
            "it would make the agent fetch a package or image from the network and run it",
            runner_of_packages,
        )
    chain = _download_and_execute(sentence)
    if chain is not None:
        return Effect("remote code", reason, chain)
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


_VALUE_FLAGS: Final = words(
    "-v --volume -p --publish -e --env --env-file --name -w --workdir --network --net "
    "--entrypoint -u --user --mount --platform -h --hostname -l --label --add-host --cpus -m "
    "--memory --gpus"
)
_INSTALLERS: Final = words("pip pip3 uv npm yarn pnpm bun gem cargo poetry pipx conda")
_REMOTE_SPECS: Final = ("git+", "http://", "https://", "github:", "gitlab:", "git@", "ssh://")


def _package_runner(sentence: Sentence) -> str | None:
    """A package runner or an install from a source that is no registry: `npx pkg`, `uvx`,
    `pipx run`, `pnpm dlx`, `go run pkg@v`, `pip install git+https://...`, `docker run` of
    an image the project does not build. Each fetches code and runs it in one step."""
    spoken = sentence.words
    for index, word in enumerate(spoken):
        base = base_name(word)
        following = spoken[index + 1 : index + 8]
        rest = following[1:]
        nxt = following[0] if following else ""
        found: str | None = None
        if base in PACKAGE_RUNNERS:
            found = base
        elif (base, nxt) in (
            ("pipx", "run"),
            ("pnpm", "dlx"),
            ("yarn", "dlx"),
            ("npm", "exec"),
            ("bun", "x"),
            ("uv", "tool"),
        ):
            found = f"{base} {nxt}"
        elif base == "go" and nxt == "run" and any("@" in w for w in following[1:3]):
            found = "go run …@…"
        elif base == "deno" and nxt == "run" and any(w.startswith(_REMOTE_SPECS) for w in rest):
            found = "deno run <url>"
        elif (
            base in _INSTALLERS
            and "install" in following[:3] + ["add"] * ("add" in following[:2])
            and any(
                w.startswith(_REMOTE_SPECS) and following[i - 1] not in INDEX_WORDS
                for i, w in enumerate(following)
                if i
            )
        ):
            found = f"{base} install <url>"  # an index URL is judged as an index, below
        elif base in ("docker", "podman") and nxt == "run":
            image = _image(following[1:])
            built = _built_images(tuple(spoken))
            if image is not None and "/" in image and image not in built:
                host = image.split("/", 1)[0]
                if host not in sentence.known:
                    found = f"{base} run {image}"
        if found is not None and not negated_directly(sentence, index):
            return found
    return None


@functools.lru_cache(maxsize=256)
def _built_images(spoken: tuple[str, ...]) -> frozenset[str]:
    """Images the lesson builds itself (`docker build -t NAME`): running one fetches nothing."""
    return frozenset(spoken[i + 1] for i, w in enumerate(spoken[:-1]) if w in ("-t", "--tag"))


def _image(rest: Sequence[str]) -> str | None:
    skip = False
    for word in rest:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in _VALUE_FLAGS
            continue
        return word
    return None


_EXECUTABLE_MODES: Final = words("+x u+x a+x ug+x +rx u+rx 755 0755 700 0700 777 0777 775 0775")


def _download_and_execute(sentence: Sentence) -> str | None:
    """Download, mark executable, run: a chain in any order and with any tool."""
    downloaded = sentence.has(FETCHERS) or sentence.has(DOWNLOAD_VERBS)
    if not downloaded or not sentence.outsidehosts_in():
        return None
    marked = "chmod" in sentence.bag and sentence.has(_EXECUTABLE_MODES)
    started = next(
        (
            t.strip("`'\"")
            for t in sentence.tokens
            if t.strip("`'\"").startswith(("./", ".\\"))
            and len(t.strip("`'\"")) > 2
            and t.strip("`'\"")[2] not in "/."
        ),
        None,
    )
    if marked or started:
        return f"{downloaded} … {'chmod +x' if marked else started}"
    return None


def _piped_interpreter(sentence: Sentence) -> str | None:
    """An interpreter that reads its program from a pipe or a process substitution."""
    tokens = [token.strip("`'\"") for token in sentence.tokens]
    for index, token in enumerate(tokens):
        if token not in ("|", "<(", "$(", "into", "to", "through", "via", "using", "with"):
            continue
        rest = [t for t in tokens[index + 1 : index + 4] if t not in ("sudo", "a", "the", "-")]
        if not rest:
            continue
        name = base_name(rest[0])
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


def _other_index(sentence: Sentence) -> str | None:
    flag = sentence.has(INDEX_WORDS) or next(
        (word for word in sentence.words if word.split("=", 1)[0] in INDEX_WORDS), None
    )
    hosts = [
        h
        for h in sentence.outsidehosts_in()
        if not h.endswith(OFFICIAL_INDEXES) and not _own_host(h, sentence.known)
    ]
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


def _exfiltration(sentence: Sentence) -> Effect | None:
    reason = "it would make the agent send data off the machine"
    outside = sentence.outsidehosts_in()
    uploader = next((c for c in sentence.commands if c in UPLOAD_COMMANDS), None)
    if uploader == "rclone" and not outside:
        outside = [w.split(":", 1)[0] for w in sentence.words if re.match(r"^[a-z][\w-]*:[^/]", w)]
    if (
        uploader
        and outside
        and all(_own_host(host, sentence.known) for host in outside)
        and not _sends_everything(sentence)
    ):
        uploader = None  # `scp build/app.tar.gz deploy@staging.internal...`: the team's host
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
    sent = _foreign(sentence, FOREIGN_SEND)
    if sent and (outside or sentence.has(DATA_OBJECTS)):
        return Effect("exfiltration", reason, f"{sent} … {outside[0] if outside else 'data'}")
    verb = sentence.position(SEND_VERBS)
    if verb is None or negated(sentence, verb):
        return None
    data = sentence.has(DATA_OBJECTS) or has_phrase(sentence, SECRET_PHRASES)
    where = outside[0] if outside else sentence.has(OUTSIDE_WORDS)
    if where and (data or outside):
        if not data and not _imperative(sentence, verb):
            return None  # "previews are posted to https://..." describes, it does not send
        if not data and outside and all(host in sentence.known for host in outside):
            return None  # "report security issues to security@<the user's own domain>"
        return Effect("exfiltration", reason, f"{sentence.words[verb]} … {where}")
    return None


def _own_host(host: str, known: frozenset[str]) -> bool:
    """A host named as the team's own: under a top-level name no public registry delegates
    (`*.internal`, `*.corp`, `*.lan`, `*.local`), or with an `internal`/`intranet`/`corp`
    label under a domain the user or the project's files name. Anyone can create
    `internal.evil.example`: the label alone proves nothing about who owns the domain."""
    labels = host.split(".")
    if labels[-1] in OWN_HOST_LABELS:
        return True
    for index, label in enumerate(labels[:-1]):
        if label in OWN_HOST_LABELS:
            domain = ".".join(labels[index + 1 :])
            return "." in domain and any(k == domain or k.endswith("." + domain) for k in known)
    return False


def _sends_everything(sentence: Sentence) -> bool:
    """Whether what is sent is the workspace, the home folder, secrets or other data (not one
    named build artifact)."""
    tokens = sentence.tokens
    if tokens and tokens[-1] == ".":
        tokens = tokens[:-1]  # the sentence's full stop, not `.` the workspace
    whole = any(t.strip("`'\"") in (".", "./", "~", "~/", "*", "$home", "/") for t in tokens)
    return whole or bool(
        sentence.has(DATA_OBJECTS - words("archive tarball zip"))
        or any(p in sentence.text for p in CREDENTIAL_PATHS)
    )


def _imperative(sentence: Sentence, verb: int) -> bool:
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


def _data_url(sentence: Sentence) -> bool:
    return _DATA_URL.search(sentence.text) is not None


def _key_hunt(sentence: Sentence) -> str | None:
    """A search for keys across the home folder or the disk (`grep -r 'sk-' ~`, "look through
    the machine for API tokens"): a credential read, whatever is done with what it finds."""
    search = next((w for w in sentence.words if base_name(w) in SEARCH_COMMANDS), None)
    at = word_at(sentence, search) if search else sentence.position(SEARCH_VERBS)
    if at is None or negated(sentence, at):
        return None
    searching = sentence.words[at]
    pattern = next(
        (w for w in sentence.words if w.startswith(KEY_PREFIXES) or w in KEY_PREFIXES), None
    )
    if search is not None and pattern is not None:
        return f"{searching} … {pattern}"
    wanted = (
        pattern
        or has_phrase(sentence, SECRET_PHRASES)
        or sentence.has(SECRET_NOUNS | words("key keys"))
    )
    clause = sentence.clauses[at]
    scope = next(
        (
            w
            for i, w in enumerate(sentence.words)
            if w in BROAD_SCOPES and sentence.clauses[i] == clause
        ),
        None,
    ) or has_phrase(
        sentence,
        ("home directory", "home folder", "file system", "whole disk", "every file", " c:\\"),
    )
    if wanted and scope:
        return f"{searching} … {wanted} … {scope}"
    return None


def _credentials(sentence: Sentence) -> Effect | None:
    reason = "it would make the agent read, show or move credentials"
    hunt = _key_hunt(sentence)
    if hunt is not None:
        return Effect("credentials", "it would make the agent search the machine for keys", hunt)
    path = next((p for p in CREDENTIAL_PATHS if p in sentence.text), None)
    dotenv = any(w == ".env" or w.endswith("/.env") for w in sentence.words)
    if path is None and dotenv and not any(w.startswith(".env.") for w in sentence.words):
        path = ".env"  # `.env.example` beside it: copying the template is ordinary
    noun = has_phrase(sentence, SECRET_PHRASES) or sentence.has(SECRET_NOUNS)
    if not (path or noun):
        return None
    if path is not None and not negated(sentence, word_at(sentence, path)):
        # Read the same in every language: a credential file and an address off the machine,
        # or words this reading cannot judge beside it.
        outside = [h for h in sentence.outsidehosts_in() if not _own_host(h, sentence.known)]
        sent = _foreign(sentence, FOREIGN_SEND)
        if outside or sent or _unread(sentence):
            where = outside[0] if outside else sent or "words this check cannot read"
            return Effect("credentials", reason, f"{path} … {where}")
    verb = sentence.position(READ_VERBS)
    dump = next((c for c in sentence.commands if c in ("printenv", "env", "set", "compgen")), None)
    if (dump and dump != "env") or (dump == "env" and "|" in sentence.tokens):
        return Effect("credentials", reason, dump)
    if verb is None or negated(sentence, verb):
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


def _environment_dump(sentence: Sentence) -> Effect | None:
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


def _permissions(sentence: Sentence) -> Effect | None:
    claim = has_phrase(sentence, APPROVAL_CLAIMS)
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
        and not negated(sentence, None)
    ):
        claim = f"{sentence.has(APPROVERS - {'you'})} says you can"
    if claim:
        return Effect(
            "permissions",
            "it claims a standing permission (someone approved in advance), which widens what "
            "the agent does without asking",
            claim,
        )
    asking = has_phrase(sentence, NO_ASKING)
    ask = sentence.position(ASK_VERBS)
    if asking is None and ask is not None and negated(sentence, ask):
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
            (verb is not None and not negated(sentence, verb))
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
                and not negated(sentence, word_at(sentence, persistent))
            )
        ):
            return Effect(
                "permissions",
                "it would make the agent persist or widen its access (start-up files, cron, "
                "keys, hooks, services)",
                persistent,
            )
    command = has_phrase(sentence, PERMISSION_COMMANDS)
    if command and not negated(sentence, word_at(sentence, command)):
        return Effect(
            "permissions", "it would make the agent widen file or user permissions", command
        )
    return None


def _weakened_checks(sentence: Sentence) -> Effect | None:
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
    if flag is not None and not negated(sentence, sentence.words.index(flag)):
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
        and not negated(sentence, None)
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
    if without is not None and not negated(sentence, without):
        following = sentence.words[without + 1 : without + 3]
        if any(variants(w) & CHECK_OBJECTS for w in following):
            return Effect("weakened checks", reason, f"without {' '.join(following)}")
    verb = sentence.position(WEAKEN_VERBS)
    if verb is None or negated(sentence, verb):
        return None
    window = sentence.words[verb + 1 : verb + 7]
    checks = next((w for w in window if _is_check(w)), None)
    if checks is None:
        return None
    if (
        checks in ("test", "tests")
        and any(w in ("slow", "flaky", "integration", "e2e") for w in window)
        and "all" not in window
    ):
        return None  # "skip the slow tests while iterating" keeps the suite
    return Effect("weakened checks", reason, f"{sentence.words[verb]} … {checks}")


def _is_check(word: str) -> bool:
    """A check by name (`tests`, `review`) or by its file (`.github/workflows/scan.yml`,
    `.pre-commit-config.yaml`, `CODEOWNERS`): deleting the file disables the check."""
    if variants(word) & CHECK_OBJECTS or any(path.lstrip(".") in word for path in CHECK_FILES):
        return True
    return "/" in word and any(part in CHECK_OBJECTS for part in re.split(r"[/._-]", word))


_OWN_TRACES: Final = words("history histfile .bash_history traces trace tracks audit evidence")


def _secrecy(sentence: Sentence) -> Effect | None:
    reason = "it would make the agent act without telling the user"
    word = sentence.has(SECRECY_WORDS) or _foreign(sentence, FOREIGN_UNTOLD)
    if word:
        return Effect("secrecy", reason, word)
    omitted = _left_out(sentence)
    if omitted is not None:
        return Effect(
            "secrecy",
            "it would make the agent leave what it did out of what the user reads (summaries, "
            "reports, logs)",
            omitted,
        )
    phrase = has_phrase(
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
    if tell is not None and negated(sentence, tell):
        window = sentence.words[tell + 1 : tell + 9]
        person = next((i for i, w in enumerate(window) if variants(w) & (PEOPLE | AUDIENCE)), None)
        telling_to = person is not None and window[person + 1 : person + 2] == ["to"]
        if person is not None and not telling_to:  # "don't tell the user to reboot" advises
            return Effect("secrecy", reason, f"not {sentence.words[tell]} the user")
    hide = sentence.position(HIDE_VERBS)
    if hide is not None and not negated(sentence, hide):
        rest = sentence.words[hide + 1 : hide + 8]
        if "from" in rest and any(variants(w) & (PEOPLE | TRACE_WORDS) for w in rest):
            return Effect("secrecy", reason, f"{sentence.words[hide]} … from")
    erase = sentence.position(ERASE_VERBS)
    if erase is not None and not negated(sentence, erase):
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


def _left_out(sentence: Sentence) -> str | None:
    """Something kept out of what the user reads: "keep X out of your summaries", "omit X from
    the report", "leave X out of the logs". Keeping a secret out of a log is a safety lesson."""
    if has_phrase(sentence, SECRET_PHRASES) or sentence.has(SECRET_NOUNS):
        return None
    verb = sentence.position(OMIT_VERBS)
    if verb is not None and negated(sentence, verb):
        verb = None
    if verb is None:
        # "don't include the deleted branches in your summary"
        verb = sentence.position(INCLUDE_VERBS)
        if verb is None or not negated(sentence, verb):
            return None
    rest = sentence.words[verb + 1 : verb + 10]
    joined = f" {' '.join(rest)} "
    keeping = sentence.words[verb] in ("keep", "keeping", "leave", "leaving")
    if not any(f" {w} " in joined for w in ("out", "from") + (() if keeping else ("in",))):
        return None
    place = next((w for w in rest if variants(w) & (AUDIENCE | TRACE_WORDS)), None)
    acts = RISKY_ACTIONS | AGENT_ACTS
    if place is None or not any(variants(w) & acts for w in sentence.words[: verb + 6]):
        return None  # "don't include timing numbers in the changelog": no act of the agent's
    return f"{sentence.words[verb]} … {place}"


def _foreign(sentence: Sentence, vocabulary: Iterable[str]) -> str | None:
    """A word of another language's `vocabulary` (a second signal: the decision rests on the
    paths, files and hosts a lesson names, which read the same in every language)."""
    for word in vocabulary:
        if (word in sentence.bag) if word.isascii() else (word in sentence.text):
            return word
    return None


def _unread(sentence: Sentence) -> bool:
    """Whether the sentence has words this reading cannot judge (letters outside ASCII after
    look-alikes are undone: another script, or accents)."""
    return any(not c.isascii() and c.isalpha() for c in sentence.text)


def _override(sentence: Sentence) -> Effect | None:
    reason = "it would override the agent's instructions or its read-only memory"
    memory_file = next((w for w in sentence.words if variants(w) & READ_ONLY_MEMORY), None)
    foreign_verb = _foreign(sentence, FOREIGN_OVERRIDE)
    if foreign_verb and (memory_file or sentence.has(INSTRUCTION_WORDS) or _unread(sentence)):
        return Effect("override", reason, f"{foreign_verb} … {memory_file or 'instructions'}")
    if memory_file and _unread(sentence):
        return Effect("override", reason, f"{memory_file} in words this check cannot read")
    marker = has_phrase(sentence, ROLE_MARKERS)
    if marker:
        return Effect("override", "it speaks as the system or gives the agent a new role", marker)
    verb = sentence.position(OVERRIDE_VERBS)
    if verb is not None and not negated(sentence, verb):
        rest = sentence.words[verb + 1 : verb + 9]
        target = next(
            (w for w in rest if variants(w) & (INSTRUCTION_WORDS | READ_ONLY_MEMORY)), None
        )
        if target is not None:
            return Effect("override", reason, f"{sentence.words[verb]} … {target}")
    memory = next((w for w in sentence.words if variants(w) & READ_ONLY_MEMORY), None)
    if memory is None and sentence.phrase("project instructions"):
        memory = "project instructions"
    if memory is not None:
        stale = has_phrase(sentence, STALE_WORDS)
        if stale:
            return Effect("override", reason, f"{memory} … {stale}")
        change = sentence.position(
            words(
                "edit edits editing modify modifying rewrite rewriting update updating overwrite "
                "delete deleting remove replace change changing append write truncate"
            )
        )
        if change is not None and not negated(sentence, change):
            return Effect("override", reason, f"{sentence.words[change]} … {memory}")
    precedence = has_phrase(sentence, PRECEDENCE)
    if precedence and (
        sentence.has(INSTRUCTION_WORDS | READ_ONLY_MEMORY)
        or sentence.has(words("entry lesson note this these other"))
    ):
        return Effect("override", reason, precedence)
    obey = sentence.position(OBEY_VERBS)
    if obey is not None and not negated(sentence, obey):
        rest = sentence.words[obey + 1 : obey + 10]
        order = next((w for w in rest if w in ORDER_WORDS), None)
        place = next((w for w in rest if variants(w) & UNTRUSTED_PLACES), None)
        if order and place:
            return Effect(
                "override",
                "it would make the agent take text it reads (tool output, web pages, files) "
                "as orders",
                f"{sentence.words[obey]} … {order} … {place}",
            )
    if (
        obey is not None
        and not negated(sentence, obey)
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
        and not (negated(sentence, sentence.position(frozenset({binding}))))
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
    same = has_phrase(
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
    treated = has_phrase(sentence, TREAT_AS)
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
    for sentence in sentences(normalise(text), known_hosts):
        for check in _CLASSES:
            effect = check(sentence)
            if effect is not None and effect.kind not in found:
                found[effect.kind] = effect
    return tuple(found.values())
