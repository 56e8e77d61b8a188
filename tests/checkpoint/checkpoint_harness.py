"""Helpers of the checkpoint cache tests: a private redis-server, schemas, message threads."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import redis
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from process_signals import wait_until_stopped

START_GUARD_SECONDS = 30  # only stops a broken redis-server start; nothing is timed


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def drop_prefix(redis_url: str, prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """A redis-server this test owns: start, stop, kill, freeze, thaw, by its PID only."""

    def __init__(self, workdir: Path, *, snapshots: bool = False) -> None:
        self.dir = workdir
        self.port = free_port()
        self.snapshots = snapshots
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--appendonly", "no",
            "--save", "",
        ]  # fmt: skip
        if self.snapshots:
            args += ["--dbfilename", "dump.rdb"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=1)
        deadline = time.monotonic() + START_GUARD_SECONDS
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise
                    time.sleep(0.01)  # polling a starting server, not timing anything
        finally:
            client.close()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def save(self) -> None:
        """Write the snapshot file now (SAVE blocks until it is on disk)."""
        client = self.client()
        try:
            client.save()
        finally:
            client.close()

    def stop(self) -> None:
        """Stop without saving (SIGKILL), so the last snapshot stays the older one."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def freeze(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        wait_until_stopped(self.proc.pid)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)


def conversation(n: int, *, tag: str = "") -> list[BaseMessage]:
    """``n`` alternating user / assistant messages of realistic length."""
    out: list[BaseMessage] = []
    for i in range(n):
        if i % 2 == 0:
            out.append(
                HumanMessage(
                    f"{tag}question {i}: " + "how do I sort recycling? " * 6, id=f"h{tag}{i}"
                )
            )
        else:
            out.append(
                AIMessage(
                    f"{tag}answer {i}: " + "rinse the bottle and remove the label. " * 8,
                    id=f"a{tag}{i}",
                    response_metadata={"finish_reason": "stop"},
                )
            )
    return out


def put_messages(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    messages: list[BaseMessage],
    *,
    parent: dict[str, Any] | None = None,
    step: int = 0,
) -> dict[str, Any]:
    """Store one checkpoint holding ``messages``; returns the stored config."""
    checkpoint, config, versions = _checkpoint(saver, thread_id, messages, parent)
    return dict(saver.put(config, checkpoint, {"source": "loop", "step": step}, versions))


async def aput_messages(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    messages: list[BaseMessage],
    *,
    parent: dict[str, Any] | None = None,
    step: int = 0,
) -> dict[str, Any]:
    checkpoint, config, versions = _checkpoint(saver, thread_id, messages, parent)
    return dict(await saver.aput(config, checkpoint, {"source": "loop", "step": step}, versions))


def _checkpoint(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    messages: list[BaseMessage],
    parent: dict[str, Any] | None,
) -> tuple[Any, Any, Any]:
    checkpoint = empty_checkpoint()
    # Fresh versions carry a random suffix, so each put stores its own blob.
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": version}
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    return checkpoint, {"configurable": configurable}, {"messages": version}


def latest(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


class ExtendedInMemorySaver(InMemorySaver):
    """`InMemorySaver` plus copy_thread, delete_for_runs and prune (none of the installed savers
    has all three), so the wrapper's extended paths run under the conformance suite too."""

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        for ns, checkpoints in list(self.storage.get(source_thread_id, {}).items()):
            self.storage[target_thread_id][ns].update(checkpoints)
        for (tid, ns, cid), writes in list(self.writes.items()):
            if tid == source_thread_id:
                self.writes[(target_thread_id, ns, cid)] = dict(writes)
        for (tid, ns, channel, version), blob in list(self.blobs.items()):
            if tid == source_thread_id:
                self.blobs[(target_thread_id, ns, channel, version)] = blob

    def delete_for_runs(self, run_ids: Any) -> None:
        runs = set(run_ids)
        for tid, spaces in list(self.storage.items()):
            for ns, checkpoints in spaces.items():
                for cid, (_, metadata, _) in list(checkpoints.items()):
                    if self.serde.loads_typed(metadata).get("run_id") in runs:
                        del checkpoints[cid]
                        self.writes.pop((tid, ns, cid), None)

    def prune(self, thread_ids: Any, *, strategy: str = "keep_latest") -> None:
        for tid in thread_ids:
            if strategy == "delete":
                self.delete_thread(tid)
                continue
            for ns, checkpoints in self.storage.get(tid, {}).items():
                keep = max(checkpoints, default=None)
                for cid in list(checkpoints):
                    if cid != keep:
                        del checkpoints[cid]
                        self.writes.pop((tid, ns, cid), None)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Any) -> None:
        self.delete_for_runs(run_ids)

    async def aprune(self, thread_ids: Any, *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)
