"""`layered-memory tiers`: the tiers of one user in a PostgreSQL store, and forgetting."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from langgraph.store.postgres import PostgresStore

from layered_memory.cli import main
from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import TieredMemory

pytestmark = pytest.mark.postgres


@pytest.fixture
def filled(postgres_url: str) -> Iterator[tuple[str, str]]:
    """A store holding one user's tiers under a namespace unique to this test."""
    prefix = ("lm_cli_test", uuid.uuid4().hex)
    with PostgresStore.from_conn_string(postgres_url) as store:
        store.setup()
        memory = TieredMemory(
            store,
            embeddings=LexicalEmbeddings(),
            namespace=prefix,
            stm_capacity=1,
            mtm_capacity=1,
            tau=2,
        )
        texts = (
            "Chess openings.",
            "My dentist is Dr Alvarez.",
            "Dentist on Mondays.",
            "weird \x1b[31m text",
        )
        for text in texts:
            memory.add_page("ada.x/\n", text, "ok")
        try:
            yield postgres_url, "/".join(prefix)
        finally:
            for ns in store.list_namespaces(prefix=prefix, limit=1000):
                for item in store.search(ns, limit=1000):
                    store.delete(ns, item.key)


def test_shows_every_tier_with_ids_and_heat(filled, capsys):
    url, namespace = filled
    assert main(["tiers", "--user", "ada.x/\n", "--store", url, "--namespace", namespace]) == 0
    out = capsys.readouterr().out
    assert "short-term: 1 page\n" in out  # singular (issue 26): it read "1 page(s)"
    assert "weird \\x1b[31m text" in out
    assert "\x1b" not in out
    assert "mid-term: 1 segment," in out
    assert "archive: 1 segment, oldest first (searched)" in out
    assert out.index("User: Chess openings.") > out.index("archive: 1 segment")
    assert "heat " in out
    assert "User: My dentist is Dr Alvarez." in out
    assert "[fact] My dentist is Dr Alvarez." in out


def test_forget_restore_purge(filled, capsys):
    url, namespace = filled
    base = ["tiers", "--user", "ada.x/\n", "--store", url, "--namespace", namespace]
    assert main([*base, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    fact_id = next(f["id"] for f in data["long_term"] if f["kind"] == "fact")
    assert main([*base, "--forget", fact_id]) == 0
    assert capsys.readouterr().out == f"forgot fact {fact_id}\n"
    assert main(base) == 0
    out = capsys.readouterr().out
    assert fact_id in out
    assert "(forgotten)" in out
    assert main([*base, "--restore", fact_id]) == 0
    assert main([*base, "--forget", fact_id, "--purge"]) == 0
    assert capsys.readouterr().out.endswith(f"purged fact {fact_id}\n")
    assert main([*base, "--restore", fact_id]) == 1
    assert "no such fact" in capsys.readouterr().err
    assert main([*base, "--purge"]) == 2
    assert main(["tiers", "--user", "x", "--store", "postgresql://nobody@127.0.0.1:1/none"]) == 2


@pytest.mark.parametrize(
    ("namespace", "reason"),
    [("a.b", "no '.': PostgresStore's separator"), ("a b", "invalid namespace")],
)
def test_a_bad_namespace_is_a_one_line_usage_error(postgres_url, capsys, namespace, reason):
    # 'a.b' was a traceback (exit 1) from TieredMemory. It is checked before connecting:
    # the second store answers nothing.
    for url in (postgres_url, "postgresql://nobody@127.0.0.1:1/none"):
        assert main(["tiers", "--user", "x", "--store", url, "--namespace", namespace]) == 2
        err = capsys.readouterr().err
        assert err.startswith("layered-memory tiers: --namespace: ")
        assert reason in err
        assert err.count("\n") == 1


def test_the_default_namespace_is_the_tiers_own() -> None:
    # The CLI spells it out so that declaring `--namespace` imports nothing of the tiers.
    from layered_memory.cli.tiers import DEFAULT_NAMESPACE
    from layered_memory.tiers.namespaces import DEFAULT_NAMESPACE as TIERS_DEFAULT

    assert "/".join(TIERS_DEFAULT) == DEFAULT_NAMESPACE
