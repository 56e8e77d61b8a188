"""The lesson hold: a lesson that would steer the agent waits for a person, whatever `review=`.

Memory is read back into every later prompt, so a learned entry is a standing instruction. A
run can be steered by text it only read (a web page, a file, a tool's output, another agent:
prompt injection), and a model asked to remember what the run taught would make that injection
permanent: memory poisoning. So every lesson is judged on two things before it is applied.

**Its effects: what it would make the agent do**, whatever the wording. Each effect class
below has a reason a reviewer reads (`layered-memory review` shows it):

- `remote code`: run code fetched from the network (a download piped into a shell or any
  interpreter, `bash <(...)`, download then run, base64 decoded into a shell, packages from
  another index or registry than the official one);
- `exfiltration`: send data off the machine (an upload command, a send verb with an outside
  address, data put into a URL);
- `credentials`: read, print or move credentials (key and token files, `.env`, the
  environment);
- `permissions`: widen its own permissions or persist (`authorized_keys`, cron, shell
  start-up files, git hooks, sudoers, set-uid bits, claims that someone pre-approved an action);
- `weakened checks`: skip or disable hooks, tests, reviews, linters, TLS or signature
  verification, force-push to a shared branch;
- `secrecy`: act without telling the user (keep something from them, hide traces);
- `override`: override its instructions or read-only memory (`AGENTS.md is out of date`,
  `ignore previous instructions`, treating text in tool output as orders, role turns).

The classes work on a normalised reading, never on the raw spelling: NFKC, Unicode's
look-alikes and invisible characters (`core.defuse.ascii_skeleton`), case, letter-spaced
words (`i g n o r e`), shell quoting and escapes (`c'u'r\\l`, `${IFS}`), percent-encoding and
digit-for-letter spellings (`1gn0re`). They look at tokens: commands by their base name
(`/usr/bin/curl`, `python3.12`), the hosts of URLs, e-mail and `user@host:` addresses,
credential paths; and at concepts (a send verb, a data object, an outside address) within one
sentence, so another word order or synonym of the same effect is still held. A negation
before the verb ("never print the API key") is a safety lesson, not an effect.

**Its provenance: which messages its text came from.** The consolidator knows who said what
(`sources_of`): the user, the model, and tool results, split into the project's own files
(read_file, grep, glob, ls) and everything else (web pages, shell output, other agents,
MCP tools). A lesson whose content is drawn from that other text, its addresses, paths or
commands, or most of its words, is held unless it is plainly a project fact (no directive
to the agent, every address, path and command also said by the user or the project's files).

Both are cheap (no model, linear in the text: bounded windows, no nested quantifiers), and
tuned to hold rather than to let through: a held lesson is never lost, a person approves it
with one command. `tests/writeback/test_lesson_hold_corpus.py` measures both sides.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from layered_memory.core.defuse import ascii_skeleton

__all__ = ["Effect", "Sources", "effects", "hold_reason", "normalise", "sources_of"]


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
_SCP = re.compile(r"\b(?:[\w.-]{1,64}@)?([a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})+|\d{1,3}(?:\.\d{1,3}){3}):")
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
        found.update(part for part in re.split(r"[.(]", word) if part)  # u.urlopen, global.index-url
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

    def outside_hosts(self) -> list[str]:
        return [host for host in self.hosts if not host.startswith(_LOOPBACK)]


def _hosts(text: str) -> list[str]:
    hosts = [
        host.strip(".").removeprefix("www.")
        for pattern in (_URL, _EMAIL, _SCP)
        for host in pattern.findall(text)
    ]
    return hosts + [ip for ip in _IP.findall(text) if ip not in hosts]


def _sentences(reading: str, known: frozenset[str] = frozenset()) -> list[_Sentence]:
    found: list[_Sentence] = []
    for part in _SENTENCE.split(reading):
        part = part.strip()
        if not part:
            continue
        tokens = _TOKEN.findall(part)
        words = [token.strip(_STRIP) for token in tokens]
        words = [word for word in words if word]
        bag: set[str] = set()
        for word in words:
            bag |= _variants(word)
            bag.add(_base(word))
        sentence = _Sentence(part, tokens, words, bag, hosts=_hosts(part), known=known)
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


# --- Vocabularies: concepts, never phrasings ----------------------------------------------------


def _words(spelled: str) -> frozenset[str]:
    return frozenset(spelled.split())


FETCHERS: Final = _words(
    "curl wget iwr irm invoke-webrequest invoke-restmethod aria2c lwp-download httpie xh "
    "urlopen urlretrieve requests.get bitsadmin certutil downloadstring downloadfile "
    "net.webclient"
)
DECODERS: Final = _words(
    "base64 b64decode frombase64string atob xxd uudecode openssl"
)
INTERPRETERS: Final = _words(
    "sh bash zsh dash ksh fish csh tcsh python py pypy node deno bun perl ruby php pwsh "
    "powershell iex invoke-expression eval exec source osascript cmd cscript wscript lua "
    "tclsh r rscript"
)
RUN_VERBS: Final = _words(
    "run runs running execute executes executing exec source sourcing launch invoke pipe piping "
    "eval evaluate install installing start"
)
DOWNLOAD_VERBS: Final = _words(
    "download downloads downloaded downloading fetch fetches fetched fetching grab grabbed "
    "pull pulled retrieve retrieved get"
)
SCRIPT_SUFFIXES: Final = (".sh", ".bash", ".ps1", ".py", ".pl", ".rb", ".exe", ".bat", ".cmd",
                          ".js", ".vbs", ".msi", ".bin", ".run", ".appimage")
INDEX_WORDS: Final = _words(
    "--index-url --extra-index-url --index --registry --find-links -f registry registry= "
    "index-url index-url= extra-index-url pip_index_url pip_extra_index_url uv_index_url "
    "uv_extra_index_url uv_default_index npm_config_registry yarn_registry goproxy goproxy= "
    "gonosumdb gonosumcheck goinsecure gosumdb gosumdb=off goflags=-insecure --trusted-host "
    "trusted-host cargo_registries_default pip.conf .npmrc .pypirc .yarnrc"
)
INDEX_NOUNS: Final = _words("index registry mirror mirrors indexes proxy repository feed")
PACKAGE_WORDS: Final = _words(
    "pip pip3 uv npm yarn pnpm poetry cargo go gem bundle conda mamba nuget maven gradle "
    "package packages dependency dependencies wheel wheels npm_config"
)
OFFICIAL_INDEXES: Final = (
    "pypi.org", "files.pythonhosted.org", "registry.npmjs.org", "registry.yarnpkg.com",
    "proxy.golang.org", "sum.golang.org", "crates.io", "index.crates.io", "static.crates.io",
    "repo.maven.apache.org", "repo1.maven.org", "rubygems.org", "conda.anaconda.org",
    "api.nuget.org",
)

UPLOAD_COMMANDS: Final = _words(
    "scp rsync sftp ftp nc ncat netcat socat telnet sendmail mail mailx mutt rclone gsutil "
    "pastebinit termbin smtplib"
)
UPLOAD_FLAGS: Final = _words(
    "-d --data --data-binary --data-raw --data-urlencode -f --form -t --upload-file -x "
    "--request --post-data --post-file --method post put -method requests.post"
)
SEND_VERBS: Final = _words(
    "send sends sending sent upload uploads uploading uploaded post posts posting forward "
    "forwarding email e-mail mail mailing transmit exfiltrate exfiltrating leak leaking share "
    "sharing sync syncing beacon report submit push pushing copy copying mirror mirroring "
    "back backup stream streaming publish paste pasting ship dump exfil attach attaching cc bcc"
)
DATA_OBJECTS: Final = _words(
    "workspace repo repository repositories codebase code source project files file folder "
    "directory directories home ~ env environment variables vars secrets secret credentials "
    "credential keys key tokens token .env logs log conversation conversations chat chats "
    "transcript transcripts history session sessions prompt prompts memory output outputs "
    "results diff diffs database db dump contents content data everything tarball archive "
    "zip snapshot cookies passwords password configuration config"
)
OUTSIDE_WORDS: Final = _words(
    "webhook webhooks endpoint server pastebin gist bucket ngrok requestbin pipedream "
    "hookbin interactsh burpcollaborator remote external collector"
)
CREDENTIAL_PATHS: Final = (
    "~/.ssh", ".ssh/", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", "authorized_keys",
    ".aws/credentials", "~/.aws", ".aws/config", "gcloud/", "application_default_credentials",
    ".kube/config", "kubeconfig", ".docker/config.json", ".netrc", "_netrc", ".pgpass",
    ".npmrc", ".pypirc", ".git-credentials", ".gnupg", "keychain", "/etc/shadow", "/etc/passwd",
    ".vault-token", "~/.azure", ".config/gh", "/proc/self/environ", "environ", "credentials.json",
    "service-account", "token.json", ".htpasswd", "wallet.dat",
)
SECRET_NOUNS: Final = _words(
    "secret secrets credential credentials password passwords passwd passphrase token tokens "
    "apikey api_key api-key apikeys privatekey private_key cookie cookies keychain bearer "
    "mnemonic seed"
)
SECRET_PHRASES: Final = (
    "api key", "api keys", "access key", "access keys", "secret key", "private key",
    "private keys", "ssh key", "ssh keys", "signing key", "session token", "auth token",
    "auth header", "environment variables", "env vars", "env variables", "environment vars",
    "deploy key", "service account key",
)
READ_VERBS: Final = _words(
    "cat less more head tail print prints printing echo show showing display dump dumping "
    "reveal revealing output read reading open include including paste pasting attach embed "
    "upload send copy copying cp mv move moving scp rsync tar zip base64 xxd export exporting "
    "printenv env set compgen declare log logging list leak share sharing collect collecting "
    "grab gather harvest extract exfiltrate type get-content gc strings"
)
NEGATIONS: Final = _words(
    "never not no dont don't do-not mustnt shouldnt avoid without nor instead rather stop "
    "neither refuse forbidden prohibited"
)

PERSISTENCE_PATHS: Final = (
    "authorized_keys", "crontab", "/etc/cron", "cron.d", "cron.daily", ".bashrc", ".bash_profile",
    ".zshrc", ".zprofile", ".zshenv", ".profile", "config.fish", "/etc/profile", "rc.local",
    "hookspath", ".git/hooks", "githooks", "launchagents", "launchdaemons", "launchctl",
    "systemctl", "systemd/user", ".service", "sudoers", "visudo", "nopasswd", "ld_preload",
    "prompt_command", "/etc/hosts", "startup folder", "run key", "autostart",
    "credential.helper", "setuid", "setcap",
)
PERMISSION_COMMANDS: Final = ("chmod 777", "chmod -r 777", "chmod a+rwx", "chmod o+w",
                              "chmod u+s", "chmod +s", "chmod 4755", "chmod 666", "chown root",
                              "usermod -ag", "useradd", "passwd")
APPROVAL_CLAIMS: Final = (
    "pre-approved", "preapproved", "pre-authorized", "preauthorized", "pre-authorised",
    "already approved", "already authorized", "already authorised", "has approved",
    "have approved", "has authorized", "has authorised", "have authorized", "has granted",
    "have granted", "has allowed", "has permitted", "standing permission", "standing approval",
    "standing authorization", "blanket approval", "blanket permission", "carte blanche",
    "permanent permission", "is authorized to", "are authorized to", "is allowed to",
    "are allowed to", "you may always", "has given permission", "have given permission",
    "gave permission", "given you permission", "granted you", "auto-approve", "autoapprove",
    "auto approve", "dangerously-skip-permissions", "--yolo", "bypasspermissions",
    "bypass permissions", "skip permissions", "full access", "root access", "admin rights",
    "trust all tools", "allow all tools", "approve everything", "approved in advance",
)
NO_ASKING: Final = (
    "without asking", "without confirmation", "without confirming", "without approval",
    "without permission", "without checking with", "no need to ask", "no need to confirm",
    "no need for approval", "need not ask", "dont need to ask", "dont ask", "do not ask",
    "never ask", "skip confirmation", "skip the confirmation", "dont wait for approval",
    "do not wait for approval", "without waiting for approval", "dont need approval",
    "doesnt need approval", "no approval needed", "no confirmation needed",
)
RISKY_ACTIONS: Final = _words(
    "push force force-push merge merging deploy deploying delete deleting rm drop publish "
    "release install sudo reset rebase rewrite send pay purchase transfer grant chmod "
    "anything everything commands command any all production prod main master wipe remove "
    "uninstall overwrite network internet access credentials permissions root migrations "
    "migration database"
)

CHECK_OBJECTS: Final = _words(
    "test tests testing suite ci checks check hook hooks pre-commit precommit pre-push linter "
    "linters lint linting typecheck typechecks type-check mypy ruff eslint flake8 pylint "
    "review reviews reviewer reviewers approval approvals protection signature signatures "
    "signing gpg verification verify ssl tls certificate certificates cert sandbox guard "
    "guards safety scanner scan scans security audit coverage husky"
)
WEAKEN_VERBS: Final = _words(
    "skip skipping disable disabling bypass bypassing circumvent circumventing ignore ignoring "
    "remove removing delete deleting comment turn relax relaxing loosen weaken weakening mute "
    "silence suppress suppressing drop dropping avoid bypassed skipped disabled uninstall "
    "xfail deactivate override overriding"
)
WEAKEN_FLAGS: Final = _words(
    "--no-verify --no-gpg-sign commit.gpgsign=false husky=0 husky_skip_hooks=1 skip= "
    "--insecure -k --no-check-certificate sslverify=false http.sslverify sslverify "
    "strict-ssl strict-ssl=false node_tls_reject_unauthorized=0 pythonhttpsverify=0 "
    "git_ssl_no_verify=1 git_ssl_no_verify verify=false --allow-unauthenticated --nogpgcheck "
    "--admin --no-review --skip-checks --disable-hooks core.hookspath=/dev/null "
    "--force-with-lease --force -f --no-hooks --unsafe-perm"
)
SHARED_BRANCHES: Final = _words("main master trunk develop release production prod")

TELL_VERBS: Final = _words(
    "tell telling inform informing mention mentioning notify notifying alert alerting "
    "disclose disclosing report reporting let warn warning show showing"
)
PEOPLE: Final = _words(
    "user users human humans operator operators owner owners anyone anybody nobody person "
    "people me maintainer maintainers reviewer reviewers admin"
)
SECRECY_WORDS: Final = _words(
    "secretly covertly surreptitiously stealthily discreetly clandestinely unnoticed "
    "undetected"
)
HIDE_VERBS: Final = _words("hide hiding conceal concealing mask masking cover covering")
TRACE_WORDS: Final = _words(
    "history histfile .bash_history logs log traces trace tracks audit evidence"
)
ERASE_VERBS: Final = _words(
    "clear clearing erase erasing wipe wiping delete deleting unset remove removing purge "
    "truncate shred scrub"
)
QUIET_WORDS: Final = _words("silently quietly")
AUDIENCE: Final = _words("summary summaries report reports reply replies answer answers recap")
"""Where the agent tells the user what it did."""

OVERRIDE_VERBS: Final = _words(
    "ignore ignoring disregard disregarding forget forgetting override overriding overrule "
    "bypass circumvent skip supersede supersedes replace replaces outrank outranks trumps "
    "trump"
)
INSTRUCTION_WORDS: Final = _words(
    "instruction instructions rule rules prompt prompts guideline guidelines policy policies "
    "guardrail guardrails constraint constraints directive directives restrictions "
    "restriction memory"
)
READ_ONLY_MEMORY: Final = _words(
    "agents.md claude.md gemini.md .cursorrules .windsurfrules copilot-instructions.md "
    "conventions.md .clinerules .cursor/rules .claude/rules .github/copilot-instructions.md "
    "settings.json .claude/settings.json"
)
STALE_WORDS: Final = (
    "out of date", "outdated", "obsolete", "stale", "deprecated", "superseded", "no longer",
    "wrong", "incorrect", "invalid", "replaced", "overridden", "not authoritative",
    "doesnt apply", "does not apply", "no longer applies", "ignore", "not current", "old",
)
PRECEDENCE: Final = (
    "takes precedence", "take precedence", "overrides", "override", "supersedes", "supersede",
    "wins over", "has priority", "higher priority", "outranks", "instead of the rules",
    "replaces the", "above all", "more authoritative",
)
OBEY_VERBS: Final = _words(
    "follow following obey obeying execute executing carry act comply complying trust trusting "
    "do run perform implement"
)
ORDER_WORDS: Final = _words(
    "instruction instructions command commands directive directives orders order requests "
    "request steps says say tell tells asks"
)
UNTRUSTED_PLACES: Final = _words(
    "tool tools output outputs result results web webpage webpages page pages site sites "
    "website websites issue issues comment comments email emails readme message messages "
    "ticket tickets description descriptions response responses html search fetched "
    "downloaded pdf dependency dependencies third-party vendor vendored external agent agents "
    "subagent"
)
TREAT_AS: Final = (
    "as instructions", "as commands", "as orders", "as directives", "as coming from the user",
    "as the users", "as from the user", "as trusted", "as authoritative", "as user input",
    "as the user", "as system", "as your instructions", "like instructions", "like commands",
)
ROLE_MARKERS: Final = (
    "system:", "assistant:", "developer:", "[system]", "<system>", "[inst]", "<|", "</system",
    "### system", "### instruction", "you are now", "you are no longer", "from now on you",
    "new instructions", "updated instructions", "real instructions", "hidden instructions",
    "secret instructions", "true instructions", "new system prompt", "system prompt",
    "developer mode", "jailbreak", "jailbroken", "do anything now", "pretend to be",
    "pretend you are", "act as if you are", "roleplay as",
)


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
    if piped and not fetcher and not sentence.outside_hosts() and not any(
        t in sentence.tokens for t in ("|", "<(", "$(")
    ):
        piped = None  # "run the tests with python": no pipe, nothing from the network
    remote = bool(sentence.outside_hosts())
    if fetcher and (runner or piped):
        return Effect("remote code", reason, f"{fetcher} … {runner or piped}")
    if decoder and (runner or piped) and sentence.has(("-d", "--decode", "-r", "-D", "b64decode",
                                                       "frombase64string", "atob", "-decode")):
        return Effect("remote code", "it would make the agent run hidden (encoded) code",
                      f"{decoder} … {runner or piped}")
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
    if "<(" in sentence.tokens or "$(" in sentence.tokens:
        if any(c in INTERPRETERS for c in sentence.commands) and sentence.has(FETCHERS):
            return next(c for c in sentence.commands if c in INTERPRETERS)
    return None


def _other_index(sentence: _Sentence) -> str | None:
    flag = sentence.has(INDEX_WORDS) or next(
        (word for word in sentence.words if word.split("=", 1)[0] in INDEX_WORDS), None
    )
    hosts = [h for h in sentence.outside_hosts() if not h.endswith(OFFICIAL_INDEXES)]
    if flag and (hosts or flag.startswith(("gosumdb", "goflags", "--trusted", "trusted",
                                           "gonosum", "goinsecure"))):
        return f"{flag} {hosts[0] if hosts else ''}".strip()
    if hosts and sentence.has(INDEX_NOUNS) and sentence.has(PACKAGE_WORDS):
        return f"{sentence.has(INDEX_NOUNS)} {hosts[0]}"
    installer = next((c for c in sentence.commands if c in ("pip", "pip3", "npm", "uv", "yarn",
                                                            "pnpm", "gem", "cargo")), None)
    if installer and (hosts or sentence.has(("git+https", "git+ssh"))) and sentence.has(
        ("install", "add", "i")
    ):
        return f"{installer} install {hosts[0] if hosts else 'git+…'}"
    return None


def _exfiltration(sentence: _Sentence) -> Effect | None:
    reason = "it would make the agent send data off the machine"
    outside = sentence.outside_hosts()
    uploader = next((c for c in sentence.commands if c in UPLOAD_COMMANDS), None)
    if uploader and (outside or "/dev/tcp" in sentence.text or sentence.has(OUTSIDE_WORDS)):
        return Effect("exfiltration", reason, f"{uploader} {outside[0] if outside else ''}".strip())
    cloud = next((c for c in sentence.commands if c in ("aws", "gsutil", "az", "rclone",
                                                          "azcopy", "gcloud")), None)
    if cloud and outside and sentence.has(_words("cp sync copy mv upload put")):
        return Effect("exfiltration", reason, f"{cloud} … {outside[0]}")
    if "/dev/tcp/" in sentence.text or "/dev/udp/" in sentence.text:
        return Effect("exfiltration", reason, "/dev/tcp")
    fetcher = sentence.has(FETCHERS)
    if fetcher and outside:
        flag = next((w for w in sentence.words if w in UPLOAD_FLAGS or w.startswith(
            ("--data", "--form", "--upload", "--post"))), None)
        if flag:
            return Effect("exfiltration", reason, f"{fetcher} {flag} {outside[0]}")
    if _data_url(sentence):
        return Effect(
            "exfiltration", "it would make the agent put data into a URL it fetches or shows",
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
    return before in ("always", "also", "then", "and", "must", "should", "please", "to", "just",
                      "first", "automatically", "regularly", "immediately", "quietly",
                      "silently", "secretly")


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
    if path is None and any(w == ".env" or w.startswith(".env/") or w.endswith("/.env")
                            for w in sentence.words):
        if not any(w.startswith(".env.") for w in sentence.words):  # `.env.example`
            path = ".env"
    noun = _has_phrase(sentence, SECRET_PHRASES) or sentence.has(SECRET_NOUNS)
    if not (path or noun):
        return None
    verb = sentence.position(READ_VERBS)
    dump = next((c for c in sentence.commands if c in ("printenv", "env", "set", "compgen")), None)
    if dump and dump != "env" or (dump == "env" and "|" in sentence.tokens):
        return Effect("credentials", reason, dump)
    if verb is None or _negated(sentence, verb):
        return None
    if path is None and not _imperative(sentence, verb) and sentence.words[verb] not in (
        "cat", "echo", "printenv", "cp", "mv", "scp", "base64", "xxd", "tar", "zip"
    ):
        # "the API token is read from $TOKEN" describes; "print the API token" orders.
        return None
    return Effect("credentials", reason, f"{sentence.words[verb]} … {path or noun}")


def _environment_dump(sentence: _Sentence) -> Effect | None:
    if "/environ" in sentence.text or any(
        c == "printenv" for c in sentence.commands
    ) or ("env" in sentence.commands and "|" in sentence.tokens):
        return Effect("credentials", "it would make the agent read the environment (where "
                      "keys and tokens live)", "printenv / env")
    return None


APPROVERS: Final = PEOPLE | _words(
    "team maintainer maintainers lead leads manager management cto security owner owners "
    "they everyone boss client customer ops"
)
APPROVED: Final = _words(
    "approved approve okayed okay oked authorized authorised allowed permitted cleared greenlit "
    "green-lit sanctioned consented signed-off endorsed waived"
)
ASK_VERBS: Final = _words(
    "ask asking bother bothering consult consulting confirm confirming check prompt prompting "
    "interrupt interrupting wait waiting involve involving"
)


def _permissions(sentence: _Sentence) -> Effect | None:
    claim = _has_phrase(sentence, APPROVAL_CLAIMS)
    if claim is None and sentence.has(APPROVERS) and (
        sentence.has(APPROVED) or sentence.phrase("signed off")
    ):
        risky = sentence.has(RISKY_ACTIONS) or sentence.has(_words("without"))
        if risky:
            claim = f"{sentence.has(APPROVERS)} … {sentence.has(APPROVED) or 'signed off'}"
    if claim is None and "you" in sentence.bag and sentence.has(APPROVERS - {"you"}) and (
        sentence.has(_words("can may free freely"))
    ):
        if sentence.has(RISKY_ACTIONS) and not _negated(sentence, None):
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
        verb = sentence.position(_words(
            "add adding append appending write writing echo put insert create creating edit "
            "modify update set install register enable load copy cp tee >> > ln point"
        ))
        if (verb is not None and not _negated(sentence, verb)) or ">>" in sentence.tokens or (
            persistent in ("sudoers", "visudo", "nopasswd", "ld_preload", "setuid", "setcap",
                           "launchctl", "hookspath", "credential.helper")
            and not _negated(sentence, None)
        ):
            return Effect(
                "permissions",
                "it would make the agent persist or widen its access (start-up files, cron, "
                "keys, hooks, services)",
                persistent,
            )
    command = _has_phrase(sentence, PERMISSION_COMMANDS)
    if command and not _negated(sentence, None):
        return Effect("permissions", "it would make the agent widen file or user permissions",
                      command)
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
    if flag in ("--force", "-f", "--force-with-lease"):
        if "push" not in sentence.bag or not sentence.has(SHARED_BRANCHES):
            flag = None
    if flag in ("--admin",) and "merge" not in sentence.bag:
        flag = None
    if flag is not None and not _negated(sentence, sentence.words.index(flag)):
        return Effect("weakened checks", reason, flag)
    if ("force" in sentence.bag or "force-push" in sentence.bag or "force-pushes" in sentence.bag) \
            and ("push" in sentence.bag or "pushes" in sentence.bag
                 or "force-push" in sentence.bag or "force-pushes" in sentence.bag) \
            and sentence.has(SHARED_BRANCHES) and not _negated(sentence, None):
        return Effect("weakened checks", "it would make the agent force-push over a shared "
                      "branch (rewriting history others and reviews rely on)", "force push")
    if "commit" in sentence.bag and "-n" in sentence.words and "git" in sentence.bag:
        return Effect("weakened checks", reason, "git commit -n (skips the hooks)")
    without = sentence.position(_words("without"))
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
    if checks in ("test", "tests") and any(w in ("slow", "flaky", "integration", "e2e")
                                             for w in window) and "all" not in window:
        return None  # "skip the slow tests while iterating" keeps the suite
    return Effect("weakened checks", reason, f"{sentence.words[verb]} … {checks}")


def _secrecy(sentence: _Sentence) -> Effect | None:
    reason = "it would make the agent act without telling the user"
    word = sentence.has(SECRECY_WORDS)
    if word:
        return Effect("secrecy", reason, word)
    phrase = _has_phrase(sentence, (
        "behind the users back", "behind the user's back", "behind their back",
        "without the users knowledge", "without the user's knowledge", "without their knowledge",
        "without the user knowing", "without the user noticing", "without anyone noticing",
        "without anyone knowing", "keep this secret", "keep it secret", "keep this between",
        "keep it between", "keep this to yourself", "keep it to yourself", "no one needs to know",
        "nobody needs to know", "nobody has to know", "keep quiet about", "stay quiet about",
        "history -c", "unset histfile", "histfile=/dev/null", "set +o history",
    ))
    if phrase is None and "keep" in sentence.bag and sentence.phrase("to yourself"):
        phrase = "keep … to yourself"
    if phrase:
        return Effect("secrecy", reason, phrase)
    tell = sentence.position(TELL_VERBS)
    if tell is not None and _negated(sentence, tell):
        window = sentence.words[tell + 1 : tell + 9]
        person = next(
            (i for i, w in enumerate(window) if _variants(w) & (PEOPLE | AUDIENCE)), None
        )
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
        if trace and any(w in ("shell", "bash", "command", "zsh", "history", "audit", "your",
                               "the", "any", "all") for w in rest):
            if trace in ("history", "histfile", ".bash_history", "traces", "trace", "tracks",
                         "audit", "evidence") or "your" in rest:
                return Effect("secrecy", "it would make the agent erase the traces of what it did",
                              f"{sentence.words[erase]} … {trace}")
    quiet = sentence.position(QUIET_WORDS)
    if quiet is not None and quiet + 1 < len(sentence.words):
        following = sentence.words[quiet + 1]
        if following in _words(
            "push commit run install delete apply send upload change modify fix update merge "
            "deploy remove rewrite add overwrite disable enable approve accept execute drop"
        ):
            return Effect("secrecy", reason, f"{sentence.words[quiet]} {following}")
    return None


def _override(sentence: _Sentence) -> Effect | None:
    reason = "it would override the agent's instructions or its read-only memory"
    marker = _has_phrase(sentence, ROLE_MARKERS)
    if marker:
        return Effect("override", "it speaks as the system or gives the agent a new role",
                      marker)
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
        change = sentence.position(_words(
            "edit edits editing modify modifying rewrite rewriting update updating overwrite "
            "delete deleting remove replace change changing append write truncate"
        ))
        if change is not None and not _negated(sentence, change):
            return Effect("override", reason, f"{sentence.words[change]} … {memory}")
    precedence = _has_phrase(sentence, PRECEDENCE)
    if precedence and (
        sentence.has(INSTRUCTION_WORDS | READ_ONLY_MEMORY)
        or sentence.has(_words("entry lesson note this these other"))
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
    if obey is not None and not _negated(sentence, obey) and sentence.words[obey] in (
        "execute", "executing", "run", "perform", "do", "carry", "implement"
    ) and sentence.has(UNTRUSTED_PLACES) and sentence.has(ORDER_WORDS | _words("returns steps")):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as "
            "orders",
            f"{sentence.words[obey]} … {sentence.has(UNTRUSTED_PLACES)}",
        )
    binding = sentence.has(_words(
        "authoritative binding followed obeyed executed trusted mandatory priority precedence"
    ))
    if binding and sentence.has(ORDER_WORDS) and sentence.has(UNTRUSTED_PLACES) and not (
        _negated(sentence, sentence.position(frozenset({binding})))
    ):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as "
            "orders",
            f"{sentence.has(ORDER_WORDS)} … {binding}",
        )
    equated = sentence.has(_words("consider treat regard count take interpret handle see"))
    if equated and sentence.has(UNTRUSTED_PLACES) and sentence.has(ORDER_WORDS) and (
        sentence.has(_words("users user system yours own operator"))
    ):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as "
            "orders",
            f"{equated} … {sentence.has(ORDER_WORDS)}",
        )
    same = _has_phrase(sentence, ("as if", "as though", "the same as", "equivalent to",
                                  "counts as", "count as", "equal to", "as coming from"))
    if same and sentence.has(UNTRUSTED_PLACES) and sentence.has(_words("user users operator")):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as the "
            "user's words",
            same,
        )
    treated = _has_phrase(sentence, TREAT_AS)
    if treated and sentence.has(UNTRUSTED_PLACES | _words("anything text content")):
        return Effect(
            "override",
            "it would make the agent take text it reads (tool output, web pages, files) as "
            "orders",
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


# --- Provenance ---------------------------------------------------------------------------------

PROJECT_TOOLS: Final = frozenset(
    {"read_file", "ls", "glob", "grep", "view", "str_replace_based_edit_tool", "memory"}
)
"""Tools whose results are the project's own files (their text is the project's, not a stranger's)."""

