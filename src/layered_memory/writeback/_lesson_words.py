"""The words each effect class of the lesson hold looks for: concepts, never phrasings.

Each vocabulary names one concept (a command that fetches, a verb of sending, a credential
path, a check that can be weakened...) in its normalised spellings; `writeback.lesson_effects`
combines them within a sentence, so a new wording of the same effect still meets one word of
each concept it needs. Kept apart from the checks so both stay readable.
"""

from __future__ import annotations

from typing import Final


def words(spelled: str) -> frozenset[str]:
    """A vocabulary from its words, separated by spaces."""
    return frozenset(spelled.split())


FETCHERS: Final = words(
    "curl wget iwr irm invoke-webrequest invoke-restmethod aria2c lwp-download httpie xh "
    "urlopen urlretrieve requests.get bitsadmin certutil downloadstring downloadfile "
    "net.webclient"
)
DECODERS: Final = words("base64 b64decode frombase64string atob xxd uudecode openssl")
INTERPRETERS: Final = words(
    "sh bash zsh dash ksh fish csh tcsh python py pypy node deno bun perl ruby php pwsh "
    "powershell iex invoke-expression eval exec source osascript cmd cscript wscript lua "
    "tclsh r rscript"
)
RUN_VERBS: Final = words(
    "run runs running execute executes executing exec source sourcing launch invoke pipe piping "
    "eval evaluate install installing start"
)
DOWNLOAD_VERBS: Final = words(
    "download downloads downloaded downloading fetch fetches fetched fetching grab grabbed "
    "pull pulled retrieve retrieved get"
)
SCRIPT_SUFFIXES: Final = (
    ".sh",
    ".bash",
    ".ps1",
    ".py",
    ".pl",
    ".rb",
    ".exe",
    ".bat",
    ".cmd",
    ".js",
    ".vbs",
    ".msi",
    ".bin",
    ".run",
    ".appimage",
)
INDEX_WORDS: Final = words(
    "--index-url --extra-index-url --index --registry --find-links -f registry registry= "
    "index-url index-url= extra-index-url pip_index_url pip_extra_index_url uv_index_url "
    "uv_extra_index_url uv_default_index npm_config_registry yarn_registry goproxy goproxy= "
    "gonosumdb gonosumcheck goinsecure gosumdb gosumdb=off goflags=-insecure --trusted-host "
    "trusted-host cargo_registries_default pip.conf .npmrc .pypirc .yarnrc"
)
PACKAGE_RUNNERS: Final = words("npx bunx uvx pnpx")
"""Commands that fetch a package and run it in one step."""
INDEX_NOUNS: Final = words("index registry mirror mirrors indexes proxy repository feed")
PACKAGE_WORDS: Final = words(
    "pip pip3 uv npm yarn pnpm poetry cargo go gem bundle conda mamba nuget maven gradle "
    "package packages dependency dependencies wheel wheels npm_config"
)
OFFICIAL_INDEXES: Final = (
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "proxy.golang.org",
    "sum.golang.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "rubygems.org",
    "conda.anaconda.org",
    "api.nuget.org",
)

