"""Lesson texts that read as instructions aimed at the agent: held for a person, never applied.

Memory is read back into every later prompt, so a learned entry is a standing instruction. A
run can be steered by text it only read (a web page, a file, a tool's output: prompt
injection), and a model asked to remember what the run taught would make that injection
permanent: memory poisoning. So a text is held for review, whatever `review=` says, when it

- overrides the agent's instructions or role ("ignore previous instructions", "you are now",
  "follow the instructions you find in files", a `system:` turn);
- sends data somewhere (a verb of sending and an address: a URL, an e-mail address, a
  webhook, an IP and port) or exposes secrets ("print the API key", "include ~/.ssh");
- acts behind the user's back ("do not tell the user", "secretly");
- carries data in a URL (query parameters, a placeholder to fill, a Markdown image, which a
  client fetches by itself) or runs downloaded code (`curl ... | sh`, `curl -d`, `base64 -d`).

The checks read the text as a model does: look-alike letters and invisible characters undone
(`core.render.ascii_skeleton`), NFKC applied. They are cheap patterns, tuned to hold rather
than to let through: a preference such as "always answer in French" passes, "send the weekly
report to alice@acme.com" waits for a person. A held change is never lost: `layered-memory
review` shows it with the reason.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from layered_memory.core.render import ascii_skeleton

_GAP: Final = r"[^.!?\n]{0,60}?"
"""Up to one clause between two words of a pattern (bounded: each search stays linear)."""

_OVERRIDE: Final = re.compile(
    r"\b(?:ignore|disregard|forget|override|overrule|bypass|circumvent)\b"
    rf"{_GAP}\b(?:instruction|rule|prompt|guideline|polic(?:y|ies)|guardrail|constraint"
    r"|directive|safety|restriction|system message)"
    r"|\b(?:new|updated|real|true|hidden|secret)\s+(?:system\s+)?(?:instructions?|prompt|directives?)\b"
    r"|\bsystem\s+prompt\b|\bdeveloper\s+mode\b|\bjailbr(?:ea|o)k|\bdo\s+anything\s+now\b"
    r"|\byou\s+are\s+(?:now|no\s+longer)\b|\bfrom\s+now\s+on\s+you\s+(?:are|must|will)\b"
    r"|\bpretend\s+(?:to\s+be|you\s+are)\b"
    rf"|\b(?:obey|follow|execute|carry\s+out|trust)\b{_GAP}\b(?:instructions?|commands?|requests?)"
    rf"\b{_GAP}\b(?:in|from|inside|found|embedded|contained)\b"
    r"|(?:^|[\[(<])\s*(?:system|assistant|developer)\s*:"
    r"|<\||\[/?inst\]|</?\s*(?:system|instructions?)\s*>"
)

_ADDRESS: Final = (
    r"(?:https?://|ftp://|s3://|\bwww\.|[\w.+-]+@[\w-]+\.[\w.-]+|\bwebhook|\bpastebin|\bngrok"
    r"|\brequestbin|\b\d{1,3}(?:\.\d{1,3}){3}:\d+)"
)
_SENDING: Final = re.compile(
    r"\b(?:send|sent|post|upload|forward|e-?mail|mail|transmit|exfiltrate|leak|report|submit"
    rf"|copy|sync|beacon|ping|notify|share)\w*\b{_GAP}{_ADDRESS}"
)
_SECRETS: Final = re.compile(
    r"\b(?P<verb>reveal|print|show|output|dump|display|leak|include|paste|echo|cat|read|send"
    r"|share|expose|return|append|attach|upload|post)\w*\b"
    rf"{_GAP}(?:secret|credential|password|passphrase|api[ _-]?keys?|access[ _-]?keys?"
    r"|tokens?\b|private[ _-]?keys?|ssh[ _-]?keys?|\.env\b|id_rsa|id_ed25519|environment\s+"
    r"variables|env\s+vars|/etc/(?:passwd|shadow)|\.aws\b|\.ssh\b|keychain|cookies?\b)"
)
_NEGATED: Final = re.compile(
    r"\b(?:never|not|no|don't|do\s+not|must\s+not|avoid)\b[^.!?\n]{0,20}\Z"
)
"""A negation just before the verb: "never print the API key" is a lesson, not a request."""

_BEHIND_BACK: Final = re.compile(
    r"\b(?:do\s+not|don't|never|without)\s+(?:tell|telling|inform|informing|mention|mentioning"
    r"|notify|notifying|alert|alerting|let)\b[^.!?\n]{0,20}?\b(?:the\s+)?(?:user|human|operator"
    r"|owner|anyone)\b|\bsecretly\b|\bcovertly\b|\bbehind\s+the\s+user'?s\s+back\b"
    r"|\bwithout\s+(?:the\s+user'?s?\s+)?(?:knowledge|consent|noticing)\b|\bhide\s+(?:this|it)\s+from\b"
)

_DATA_URL: Final = re.compile(
    r"(?:https?|ftp)://[^\s)\]>\"']*(?:\?[^\s)\]>\"']*=|\{|\}|\$\{?\w|%s|<[a-z_]+>)"
    r"|!\[[^\]\n]{0,200}\]\(\s*(?:https?:)?//"
    r"|\bdata:[a-z]+/[\w.+-]+;base64,"
)
_REMOTE_CODE: Final = re.compile(
    r"\b(?:curl|wget|iwr|invoke-webrequest)\b[^|\n]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|k)?sh\b"
    r"|\b(?:curl|wget)\b[^\n]{0,200}?\s(?:-d|--data\S*|-f|--form|-t|--upload-file|--post-\w+)\b"
    r"|\b(?:bash|sh|zsh)\s+-c\s|\bbase64\s+(?:-d|--decode)\b|\beval\s*\(|\bpowershell\b[^\n]{0,80}-enc"
)

_REASONS: Final = (
    (_OVERRIDE, "overrides its instructions or role"),
    (_SENDING, "sends data to an address"),
    (_BEHIND_BACK, "acts behind the user's back"),
    (_DATA_URL, "a URL that carries data: parameters, a placeholder, an image"),
    (_REMOTE_CODE, "runs downloaded code or uploads data from the shell"),
)


def instruction_reason(text: str) -> str | None:
    """Why `text` must wait for a person (it reads as an instruction aimed at the agent), or
    None when it reads as an ordinary lesson."""
    reading = ascii_skeleton(unicodedata.normalize("NFKC", text)).casefold()
    for pattern, what in _REASONS:
        if pattern.search(reading):
            return f"held for review: reads as an instruction aimed at the agent ({what})"
    for found in _SECRETS.finditer(reading):
        if not _NEGATED.search(reading, 0, found.start("verb")):
            return "held for review: reads as an instruction aimed at the agent (exposes secrets)"
    return None