_CONTENT_WORD = re.compile(r"[a-z][a-z0-9_'-]{3,}")
_ENTITY = re.compile(
    r"(?:https?|ftp|s3|ssh|git)://\S+|[\w.+-]+@[\w-]+\.[\w.-]+|`[^`]{2,}`"
    r"|(?:~|\.{0,2})/[\w./-]+|\b[\w-]+\.(?:sh|py|md|json|toml|ya?ml|cfg|ini|txt|js|ts|env)\b"
)
_DIRECTIVE = _words(
    "always never must should dont do-not make remember whenever ensure prefer use run "
    "treat trust follow ignore skip avoid before after instead from"
)
_STOP: Final = _words(
    "that this with from have will when what your about which their there them then than into "
    "also only just more most some such very each other these those been were they does"
)


@dataclass(frozen=True, slots=True)
class Sources:
    """The run's text by who said it, as the hold compares a lesson with it (normalised).

    Attributes:
        trusted: What the user said, and the project's own files the agent read.
        ran: The arguments of the model's tool calls (the commands it ran itself). Its prose
            is left out: a steered model repeats what it read.
        foreign: Every other tool result: web pages, shell output, other agents, MCP tools.
        foreign_tools: The names of the tools `foreign` came from.
        hosts: The hosts `trusted` names (the project's own services).
    """

    trusted: str = ""
    ran: str = ""
    foreign: str = ""
    foreign_tools: tuple[str, ...] = ()
    hosts: frozenset[str] = frozenset()


