"""A person's memory operations (olav.memory.lifecycle.ops): pin, edit, forget, quarantine and
release, each audited once, the same way, whichever client asks; a row the actor may not read
is "no memory with id ..."; an operation that does not apply says why. And the terminal's
example: `olav memory pin` is audited as the console's Pin is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olav.core.errors import NotFoundError
from olav.memory.lifecycle.ops import Actor, NotApplicable, edit, forget, pin, quarantine, release
from olav.memory.store.scopes import EVERYONE, Reader
from tests.helpers import audit_rows, hash_store, rec


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, dict[str, Any]]] = []

    def memory_event(self, memory_id: str, action: str, actor: str, detail: dict[str, Any]) -> None:
        self.events.append((memory_id, action, actor, detail))


def test_each_operation_changes_the_row_and_is_audited_with_who_and_how(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("f", "the NOC phone is 1234", metadata={"body": "old"}), rec("g", "gone")])
    log = Log()
    alice = Actor("alice", "console", Reader("user:alice", None), log)
    assert pin(store, "f", alice).metadata["pinned"] is True
    assert store.read("f", EVERYONE).confidence == 1.0  # type: ignore[union-attr]
    changed = edit(store, "f", "the NOC phone is 5678", alice)
    assert changed.text == changed.metadata["body"] == "the NOC phone is 5678"
    held = quarantine(store, "f", alice)
    assert held.quarantined and held.invalidated_at is not None
    with pytest.raises(NotApplicable, match="retired already"):
        quarantine(store, "f", alice)
    assert release(store, "f", alice).invalidated_at is None
    with pytest.raises(NotApplicable, match="memory f is not in quarantine"):
        release(store, "f", alice)
    assert forget(store, "f", alice).metadata["deleted_by"] == "alice"
    forget(store, "g", alice, purge=True)
    assert store.read("g", EVERYONE) is None
    assert [(i, a, who) for i, a, who, _ in log.events] == [
        ("f", "pin", "alice"),
        ("f", "edit", "alice"),
        ("f", "quarantine", "alice"),
        ("f", "release", "alice"),
        ("f", "delete", "alice"),
        ("g", "purge", "alice"),
    ]
    assert all(d["by"] == "console" for *_, d in log.events)
    assert log.events[1][3]["old_text"] == "the NOC phone is 1234"
    assert log.events[5][3]["text"] == "gone"


def test_another_operators_row_is_not_found_and_stays_as_it_was(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert([rec("b", "bob's private note", scope="user:bob")])
    log = Log()
    alice = Actor("alice", "console", Reader("user:alice", None), log)
    for op in (pin, forget, quarantine):
        with pytest.raises(NotFoundError, match="no memory with id 'b'"):
            op(store, "b", alice)
    with pytest.raises(NotFoundError, match="no memory with id 'b'"):
        edit(store, "b", "overwritten", alice)
    with pytest.raises(NotApplicable, match="not in quarantine"):  # the same answer as for any
        release(store, "b", alice)
    kept = store.read("b", EVERYONE)
    assert kept is not None and kept.text == "bob's private note" and kept.invalidated_at is None
    assert log.events == []


def test_olav_memory_pin_is_audited_from_the_terminal(hash_ws: Path, olav_main: Any) -> None:
    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    store.upsert([rec("fact_lab", "the lab router is r7")])
    done = olav_main("memory", "pin", "fact_lab")
    assert done.returncode == 0, done.stderr
    events = audit_rows(
        hash_ws, "SELECT action, actor, detail FROM memory_events WHERE memory_id = 'fact_lab'"
    )
    assert [(a, who, json.loads(d)) for a, who, d in events] == [("pin", "user", {"by": "cli"})]
    missing = olav_main("memory", "quarantine", "--release", "fact_lab")
    assert missing.returncode == 1 and "memory fact_lab is not in quarantine" in missing.stderr


def test_a_guide_or_a_retired_row_cannot_be_edited_by_any_client(
    tmp_path: Path, hash_ws: Path, olav_main: Any
) -> None:
    store = hash_store(tmp_path / "m.lance")
    guide = rec("guide_x", "list devices", category="usage_guide", metadata={"source": "g.yaml"})
    store.upsert([guide, rec("f", "the NOC phone is 1234")])
    log = Log()
    bob = Actor("bob", "library", EVERYONE, log)
    with pytest.raises(
        NotApplicable, match=r"guide_x is a guide: it is edited in its file g\.yaml"
    ):
        edit(store, "guide_x", "new words", bob)
    forget(store, "f", bob)
    with pytest.raises(NotApplicable, match="memory f is retired: it can no longer be edited"):
        edit(store, "f", "new words", bob)
    assert [e[1] for e in log.events] == ["delete"]  # the refusals wrote nothing
    assert store.read("f", EVERYONE).text == "the NOC phone is 1234"  # type: ignore[union-attr]
    # the terminal: the same reason, in one line
    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    ws_store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    ws_store.upsert([rec("v", "the lab VLAN is 30")])
    forget(ws_store, "v", bob)
    out = olav_main("memory", "edit", "v", "--text", "the lab VLAN is 31")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: memory v is retired: it can no longer be edited"
    ]


def test_the_terminal_refuses_a_guide_before_its_editor_opens(
    hash_ws: Path, olav_main: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --text the editor would open on the guide and lose what the person typed."""
    import click

    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    store.upsert([rec("guide_y", "list devices", category="usage_guide")])

    def no_editor(*_: Any, **__: Any) -> None:
        raise AssertionError("the editor opened")

    monkeypatch.setattr(click, "edit", no_editor)
    out = olav_main("memory", "edit", "guide_y")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("error: guide_y is a guide: it is edited in the file or draft")
