"""The embedders a benchmark may run with: the bundled e5, or the tests' hash embedder."""

from __future__ import annotations

from typing import Any

from olav.core.errors import OlavError

EMBEDDERS = ("e5", "hash")


def bench_embedder(name: str) -> Any:
    from olav.memory.store.embedders import E5Embedder, HashEmbedder

    if name == "e5":
        return E5Embedder()
    if name == "hash":
        return HashEmbedder("hash-64")
    raise OlavError(
        f"unknown embedder {name!r}",
        hint="Use --embedder e5 (the bundled model) or hash (tests only, no semantics)",
    )