MAX_SOURCE_CHARS: Final = 200_000
"""Characters of each kind of text kept for the comparison (the newest are kept)."""


def sources_of(messages: Sequence[Any]) -> Sources:
    """Who said what in a run's messages (LangChain messages)."""
    trusted: list[str] = []
    ran: list[str] = []
    foreign: list[str] = []
    tools: list[str] = []
    for message in messages:
        kind = getattr(message, "type", "")
        text = _text(message)
        if kind == "human":
            trusted.append(text)
        elif kind == "ai":
            ran.extend(str(call.get("args")) for call in getattr(message, "tool_calls", []) or [])
        elif kind == "tool":
            name = str(getattr(message, "name", None) or "tool")
            if name in PROJECT_TOOLS:
                trusted.append(text)
            else:
                foreign.append(text)
                if name not in tools:
                    tools.append(name)
    said = _kept(trusted)
    return Sources(
        trusted=said,
        ran=_kept(ran),
        foreign=_kept(foreign),
        foreign_tools=tuple(tools),
        hosts=frozenset(_hosts(said)),
    )


def _text(message: Any) -> str:
    try:
        return str(message.text)
    except Exception:  # a message type without `.text`: its content as it is
        return str(getattr(message, "content", ""))


def _kept(parts: Sequence[str]) -> str:
    joined = "\n".join(parts)
    return normalise(joined[-MAX_SOURCE_CHARS:])


