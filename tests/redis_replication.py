"""Replication between two redis-servers a test owns (by port): follow a primary, be promoted.

A failover test makes one of its own servers a replica of the other and promotes it again, as
Sentinel or an operator would. Nothing sleeps: `WAIT` on the primary returns once the replica
has loaded the primary's data and acknowledged it.
"""

from __future__ import annotations

import uuid

import redis

SYNC_GUARD_MS = 30_000  # only stops a broken sync; nothing is timed
PROBE_KEY = "lm-test:replication-probe"


def _client(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=SYNC_GUARD_MS / 1000 + 5)


def follow(replica_port: int, primary_port: int) -> None:
    """Make ``replica_port`` a replica of ``primary_port``; return once it holds the primary's
    data (a full resync when their histories diverged: the replica's own writes are gone)."""
    with _client(primary_port) as primary, _client(replica_port) as replica:
        primary.config_set("repl-diskless-sync-delay", 0)  # Redis 7 waits 5 s for more replicas
        replica.replicaof("127.0.0.1", primary_port)
    replicated(primary_port, replica_port)


def replicated(primary_port: int, replica_port: int) -> None:
    """Return once the replica holds every write the primary acknowledged so far."""
    with _client(primary_port) as primary, _client(replica_port) as replica:
        probe = uuid.uuid4().hex
        primary.set(PROBE_KEY, probe)
        acked = primary.execute_command("WAIT", 1, SYNC_GUARD_MS)
        assert acked >= 1, f"replica on port {replica_port} did not sync"
        assert replica.get(PROBE_KEY) == probe.encode()


def promote(port: int) -> None:
    """Make the server at ``port`` a primary again (``REPLICAOF NO ONE``), keeping its data
    and its ``run_id``."""
    with _client(port) as server:
        server.replicaof("NO", "ONE")
        assert server.info("replication")["role"] == "master"
