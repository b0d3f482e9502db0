"""A real S3-protocol server for the team-memory tests: ``moto`` in server mode (a dev
dependency), run as a separate process on 127.0.0.1, plus a TCP relay the tests can cut.

Nothing is installed at run time. The server keeps its buckets in memory, so a test that
"kills the server" cuts the :class:`Relay` in front of it instead: the client sees the store
vanish mid-write, and the data behind it survives for the restart.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "olav-test",
    "AWS_SECRET_ACCESS_KEY": "olav-test-secret",
    "AWS_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the S3 server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)  # polling for the port: the server gives no other signal
    raise RuntimeError(f"the S3 server did not listen on port {port}")


@dataclass
class S3Server:
    port: int
    proc: subprocess.Popen[bytes]
    env: dict[str, str] = field(default_factory=lambda: dict(CREDENTIALS))

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
        )

    def bucket(self, name: str | None = None) -> str:
        name = name or f"olav-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def start_server(extra_env: dict[str, str] | None = None) -> S3Server:
    port = free_port()
    env = {**os.environ, **CREDENTIALS, **(extra_env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    wait_for_port(port, proc)
    return S3Server(port, proc)


def team_config(endpoint: str, uri: str, base: str) -> str:
    """olav.yaml text for a workspace whose memory lives at ``uri``."""
    return (
        base
        + f"""memory:
  uri: {uri}
  storage_options:
    endpoint: {endpoint}
    allow_http: true
"""
    )


class Relay:
    """A TCP relay on its own port to ``target_port``. ``cut_on`` (a regex over the bytes a
    client sends) makes the relay close every connection and stop listening the moment a
    request matches: to the client, the server died at that request."""

    def __init__(self, target_port: int, cut_on: bytes | None = None) -> None:
        self.target_port = target_port
        self.cut_on = re.compile(cut_on) if cut_on else None
        self.port = free_port()
        self.cut = threading.Event()
        self._socks: list[socket.socket] = []
        self._listener: socket.socket | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Relay:
        self.cut.clear()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while not self.cut.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._socks += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, outbound: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if outbound and self.cut_on is not None and self.cut_on.search(data):
                    self.stop()
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.close()

    def stop(self) -> None:
        """Kill the relay: refuse new connections and drop the open ones."""
        self.cut.set()
        if self._listener is not None:
            self._listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._socks.clear()


def write_workspace(root: Path, config: str) -> Path:
    (root / ".olav").mkdir(parents=True, exist_ok=True)
    (root / ".olav" / "olav.yaml").write_text(config)
    return root
