"""Embedding every text once per run, cached on disk by embedder, kind and text hash."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from olav.memory.store.embedders import Embedder

Progress = Callable[[str], None]


class LocomoVectors:
    """Embeddings keyed by embedder name + kind (query/passage) + SHA-1 of the text.

    With ``directory=None`` nothing touches the disk (vectors are still computed once per run).
    """

    def __init__(self, embedder: Embedder, directory: Path | None, progress: Progress) -> None:
        self.embedder = embedder
        self.directory = directory
        self.progress = progress
        self._mem: dict[str, dict[str, np.ndarray]] = {}
        self.embedded = 0
        self.reused = 0

    def _file(self, kind: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.embedder.name)
        assert self.directory is not None
        return self.directory / f"{slug}.{kind}.npz"

    def _load(self, kind: str) -> dict[str, np.ndarray]:
        if kind in self._mem:
            return self._mem[kind]
        table: dict[str, np.ndarray] = {}
        if self.directory is not None and self._file(kind).is_file():
            try:
                with np.load(self._file(kind)) as npz:
                    keys, vecs = npz["keys"], npz["vecs"]
                if vecs.ndim == 2 and vecs.shape[1] == self.embedder.dim:
                    table = {str(k): v for k, v in zip(keys, vecs, strict=True)}
            except (OSError, ValueError, KeyError):
                table = {}  # a damaged cache is rebuilt
        self._mem[kind] = table
        return table

    def _save(self, kind: str) -> None:
        if self.directory is None:
            return
        table = self._mem[kind]
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self._file(kind).with_suffix(".tmp.npz")
        keys = np.array(list(table), dtype="U40")
        vecs = np.vstack(list(table.values())).astype(np.float32)
        np.savez(tmp, keys=keys, vecs=vecs)
        tmp.replace(self._file(kind))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def get(self, texts: Sequence[str], kind: str, batch: int = 64) -> np.ndarray:
        table = self._load(kind)
        todo = list(dict.fromkeys(t for t in texts if self.key(t) not in table))
        self.reused += len(set(texts)) - len(todo)
        started = saved = time.monotonic()
        for i in range(0, len(todo), batch):
            chunk = todo[i : i + batch]
            if kind == "query":
                vecs = np.vstack([self.embedder.embed_query(t) for t in chunk])
            else:
                vecs = self.embedder.embed_passages(chunk)
            for text, vec in zip(chunk, vecs, strict=True):
                table[self.key(text)] = np.asarray(vec, dtype=np.float32)
            done = min(i + batch, len(todo))
            rate = done / max(time.monotonic() - started, 1e-6)
            self.progress(f"embedding {kind} texts: {done}/{len(todo)} ({rate:.0f}/s)")
            if time.monotonic() - saved > 60:  # an interrupted run keeps most of its work
                self._save(kind)
                saved = time.monotonic()
        if todo:
            self.embedded += len(todo)
            self._save(kind)
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.vstack([table[self.key(t)] for t in texts])


def default_cache_dir() -> Path:
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "olav" / "bench"
