"""A TCP proxy in a child process: SIGSTOP it and the server behind it looks frozen.

The shared PostgreSQL must keep serving every other test, so a test that needs a frozen
PostgreSQL connects through this proxy and stops the proxy by its PID. As with a frozen server,
the kernel still accepts connections and acknowledges what is sent; nothing answers.

Run as a script it listens on a free loopback port, prints that port (the parent reads it: no
sleep), and pumps bytes both ways to ``127.0.0.1:<target port>``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading


class TcpProxy:
    """The proxy child process in front of ``127.0.0.1:target_port``."""

    def __init__(self, target_port: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(target_port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """Thaw (a stopped process ignores SIGKILL until continued on some systems) and kill."""
        os.kill(self.process.pid, signal.SIGCONT)
        self.process.kill()
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _serve(target_port: int) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection(("127.0.0.1", target_port))
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
