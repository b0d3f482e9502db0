"""Listening sockets for olav's servers (``olav mcp`` over HTTP, ``olav serve``), and the TLS
settings its HTTP clients share."""

from __future__ import annotations

import functools
import socket
from typing import TYPE_CHECKING

from olav.core.errors import OlavError

if TYPE_CHECKING:
    import ssl


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


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS settings (certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR), built
    once per process and shared by olav's HTTP clients (the model's, the embedder's, the
    reranker's): each client otherwise loads the certificate bundle again, about 25 ms, and a
    chat builds several. An SSLContext is meant to be shared between connections."""
    import httpx

    return httpx.create_ssl_context()