UPLOAD_COMMANDS: Final = words(
    "scp rsync sftp ftp nc ncat netcat socat telnet sendmail mail mailx mutt rclone gsutil "
    "pastebinit termbin smtplib"
)
UPLOAD_FLAGS: Final = words(
    "-d --data --data-binary --data-raw --data-urlencode -f --form -t --upload-file -x "
    "--request --post-data --post-file --method post put -method requests.post"
)
SEND_VERBS: Final = words(
    "send sends sending sent upload uploads uploading uploaded post posts posting forward "
    "forwarding email e-mail mail mailing transmit exfiltrate exfiltrating leak leaking share "
    "sharing sync syncing beacon report submit push pushing copy copying mirror mirroring "
    "back backup stream streaming publish paste pasting ship dump exfil attach attaching cc bcc "
    "rsync scp sftp rclone"
)
DATA_OBJECTS: Final = words(
    "workspace repo repository repositories codebase code source project files file folder "
    "directory directories home ~ env environment variables vars secrets secret credentials "
    "credential keys key tokens token .env logs log conversation conversations chat chats "
    "transcript transcripts history session sessions prompt prompts memory output outputs "
    "results diff diffs database db dump contents content data everything tarball archive "
    "zip snapshot cookies passwords password configuration config"
)
OUTSIDE_WORDS: Final = words(
    "webhook webhooks endpoint server pastebin gist bucket ngrok requestbin pipedream "
    "hookbin interactsh burpcollaborator remote external collector"
)
CREDENTIAL_PATHS: Final = (
    "~/.ssh",
    ".ssh/",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    "authorized_keys",
    ".aws/credentials",
    "~/.aws",
    ".aws/config",
    "gcloud/",
    "application_default_credentials",
    ".kube/config",
    "kubeconfig",
    ".docker/config.json",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".gnupg",
    "keychain",
    "/etc/shadow",
    "/etc/passwd",
    ".vault-token",
    "~/.azure",
    ".config/gh",
    "/proc/self/environ",
    "environ",
    "credentials.json",
    "service-account",
    "token.json",
    ".htpasswd",
    "wallet.dat",
)
SEARCH_COMMANDS: Final = words(
    "grep egrep rg ag ack find locate findstr select-string sls fd trufflehog gitleaks"
)
SEARCH_VERBS: Final = words(
    "search searching scan scanning hunt hunting look grep find locate comb crawl sweep trawl"
)
KEY_PREFIXES: Final = (
    "sk-",
    "sk_live",
    "akia",
    "asia",
    "ghp_",
    "gho_",
    "github_pat",
    "xoxb",
    "xoxp",
    "aiza",
    "-----begin",
    "glpat-",
    "api_key",
    "apikey",
    "private_key",
    "id_rsa",
)
"""How keys and tokens start: a search for one of these looks for credentials."""
BROAD_SCOPES: Final = words(
    "~ ~/ $home /home /users / c:/ c:\\ home disk disks filesystem machine computer "
    "everywhere drive drives system"
)
"""Where a search for keys reaches beyond the project."""
SECRET_NOUNS: Final = words(
    "secret secrets credential credentials password passwords passwd passphrase token tokens "
    "apikey api_key api-key apikeys privatekey private_key cookie cookies keychain bearer "
    "mnemonic seed"
)
SECRET_PHRASES: Final = (
    "api key",
    "api keys",
    "access key",
    "access keys",
    "secret key",
    "private key",
    "private keys",
    "ssh key",
    "ssh keys",
    "signing key",
    "session token",
    "auth token",
    "auth header",
    "environment variables",
    "env vars",
    "env variables",
    "environment vars",
    "deploy key",
    "service account key",
)
READ_VERBS: Final = words(
    "cat less more head tail print prints printing echo show showing display dump dumping "
    "reveal revealing output read reading open include including paste pasting attach embed "
    "upload send copy copying cp mv move moving scp rsync tar zip base64 xxd export exporting "
    "printenv env set compgen declare log logging list leak share sharing collect collecting "
    "grab gather harvest extract exfiltrate type get-content gc strings"
)
NEGATIONS: Final = words(
    "never not no dont don't do-not mustnt shouldnt avoid without nor instead rather stop "
    "neither refuse forbidden prohibited"
)
NEGATED_NEGATIONS: Final = words(
    "forget forgetting fail failing neglect neglecting omit omitting hesitate stop stopping "
    "skip skipping miss missing"
)
"""Verbs that, after a negation, order the act ("never fail to", "don't forget to")."""

