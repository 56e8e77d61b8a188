"""A redis-server of the test's own, on a free loopback port, that a test can freeze and kill.

Tests that break a server never touch the shared one. Readiness is read from the server's own
log ("Ready to accept connections"), so nothing sleeps.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import IO

import pytest

from process_signals import wait_until_stopped

READY = "Ready to accept connections"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One redis-server process; `start` again after `kill` restarts it on the same port.

    Args:
        folder: Its working folder (``--dir``): ``SAVE`` writes ``dump.rdb`` there and a
            restart loads it (nothing is saved automatically).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        for _attempt in range(5):
            self.process = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.folder),
                    "--dbfilename",
                    "dump.rdb",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert self.process.stdout is not None
            for line in self.process.stdout:
                if READY in line:
                    # Keep reading its log, or a full pipe would block the server.
                    threading.Thread(
                        target=_drain, args=(self.process.stdout,), daemon=True
                    ).start()
                    return
            self.process.wait()  # it exited: most likely the port was taken meanwhile
            self.port = free_port()
        pytest.fail("redis-server did not start")

    def freeze(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)
        wait_until_stopped(self.process.pid)

    def thaw(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: no shutdown save, exactly like a crash."""
        if self.process is None:
            return
        os.kill(self.process.pid, signal.SIGCONT)
        self.process.kill()
        self.process.wait()
        self.process = None

    def command(self, *args: str) -> object:
        import redis

        with redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10) as client:
            return client.execute_command(*args)


def _drain(stream: IO[str]) -> None:
    with stream:
        for _line in stream:
            pass
