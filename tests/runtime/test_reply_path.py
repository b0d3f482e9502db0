"""Nothing on the reply path that can wait: a run's capture is embedded and written by the
background writer, and the session's exit writes it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from olav.core.config import Workspace
from olav.memory.store.table import MemoryStore
from tests.helpers import DelegatingEmbedder, SessionFor


class GatedEmbedder(DelegatingEmbedder):
    """Embeds passages only once the gate opens (queries at once, so recall runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.passage_threads: set[str] = set()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.passage_threads.add(threading.current_thread().name)
        assert self.gate.wait(60)
        return self.inner.embed_passages(texts)


def test_ask_returns_before_the_capture_is_embedded_and_close_writes_it(
    session_for: SessionFor, hash_ws: Path
) -> None:
    embedder = GatedEmbedder()
    store = MemoryStore.for_workspace(Workspace.open(hash_ws), embedder)
    sql = "SELECT count(*) AS n FROM devices WHERE role = 'border'"
    session, _ = session_for(
        [{"tool_calls": [{"name": "db_query", "args": {"sql": sql}}]}, {"content": "4"}],
        store=store,
    )
    try:
        result = session.ask("how many border routers?")
        assert result.answer == "4"
        # answered while the capture still waits for its embedding
        assert len(store.list_rows("category = 'query_pattern'")) == 0
        assert session._writer.pending() > 0
        # nothing was embedded on the answering thread (the writer waits at the gate)
        assert "MainThread" not in embedder.passage_threads
    finally:
        embedder.gate.set()
    session.close()
    rows = store.list_rows("category = 'query_pattern'")
    assert [r.metadata["sql"] for r in rows] == [sql]