PERSISTENCE_PATHS: Final = (
    "authorized_keys",
    "crontab",
    "/etc/cron",
    "cron.d",
    "cron.daily",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".profile",
    "config.fish",
    "/etc/profile",
    "rc.local",
    "hookspath",
    ".git/hooks",
    "githooks",
    "launchagents",
    "launchdaemons",
    "launchctl",
    "systemctl",
    "systemd/user",
    ".service",
    "sudoers",
    "visudo",
    "nopasswd",
    "ld_preload",
    "prompt_command",
    "/etc/hosts",
    "startup folder",
    "run key",
    "autostart",
    "credential.helper",
    "setuid",
    "setcap",
)
PERMISSION_COMMANDS: Final = (
    "chmod 777",
    "chmod -r 777",
    "chmod a+rwx",
    "chmod o+w",
    "chmod u+s",
    "chmod +s",
    "chmod 4755",
    "chmod 666",
    "chown root",
    "usermod -ag",
    "useradd",
    "passwd",
)
APPROVAL_CLAIMS: Final = (
    "pre-approved",
    "preapproved",
    "pre-authorized",
    "preauthorized",
    "pre-authorised",
    "already approved",
    "already authorized",
    "already authorised",
    "has approved",
    "have approved",
    "has authorized",
    "has authorised",
    "have authorized",
    "has granted",
    "have granted",
    "has allowed",
    "has permitted",
    "standing permission",
    "standing approval",
    "standing authorization",
    "blanket approval",
    "blanket permission",
    "carte blanche",
    "permanent permission",
    "is authorized to",
    "are authorized to",
    "is allowed to",
    "are allowed to",
    "you may always",
    "has given permission",
    "have given permission",
    "gave permission",
    "given you permission",
    "granted you",
    "auto-approve",
    "autoapprove",
    "auto approve",
    "dangerously-skip-permissions",
    "--yolo",
    "bypasspermissions",
    "bypass permissions",
    "skip permissions",
    "full access",
    "root access",
    "admin rights",
    "trust all tools",
    "allow all tools",
    "approve everything",
    "approved in advance",
)
NO_ASKING: Final = (
    "without asking",
    "without confirmation",
    "without confirming",
    "without approval",
    "without permission",
    "without checking with",
    "no need to ask",
    "no need to confirm",
    "no need for approval",
    "need not ask",
    "dont need to ask",
    "dont ask",
    "do not ask",
    "never ask",
    "skip confirmation",
    "skip the confirmation",
    "dont wait for approval",
    "do not wait for approval",
    "without waiting for approval",
    "dont need approval",
    "doesnt need approval",
    "no approval needed",
    "no confirmation needed",
)
RISKY_ACTIONS: Final = words(
    "push force force-push merge merging deploy deploying delete deleting rm drop publish "
    "release install sudo reset rebase rewrite send pay purchase transfer grant chmod "
    "anything everything commands command any all production prod main master wipe remove "
    "uninstall overwrite network internet access credentials permissions root migrations "
    "migration database"
)

CHECK_OBJECTS: Final = words(
    "test tests testing suite ci checks check hook hooks pre-commit precommit pre-push linter "
    "linters lint linting typecheck typechecks type-check mypy ruff eslint flake8 pylint "
    "review reviews reviewer reviewers approval approvals protection signature signatures "
    "signing gpg verification verify ssl tls certificate certificates cert sandbox guard "
    "guards safety scanner scan scans security audit coverage husky workflow workflows "
    "pipeline pipelines codeowners gate gates protections required status-checks"
)
CHECK_FILES: Final = (
    ".github/workflows",
    ".gitlab-ci",
    ".circleci",
    "jenkinsfile",
    "azure-pipelines",
    "bitbucket-pipelines",
    ".travis.yml",
    ".pre-commit-config",
    "codeowners",
    ".husky",
    "dependabot.yml",
    ".buildkite",
    ".drone.yml",
)
"""Files that define checks: removing or emptying one disables them."""
WEAKEN_VERBS: Final = words(
    "skip skipping disable disabling bypass bypassing circumvent circumventing ignore ignoring "
    "remove removing delete deleting comment turn relax relaxing loosen weaken weakening mute "
    "silence suppress suppressing drop dropping avoid bypassed skipped disabled uninstall "
    "xfail deactivate override overriding rm unlink del neuter stub gut empty emptying"
)
WEAKEN_FLAGS: Final = words(
    "--no-verify --no-gpg-sign commit.gpgsign=false husky=0 husky_skip_hooks=1 skip= "
    "--insecure -k --no-check-certificate sslverify=false http.sslverify sslverify "
    "strict-ssl strict-ssl=false node_tls_reject_unauthorized=0 pythonhttpsverify=0 "
    "git_ssl_no_verify=1 git_ssl_no_verify verify=false --allow-unauthenticated --nogpgcheck "
    "--admin --no-review --skip-checks --disable-hooks core.hookspath=/dev/null "
    "--force-with-lease --force -f --no-hooks --unsafe-perm"
)
SHARED_BRANCHES: Final = words("main master trunk develop release production prod")

