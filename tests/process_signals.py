"""Stopping a server process for a fault test, deterministically."""

from __future__ import annotations


def wait_until_stopped(pid: int) -> None:
    """Return once `pid` is stopped: a SIGSTOP reaches a process running on another core a
    moment after `kill` returns, and a command sent meanwhile would still be answered."""
    stat = f"/proc/{pid}/stat"
    while True:
        try:
            with open(stat) as file:
                if file.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                    return
        except (OSError, IndexError):
            return  # no /proc (not Linux) or the process is gone: trust the signal


def die_at_file_call(kill_at: int) -> list[int]:
    """Make this process SIGKILL itself at its `kill_at`-th `os.write`, `os.fsync` or
    `os.replace`: a crash at every step of a write, one step per child process. Returns the
    counter of those calls (`[n]`)."""
    import os
    import signal
    from typing import Any

    calls = [0]

    def counted(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return call

    os.write = counted(os.write)  # type: ignore[assignment]
    os.fsync = counted(os.fsync)
    os.replace = counted(os.replace)
    return calls
