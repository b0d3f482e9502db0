"""The template guides' vectors shipped with olav (olav.admin.template_vectors)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from olav.admin.setup import (
    init_workspace,
    is_vectors_file,
    prime_guides,
    shipped_vectors,
    template_dir,
)
from olav.admin.template_vectors import template_texts
from olav.core.config import Workspace
from olav.memory.store.embedders import E5Embedder, HashEmbedder
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from olav.memory.store.textvectors import load_vectors, save_vectors, text_key, vectors_file
from tests.helpers import DelegatingEmbedder


class Counting(DelegatingEmbedder):
    """An embedder that counts the passages it embeds."""

    def __init__(self, inner: E5Embedder | HashEmbedder) -> None:
        super().__init__(inner)
        self.passages: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.passages.extend(texts)
        return self.inner.embed_passages(texts)


def test_shipped_vectors_match_the_template_guides() -> None:
    """Fails when a template guide changed without `make template-vectors`."""
    e5 = E5Embedder()
    known = shipped_vectors(e5)
    texts = template_texts(template_dir())
    assert len(texts) >= 15
    assert set(known) == {text_key(t) for t in texts}, "run `make template-vectors`"
    # they are e5's own vectors of those texts, not just the right keys
    fresh = e5.embed_passages(texts[:2])
    for text, vec in zip(texts[:2], fresh, strict=True):
        np.testing.assert_allclose(
            known[text_key(text)], vec, atol=5e-3
        )  # the 4-bit engine differs by ~1e-3 across CPUs; an edited guide moves far more


def test_shipped_vectors_serve_only_their_embedder(tmp_path: Path) -> None:
    hashed = HashEmbedder("hash-64")
    assert shipped_vectors(hashed) == {}
    path = vectors_file(tmp_path, "e5:multilingual-e5-small")
    save_vectors(path, "e5:multilingual-e5-small", ["a"], np.ones((1, 64), dtype=np.float32))
    assert load_vectors(path, "e5:multilingual-e5-small", 384) == {}  # another dimension
    assert load_vectors(tmp_path / "missing.npz", "e5:multilingual-e5-small", 64) == {}


def test_init_embeds_nothing_and_an_edited_guide_is_embedded_again(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    init_workspace(root, prime=False)
    assert not any(is_vectors_file(p.name) for p in root.iterdir()), "stays in the package"
    ws = Workspace.open(root)
    embedder = Counting(E5Embedder())
    store = MemoryStore.for_workspace(ws, embedder)
    summary, _ = prime_guides(ws, store)
    assert len(summary.added) >= 15
    assert embedder.passages == [], "every template guide came with its vector"

    guide = root / "core" / "guides" / "never_inline_secrets.guide.yaml"
    guide.write_text(guide.read_text(encoding="utf-8") + "  Rotate leaked keys at once.\n")
    summary, _ = prime_guides(ws, store)
    assert summary.updated == ["guide_core_never_inline_secrets"]
    assert len(embedder.passages) == 1 and "Rotate leaked keys" in embedder.passages[0]
    row = store.read("guide_core_never_inline_secrets", EVERYONE, with_vector=True)
    assert row is not None and row.vector is not None
    expected = embedder.inner.embed_passages([row.text])[0]
    np.testing.assert_allclose(
        row.vector, expected, atol=5e-3
    )  # the 4-bit engine differs by ~1e-3 across CPUs; an edited guide moves far more
    stale = shipped_vectors(embedder.inner)
    assert text_key(row.text) not in stale