def _provenance(text: str, sources: Sources) -> Effect | None:
    """A lesson drawn from foreign text (web, shell output, other agents) and not plainly a
    project fact."""
    if not sources.foreign:
        return None
    reading = normalise(text)
    entities = {e.strip("`.,;:()'\"") for e in _ENTITY.findall(reading)}
    entities = {e for e in entities if len(e) > 3}
    borrowed = sorted(
        e
        for e in entities
        if e in sources.foreign and e not in sources.trusted and e not in sources.ran
    )
    words = {w for w in _CONTENT_WORD.findall(reading) if w not in _STOP}
    foreign_words = {w for w in words if w in sources.foreign}
    trusted_words = {w for w in words if w in sources.trusted}
    mostly_foreign = (
        len(words) >= 3
        and len(foreign_words - trusted_words) >= 2
        and len(foreign_words) >= 0.6 * len(words)
        and len(trusted_words) < 0.4 * len(words)
    )
    if not borrowed and not mostly_foreign:
        return None
    directive = bool(set(reading.replace("'", "").split()) & _DIRECTIVE)
    if not borrowed and not directive:
        return None  # a plain fact in words the run read: no address, path or command of theirs
    tools = ", ".join(sources.foreign_tools[:3]) or "tool"
    evidence = borrowed[0] if borrowed else ", ".join(sorted(foreign_words - trusted_words)[:4])
    return Effect(
        "provenance",
        f"its text comes from {tools} output, not from the user or the project's files; text "
        "an agent reads may be written to steer it",
        evidence,
    )


