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
