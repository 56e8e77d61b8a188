"""Scenario: secret redaction, ours against `detect-secrets`' credential plugins.

1. One write-back insight (a line of prose) and one 10 KB memory file, redacted by
   `layered_memory.safety.redaction.redact` and scanned by `detect-secrets`' plugins (every
   plugin but high-entropy and public-IP, line by line, as its own scanner runs them): the cost a
   dependency on it would add to every write.
2. The secret corpus of the tests (`tests/writeback/redaction/secrets_corpus.json`): how many
   secrets each finds, and how many survive `redact`.

`detect-secrets` only detects (it never rewrites text); its time is the floor of what using
it would cost, before mapping its findings back into the text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, fmt_ns, interleaved, paired_ratio

ROUNDS = {"full": 300, "quick": 60, "tiny": 3}
CORPUS = (
    Path(__file__).resolve().parents[2]
    / "tests"
    / "writeback"
    / "redaction"
    / "secrets_corpus.json"
)
INSIGHT = (
    "2025-01-01: [acme] The client prefers weekly PDF summaries sent on Mondays to "
    "finance@acme.example; keep the tone formal and cite the Q3 numbers."
)
NOT_CREDENTIALS = {"Base64 High Entropy String", "Hex High Entropy String", "Public IP (ipv4)"}


def _memory_file() -> str:
    lines = [
        f"- 2025-01-{day % 28 + 1:02d}: [client-{day}] prefers report format v{day % 4}.2, see "
        f"https://docs.example.com/clients/{day}#notes; token budget 4000."
        for day in range(120)
    ]
    return "# Memory\n\n## Recent Insights\n" + "\n".join(lines) + "\n"


def _corpus() -> tuple[list[tuple[str, str]], list[str]]:
    raw = json.loads(CORPUS.read_text(encoding="utf-8"))
    join, placeholder = raw["join"], raw["placeholder"]
    secrets = [
        (
            entry["text"].replace(join, "").replace(placeholder, entry["secret"].replace(join, "")),
            entry["secret"].replace(join, ""),
        )
        for entry in raw["secrets"]
        if "transform" not in entry
    ]
    return secrets, raw["lookalikes"]


def _detect_secrets_scanner() -> Any:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import default_settings

    with default_settings():
        plugins = [
            cls()
            for kind, cls in get_mapping_from_secret_type_to_class().items()
            if kind not in NOT_CREDENTIALS
        ]

    def scan(text: str) -> list[str]:
        found = []
        for number, line in enumerate(text.splitlines(), start=1):
            for plugin in plugins:
                found.extend(
                    secret.secret_value or ""
                    for secret in plugin.analyze_line(
                        filename="config.yaml", line=line, line_number=number
                    )
                )
        return found

    return scan


def run(plan: Plan, workdir: Path) -> ScenarioResult:  # noqa: ARG001 (the scenario signature)
    """Time both on an insight and a memory file, then count corpus secrets found."""
    from layered_memory.safety.redaction import redact

    try:
        scan = _detect_secrets_scanner()
    except ImportError as exc:
        row = Row("12. Redaction", None, None, "runs", "unavailable", ours_text="unavailable")
        return ScenarioResult("redaction", "12. Redaction", [row], [f"detect-secrets: {exc}"])
    rounds = ROUNDS.get(plan.name, ROUNDS["quick"])
    rows: list[Row] = []
    notes: list[str] = []
    for label, text in (("one insight", INSIGHT), ("a 10 KB memory file", _memory_file())):
        samples = interleaved(
            [
                Case("ours", lambda _, text=text: redact(text)),  # type: ignore[misc]
                Case("detect_secrets", lambda _, text=text: scan(text)),  # type: ignore[misc]
            ],
            rounds=rounds,
        )
        ours, theirs = samples["ours"], samples["detect_secrets"]
        ratio = paired_ratio(ours, theirs)
        rows.append(
            Row(
                f"12. Redaction: redact {label} (vs detect-secrets' plugins)",
                ours.median,
                theirs.median,
                "info",
                "info",
                ratio=ratio,
            )
        )
        notes.append(
            f"{label}: redact {fmt_ns(ours.median)}, detect-secrets' credential plugins "
            f"{fmt_ns(theirs.median)} (paired ratio {ratio:.2f})."
        )

    secrets, lookalikes = _corpus()
    survived = sum(1 for text, secret in secrets if secret in redact(text)[0])
    found_by_them = sum(1 for text, secret in secrets if any(v in secret for v in scan(text) if v))
    damaged = sum(1 for text in lookalikes if redact(text)[0] != text)
    flagged_by_them = sum(1 for text in lookalikes if scan(text))
    rows.append(
        Row(
            f"12. Redaction: corpus secrets surviving redact ({len(secrets)} plain)",
            None,
            None,
            "0 survive, 0 look-alikes changed",
            verdict(survived == 0 and damaged == 0),
            ours_text=f"{survived} survive, {damaged} changed",
            base_text=f"finds {found_by_them}, flags {flagged_by_them} look-alikes",
            facts={
                "survived": survived,
                "damaged": damaged,
                "found_by_detect_secrets": found_by_them,
            },
        )
    )
    notes.append(
        f"Corpus: {len(secrets)} secrets (plain form), {len(lookalikes)} look-alikes. redact: "
        f"{survived} survive, {damaged} look-alikes changed. detect-secrets' credential "
        f"plugins find {found_by_them} of the secrets and flag {flagged_by_them} look-alikes."
    )
    return ScenarioResult("redaction", "12. Redaction", rows, notes)
