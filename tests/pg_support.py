"""A real PostgreSQL server for the tests, started on 127.0.0.1 from Debian's packages
(`make postgres` installs them) in a temporary folder, and stopped afterwards.

As root (CI) the cluster belongs to the ``postgres`` account, since the server refuses to run as
root. Without the packages the tests fail, naming the command that installs them: nothing is
skipped.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise RuntimeError("PostgreSQL's server is not installed: run `make postgres`")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """A fresh cluster; yields the URI of its ``postgres`` database (trust login for the
    ``postgres`` role, loopback only)."""
    bindir = _bindir()
    root = Path(tempfile.mkdtemp(prefix="olavpg"))  # short: the socket path has a length cap
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    if as_root:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
        os.chmod(root, 0o755)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*argv: str) -> None:
        done = subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, timeout=120, cwd=root
        )
        if done.returncode:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.strip() or done.stdout.strip()}")

    run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
    options = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off"
    log = root / "server.log"
    if as_root:
        log.touch()
        shutil.chown(log, "postgres")
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            cwd=root,
        )
        shutil.rmtree(root, ignore_errors=True)


def new_database(server_uri: str) -> str:
    """A new, empty database on the server; returns its URI."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:10]
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_uri.rsplit("/", 1)[0] + "/" + name
