"""The faults the reliability tests inject, each a real outage rather than a mock.

``TcpProxy`` stands between the stack and PostgreSQL: stopping it is the database going
away for every process at once (their connections cut, new ones refused), without
touching the machine's server that other test sessions use. ``PrivateRedis`` is a
redis-server of the test's own that it can ``kill -9`` and start again on the same port.
``small_filesystem`` mounts a tmpfs of a few MiB, a store that fills up for real.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import redis

from harness.stack import free_port
from tests.e2e.conftest import require
from tests.waiting import wait_until

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``; ``stop`` cuts every connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.accepted = 0

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """The server is gone: the port refuses connections, open ones are reset."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._connections |= {client, upstream}
                self.accepted += 1
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                sock.setblocking(True)
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select(timeout=1.0):
                        data = key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
                        if not data:
                            return
                        peers[key.fileobj].sendall(data)  # type: ignore[index]
                    with self._lock:
                        if client not in self._connections:
                            return
            except OSError:
                return
            finally:
                with self._lock:
                    self._connections -= {client, upstream}
                for sock in peers:
                    sock.close()


class PrivateRedis:
    """A redis-server on a port of its own, keeping nothing on disk (like a crash would)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30) -> None:
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the server keeps it
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        client = redis.Redis(port=self.port)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                assert self.process is not None
                assert self.process.poll() is None, "redis-server exited"
                return False

        wait_until(answers, f"redis-server on port {self.port}", timeout)

    def kill(self) -> None:
        """kill -9: every queued message and every connection goes with it."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def private_redis(directory: Path) -> PrivateRedis:
    """A started PrivateRedis; skipped without redis-server (a failure under CI=true)."""
    require(os.access(REDIS_SERVER, os.X_OK), f"no {REDIS_SERVER} (apt-get install redis-server)")
    server = PrivateRedis(directory)
    server.start()
    return server


def can_mount() -> bool:
    """Whether this process may mount a tmpfs (root, as in the CI container)."""
    return os.geteuid() == 0 and shutil.which("mount") is not None


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``"4m"``) mounted on ``path`` for the block's duration."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