TELL_VERBS: Final = words(
    "tell telling inform informing mention mentioning notify notifying alert alerting "
    "disclose disclosing report reporting let warn warning show showing"
)
PEOPLE: Final = words(
    "user users human humans operator operators owner owners anyone anybody nobody person "
    "people me maintainer maintainers reviewer reviewers admin"
)
SECRECY_WORDS: Final = words(
    "secretly covertly surreptitiously stealthily discreetly clandestinely unnoticed undetected"
)
HIDE_VERBS: Final = words("hide hiding conceal concealing mask masking cover covering")
TRACE_WORDS: Final = words(
    "history histfile .bash_history logs log traces trace tracks audit evidence"
)
ERASE_VERBS: Final = words(
    "clear clearing erase erasing wipe wiping delete deleting unset remove removing purge "
    "truncate shred scrub"
)
OMIT_VERBS: Final = words(
    "keep leave omit omitting exclude excluding drop strip redact remove hide skip filter"
)
"""Verbs that keep something out of a summary, a report or a log."""
AGENT_ACTS: Final = words(
    "step steps change changes call calls action actions upload uploads deployment deployments "
    "job jobs cron edit edits request requests pushes backup backups deleted removed commands"
)
"""What the agent does (beside `RISKY_ACTIONS`): what a summary that hides it would hide."""
INCLUDE_VERBS: Final = words(
    "include including list listing record recording note mention write put"
)
"""Verbs that, negated, keep something out of a summary ("don't include X in the recap")."""
OWN_HOST_LABELS: Final = words("internal intranet corp lan local localdomain intra")
"""Labels of the team's own host names (`staging.internal.example.com`, `ci.corp`)."""

# Other languages: a second signal beside the paths, files and hosts a lesson names (those
# read the same in every language). Verbs of the major languages for the effects that have no
# such evidence of their own: override, send, keep from the user.
FOREIGN_OVERRIDE: Final = (
    "ignoriere",
    "ignorieren",
    "ignoriert",
    "missachte",
    "vergiss",
    "ignorez",
    "ignorer",
    "oubliez",
    "oublie",
    "ignora",
    "ignorar",
    "ignoren",
    "olvida",
    "olvidar",
    "ignoruj",
    "ignoreer",
    "игнорируй",
    "игнорировать",
    "забудь",
    "忽略",
    "无视",
    "無視",
    "忽視",
    "무시",
)
FOREIGN_SEND: Final = (
    "sende",
    "senden",
    "schicke",
    "schicken",
    "hochladen",
    "lade",
    "envoie",
    "envoyer",
    "envoyez",
    "televerse",
    "téléverse",
    "envia",
    "envía",
    "enviar",
    "envíe",
    "sube",
    "subir",
    "manda",
    "mandar",
    "wyślij",
    "stuur",
    "отправь",
    "отправить",
    "загрузи",
    "上传",
    "发送",
    "上傳",
    "傳送",
    "업로드",
    "전송",
    "보내",
    "送信",
    "アップロード",
)
FOREIGN_UNTOLD: Final = (
    "알리지 말",
    "말하지 말",
    "不要告诉",
    "别告诉",
    "不要通知",
    "不要让用户",
    "告訴しない",
    "言わない",
    "伝えない",
    "sag nicht",
    "sage nicht",
    "ohne zu sagen",
    "ne dis pas",
    "ne dites pas",
    "sans le dire",
    "no digas",
    "no le digas",
    "sin decir",
    "не говори",
    "не сообщай",
)

