"""Every hostile input class, run for real in a child process under a generous time limit.

`hostile_cases.py` runs each case (a deep agent, the rule engine, the CLI, the write-back on a
hostile file or path) and reports what it saw. Before the fixes these cases crashed the run
(`RecursionError`, `ValueError: embedded null byte`), took a minute (unclosed `<!--`,
backtracking globs) or blocked forever (a FIFO). Here a case that hangs fails its test by name
when the child is killed; no test measures time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CASES_SCRIPT = Path(__file__).with_name("hostile_cases.py")
TIME_LIMIT_S = 240
"""For all the cases together; they take a few seconds when nothing hangs."""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run every case once in one child process; a case that hangs is reported as such."""
    workdir = tmp_path_factory.mktemp("hostile")
    try:
        done = subprocess.run(
            [sys.executable, str(CASES_SCRIPT), str(workdir)],
            capture_output=True,
            text=True,
            timeout=TIME_LIMIT_S,
            check=False,
        )
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = f"killed after {TIME_LIMIT_S} s"
    found: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            found.setdefault(record["case"], {}).update(record)
    found["_stderr"] = {"text": stderr[-4000:]}
    return found


def outcome(outcomes: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    record = outcomes.get(name)
    if record is None:
        pytest.fail(f"case {name} never started; stderr: {outcomes['_stderr']['text']}")
    if "error" in record:
        pytest.fail(f"case {name} raised:\n{record['error']}")
    if "result" not in record:
        pytest.fail(f"case {name} started and never finished (it hangs)")
    return record["result"]  # type: ignore[no-any-return]


@pytest.mark.slow
def test_unclosed_html_comments_load_render_and_inspect(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "html_comments")
    assert result == {"prompts": 2, "shown": True, "inspect_status": 0}


def test_backtracking_globs_match_nothing_and_the_run_goes_on(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "glob_backtracking")
    assert result["never_matched"]
    assert result["python_rule"]
    assert result["direct_matches"] == [False] * 4


def test_deep_or_slow_frontmatter_is_skipped_with_one_warning(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "yaml_nesting")
    assert result["ok_rule_shown"]
    deep = [m for m in result["warnings"] if "nested deeper than 16 levels" in m]
    assert sorted(m.split(":")[0] for m in deep) == [
        "rule file /rules/block.md",
        "rule file /rules/flow.md",
        "rule file /rules/unclosed.md",
    ]
    assert any("/rules/globspaces.md" in m and "longer than 1024" in m for m in result["warnings"])
    assert result["strict"].startswith("RuleFileError: rule file '/rules/block.md' skipped")


def test_huge_files_lines_and_tags_stay_within_the_budget(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "huge_files")
    assert result["prompt_chars"] <= 48_000 + 200  # the block plus the deep agent's base prompt
    assert result["ok_rule_shown"]
    assert result["raw_layer_close"] == 2  # our two layers; the file's own `</layer>` defused
    assert result["truncated"]
    assert result["warnings"] == [
        "rule file /rules/huge.md: error: file longer than 1000000 characters"
    ]


def test_deeply_nested_markdown_loads_and_takes_the_write_back(outcomes: dict[str, Any]) -> None:
    assert outcome(outcomes, "nested_markdown") == {"prompts": 1, "written": True}


def test_a_recall_layer_over_a_hostile_file_stays_linear_and_inert(
    outcomes: dict[str, Any],
) -> None:
    assert outcome(outcomes, "recall_entries") == {
        "body_chars_ok": True,
        "raw_layer_close": 1,  # the layer's own; the file's closing tags defused
        "marker": True,
    }


def test_pathological_paths_lists_refuse_only_their_own_file(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "paths_lists")
    # One bad glob drops only itself (the rule stays scoped, so it never applies); past the
    # bounds on a rule's globs, the whole file is refused.
    assert result["rules"] == ["bomb", "deep", "ok"]
    assert result["matched"] == ["ok"]
    invalid = result["invalid"]
    assert invalid == {
        "many.md": "globs lists 2500 globs; at most 1024",
        "long.md": "frontmatter longer than 16384 characters",
        "sum.md": "paths expands to more than 1024 patterns (braces count)",
    }
    errors = result["errors"]
    assert errors["bomb.md"].endswith("brace expansion gives more than 256 patterns")
    assert errors["deep.md"].endswith("braces nested deeper than 8 levels")
    assert all(len(reason) < 200 for reason in errors.values())  # the glob is shortened
    assert result["warnings"] == 5


def test_impossible_paths_are_refused_or_reported_never_raised(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "bad_paths")
    refused = result["refused"]
    assert refused["layer_nul"].startswith("Layer 'p' path contains a NUL byte")
    assert refused["sources_nul"].startswith("sources[0] contains a NUL byte")
    assert refused["rules_nul"].startswith("rules[0] contains a NUL byte")
    assert refused["assembler_rules_nul"].startswith("rules[0] contains a NUL byte")
    assert "lone surrogate" in refused["layer_surrogate"]
    assert "longer than 4096 characters" in refused["layer_long"]
    assert result["tool_errors"] == [
        "Error: write_file refused: the path contains a NUL byte. Nothing was done.",
        "Error: read_file refused: the path contains a character the file system cannot "
        "encode (a lone surrogate). Nothing was done.",
        "Error: read_file refused: the path longer than 4096 characters. Nothing was done.",
        "Error: edit_file refused: the path contains a NUL byte. Nothing was done.",
    ]
    assert result["memory_intact"]


def test_unicode_normalization_tricks(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "unicode_tricks")
    assert result == {"nfd_matched": True, "raw_layer_close": 1}


def test_hidden_characters_and_chat_tokens_in_bulk(outcomes: dict[str, Any]) -> None:
    assert outcome(outcomes, "hidden_text_and_chat_tokens") == {
        "visible": True,
        "hidden_in_prompt": 0,
        "raw_tokens": 0,
        "joiners_kept": True,
        "direct_hidden": 0,
        "direct_raw_tokens": 0,
    }


def test_symlink_loops_become_skips_and_tool_errors(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "symlink_loops")
    # Virtual mode: the load's download answered for the loop ("invalid path"), so the layer
    # file is unreadable and a whole-file write over it is refused before the backend is asked;
    # host paths: the path is refused before any download, and the backend's write fails.
    first_error = {
        "virtual=True": "Error: write_file refused: /loop.md is a memory file that exists but "
        "could not be read",
        "virtual=False": "Error writing file",
    }
    for mode, expected in first_error.items():
        assert result[mode]["ok_rule_shown"]
        errors = result[mode]["tool_errors"]
        assert len(errors) == 2
        assert errors[0].startswith(expected)
        assert errors[1].startswith("Error editing file")


def test_fifos_sockets_and_devices_are_never_opened(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "special_files")
    assert result["fs"]["ok_rule_shown"]
    assert result["fs"]["warnings"] == [
        "memory source /AGENTS.md skipped: not a regular file (a FIFO): never opened, "
        "reading it could block the run",
        "memory source /SOCKET.md skipped: not a regular file (a socket): never opened, "
        "reading it could block the run",
        "memory source /MEMORY.md skipped: not a regular file (a FIFO): never opened, "
        "reading it could block the run",
    ]
    assert result["fs"]["tool_errors"][0].startswith("Error: write_file refused: /MEMORY.md")
    routed = result["routed_warnings"]
    assert any(m.startswith("memory source /mem/AGENTS.md skipped") for m in routed)
    assert any(m.startswith("memory source /mem/rules/fifo.md skipped") for m in routed)
    assert any("ZERO.md skipped: not a regular file (a character device)" in m for m in routed)
    assert result["strict"].startswith("MemorySourceError: memory source '/AGENTS.md'")
    assert result["lint_status"] == 0
    assert result["inspect_status"] == 0


def test_a_shell_swapping_memory_for_a_fifo_cannot_hang_the_guard(
    outcomes: dict[str, Any],
) -> None:
    result = outcome(outcomes, "shell_fifo")
    assert result["agents"] == "read-only"
    assert result["rule"] == "Fine rule.\n"
    assert "put back as it was: /AGENTS.md, /rules/ok.md" in result["tool_output"][0]


def test_parsers_called_directly_never_raise(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "parser_direct")
    assert result["deep_flow"] == ["frontmatter nested deeper than 16 levels"]
    assert result["deep_map"] == ["frontmatter nested deeper than 16 levels"]
    assert result["alias_bomb"] == ["alwaysApply must be true or false (got a list)"]
    assert result["huge"] == ["file longer than 1000000 characters"]
    assert not any(result[f"{name}_rule"] for name in ("deep_flow", "deep_map", "alias_bomb"))


def test_tool_dialects_read_hostile_frontmatter_and_go_on(outcomes: dict[str, Any]) -> None:
    found = outcome(outcomes, "tool_dialect_frontmatter")
    assert found["/.cursor/rules/colons.mdc"] == {"mode": "paths", "errors": 0}
    assert found["/.cursor/rules/block.mdc"]["mode"] == "requested"
    assert found["/.cursor/rules/deep.mdc"] == {"mode": None, "errors": 1}  # too deep: refused
    assert found["/.cursor/rules/unclosed.mdc"] == {"mode": "manual", "errors": 0}
    assert found["/.cursor/rules/dashes.mdc"]["mode"] is not None
    assert found["/.github/instructions/c.instructions.md"] == {"mode": "requested", "errors": 0}
    assert found["/.windsurf/rules/w.md"]["mode"] is None  # too deep: refused, named
    assert found["/.kiro/steering/k.md"]["errors"] >= 1
    assert found["/.clinerules/c.md"] == {"mode": "always", "errors": 0}  # Cline fails open


def test_a_hostile_consolidation_finishes_and_stores_nothing_bad(outcomes: dict[str, Any]) -> None:
    found = outcome(outcomes, "hostile_consolidation")
    assert found["applied"] == 1  # the secret, redacted and cut; everything else refused
    assert found["pending"] == 0  # the queue is unreadable (nested 200,000 deep) ...
    assert found["queue_problem"] is True  # ... so the held instruction is rejected, named
    assert found["rejected"] == 1 + 10_000  # the instruction, and every unknown or extra id
    assert found["prompt_chars"] < 10_000  # tool output and hostile entries cut
    assert found["marks_line_parsed"] is True
    assert found["stored_instruction"] is False
    assert found["key_stored"] is False


def test_the_lesson_hold_reads_hostile_texts_in_linear_time(outcomes: dict[str, Any]) -> None:
    found = outcome(outcomes, "hostile_lessons")
    assert found["held"]["urls"] is True  # a data placeholder after 40,000 URL starts
    assert found["held"]["pipes"] is False  # `| sh` with nothing fetched from anywhere
    assert found["held"]["spaced"] is False  # "a a a ...": no word joined into a command
    assert found["ordinary_applied"] is True
    assert found["sources_kept"] is True  # megabytes of run: the newest 200,000 chars


def test_a_hostile_graph_is_defused_and_named_back_in_linear_time(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "graph_mcp_results")
    assert result == {"defused": True, "deleted": True}


@pytest.mark.slow
def test_hostile_cites_are_checked_in_bounded_time(outcomes: dict[str, Any]) -> None:
    result = outcome(outcomes, "stale_cites")
    assert result["block_chars"] <= 48_000
    assert result["stale_shown"]  # the first entry's range runs past the file: marked


def test_a_hostile_session_folder_is_listed_by_heads_and_never_hangs(
    outcomes: dict[str, Any],
) -> None:
    result = outcome(outcomes, "session_folder")
    # The 3,003 planted and stray files cost one warning; the sessions are searched.
    assert result == {"forgotten": True, "kept": True, "warnings": 1}
