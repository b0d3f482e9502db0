"""The template guides' vectors that ship with olav (``make template-vectors``).

``olav init`` primes about 30 template guides into memory; embedding them on the spot took
10 s with e5 on two cores. Their vectors are made once, when the template changes, and kept
beside the template (``workspace_template/template-vectors-<embedder>.npz``, shipped in the
wheel with it). Init uses a vector only for the exact text it was made from, so a guide the
user edited is embedded again. ``tests/test_template_vectors.py`` fails when the file and
the template disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from olav.admin.setup import template_dir
from olav.memory.store.textvectors import save_vectors, vectors_file


def template_texts(root: Path) -> list[str]:
    """The texts olav embeds for every guide of the template at ``root``."""
    from olav.memory.ingest.guides import find_guides, guide_record, load_guide

    return [guide_record(load_guide(p), p.name).text for p in find_guides(root)]


def write_template_vectors(embedder: Any, root: Path | None = None) -> Path:
    """Embed every template guide with ``embedder`` and write the file beside them."""
    root = root or template_dir()
    texts = template_texts(root)
    path = vectors_file(root, embedder.name)
    save_vectors(path, embedder.name, texts, embedder.embed_passages(texts))
    return path


def main() -> None:
    from olav.memory.store.embedders import E5Embedder

    path = write_template_vectors(E5Embedder())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