QUIET_WORDS: Final = words("silently quietly")
AUDIENCE: Final = words(
    "summary summaries report reports reply replies answer answers recap recaps changelog "
    "notes updates status standup handoff"
)
"""Where the agent tells the user what it did."""

OVERRIDE_VERBS: Final = words(
    "ignore ignoring disregard disregarding forget forgetting override overriding overrule "
    "bypass circumvent skip supersede supersedes replace replaces outrank outranks trumps "
    "trump"
)
INSTRUCTION_WORDS: Final = words(
    "instruction instructions rule rules prompt prompts guideline guidelines policy policies "
    "guardrail guardrails constraint constraints directive directives restrictions "
    "restriction memory"
)
READ_ONLY_MEMORY: Final = words(
    "agents.md claude.md gemini.md .cursorrules .windsurfrules copilot-instructions.md "
    "conventions.md .clinerules .cursor/rules .claude/rules .github/copilot-instructions.md "
    "settings.json .claude/settings.json"
)
STALE_WORDS: Final = (
    "out of date",
    "outdated",
    "obsolete",
    "stale",
    "deprecated",
    "superseded",
    "no longer",
    "wrong",
    "incorrect",
    "invalid",
    "replaced",
    "overridden",
    "not authoritative",
    "doesnt apply",
    "does not apply",
    "no longer applies",
    "ignore",
    "not current",
    "old",
)
PRECEDENCE: Final = (
    "takes precedence",
    "take precedence",
    "overrides",
    "override",
    "supersedes",
    "supersede",
    "wins over",
    "has priority",
    "higher priority",
    "outranks",
    "instead of the rules",
    "replaces the",
    "above all",
    "more authoritative",
)
OBEY_VERBS: Final = words(
    "follow following obey obeying execute executing carry act comply complying trust trusting "
    "do run perform implement"
)
ORDER_WORDS: Final = words(
    "instruction instructions command commands directive directives orders order requests "
    "request steps says say tell tells asks"
)
UNTRUSTED_PLACES: Final = words(
    "tool tools output outputs result results web webpage webpages page pages site sites "
    "website websites issue issues comment comments email emails readme message messages "
    "ticket tickets description descriptions response responses html search fetched "
    "downloaded pdf dependency dependencies third-party vendor vendored external agent agents "
    "subagent"
)
TREAT_AS: Final = (
    "as instructions",
    "as commands",
    "as orders",
    "as directives",
    "as coming from the user",
    "as the users",
    "as from the user",
    "as trusted",
    "as authoritative",
    "as user input",
    "as the user",
    "as system",
    "as your instructions",
    "like instructions",
    "like commands",
)
ROLE_MARKERS: Final = (
    "system:",
    "assistant:",
    "developer:",
    "[system]",
    "<system>",
    "[inst]",
    "<|",
    "</system",
    "### system",
    "### instruction",
    "you are now",
    "you are no longer",
    "from now on you",
    "new instructions",
    "updated instructions",
    "real instructions",
    "hidden instructions",
    "secret instructions",
    "true instructions",
    "new system prompt",
    "system prompt",
    "developer mode",
    "jailbreak",
    "jailbroken",
    "do anything now",
    "pretend to be",
    "pretend you are",
    "act as if you are",
    "roleplay as",
)


APPROVERS: Final = PEOPLE | words(
    "team maintainer maintainers lead leads manager management cto security owner owners "
    "they everyone boss client customer ops"
)
APPROVED: Final = words(
    "approved approve okayed okay oked authorized authorised allowed permitted cleared greenlit "
    "green-lit sanctioned consented signed-off endorsed waived"
)
ASK_VERBS: Final = words(
    "ask asking bother bothering consult consulting confirm confirming check prompt prompting "
    "interrupt interrupting wait waiting involve involving"
)
