"""A large paste is bounded: recall reads a long request's start and end (never every word of
the paste), and a message that cannot fit the model's window by itself is refused before
anything is sent or recorded, with one line that says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from olav.memory.recall.recaller import RECALL_EDGE, recall_text
from olav.runtime.request_size import RequestTooLongError
from tests.helpers import audit_rows


def test_recall_reads_the_start_and_end_of_a_long_request() -> None:
    short = "back up the border routers in sh1"
    assert recall_text(short) == short
    paste = "summarise this config: " + "interface Gi0/1 no shutdown " * 40_000 + "what is wrong?"
    seen = recall_text(paste)
    assert len(seen) <= 2 * RECALL_EDGE + 10
    assert seen.startswith("summarise this config:") and seen.endswith("what is wrong?")


def test_a_request_buried_in_a_paste_does_not_pull_its_guide(_e5_ws_template: Path) -> None:
    from olav.core.config import Workspace
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.table import MemoryStore

    ws = Workspace.open(_e5_ws_template)
    store = MemoryStore.for_workspace(ws, cold=True)
    recaller = Recaller.for_config(store, ws.config, agent="netops", tier="small")
    wanted = "guide_netops_backup_device_configs"
    asked = "back up the border routers in sh1"
    assert wanted in recaller.recall(asked, dry_run=True).injected_ids
    filler = "the quick brown fox jumps over the lazy dog. " * 120
    buried = f"proofread this essay: {filler} {asked} {filler} thanks"
    assert wanted not in recaller.recall(buried, dry_run=True).injected_ids


def test_a_message_larger_than_the_window_is_refused_and_nothing_is_recorded(
    session_for: Any, hash_ws: Path
) -> None:
    session, model = session_for([{"content": "never"}])
    window = session.built.window
    assert window > 0
    with pytest.raises(RequestTooLongError) as err:
        session.ask("x" * (8 * window))
    assert f"the model's window of {window}" in err.value.one_line()
    assert "it was not sent" in err.value.one_line()
    assert model.calls == []
    assert audit_rows(hash_ws, "SELECT count(*) FROM runs") == [(0,)]
    # a message that fits still goes through
    assert session.ask("hello").answer == "never"
