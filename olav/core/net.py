"""Listening sockets for olav's servers (``olav mcp`` over HTTP, ``olav serve``)."""

from __future__ import annotations

import socket

from olav.core.errors import OlavError


def listen(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A socket listening on ``host:port`` (0 picks a free port), or a one-line error."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: without it a small response waits ~40 ms for the
    # client's delayed ACK (Nagle), on every request
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OlavError(
            f"cannot listen on {host}:{port} ({exc.strerror})",
            hint="Pick another port with --port, or --port 0 for a free one",
        ) from None
    sock.listen(backlog)
    return sock