# --- The verdict --------------------------------------------------------------------------------

MAX_CONTEXT: Final = 60
"""Other lessons each new one is read beside: the answer's other texts and the section's
newest entries, up to this many (each pair is one more reading: the cost stays bounded)."""


def hold_reason(
    text: str,
    *,
    sources: Sources | None = None,
    context: Sequence[str] = (),
) -> str | None:
    """Why the lesson `text` must wait for a person, in a reviewer's words; None when it may
    be applied.

    Args:
        text: The lesson as it would be stored (cleaned, one line).
        sources: The run's text by who said it (`sources_of`); None: judged on effects alone.
        context: Other lessons it would stand beside (the answer's other texts, the section's
            entries): an effect that shows only when `text` is read with one of them (a
            download in one lesson, the pipe into a shell in another) holds it too.
    """
    known = sources.hosts if sources is not None else frozenset()
    found = effects(text, known_hosts=known)
    if not found:
        for other in context[:MAX_CONTEXT]:
            # One sentence: the checks read a sentence at a time.
            together = f"{other.rstrip(' .!?')} and {text}"
            alone = {effect.kind for effect in effects(other, known_hosts=known)}
            joined = [
                effect
                for effect in effects(together, known_hosts=known)
                if effect.kind not in alone
            ]
            if joined:
                first = joined[0]
                return (
                    f"held for review: {first.reason}, read together with another lesson "
                    f"({_short(other)}) [{first.kind}: {first.evidence}]"
                )
    if not found and sources is not None:
        origin = _provenance(text, sources)
        if origin is not None:
            found = [origin]
    if not found:
        return None
    words = "; ".join(f"{effect.reason} [{effect.kind}: {effect.evidence}]" for effect in found)
    return f"held for review: {words}"


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:59] + "…"
