"""`olav kb import-chat`: transcripts become sequential memories that recall by context and date."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.memory.ingest.chatlog import import_chat
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from tests.helpers import OlavMain, audit_rows

CHAT = [
    ("lin", "The core switch in rack 4 keeps dropping its uplink.", "2024-05-08T09:00:00Z"),
    ("sam", "Did you check the optics?", "2024-05-08T09:01:00Z"),
    ("lin", "Swapped them twice, no change.", "2024-05-08T09:03:00Z"),
    ("sam", "Then replace the patch cable.", "2024-05-08T09:04:00Z"),
    ("lin", "Which one, the blue or the grey?", "2024-05-08T09:05:00Z"),
    ("sam", "The blue one, it is the older one.", "2024-05-08T09:06:00Z"),
    ("lin", "Backups of the branch routers failed last night.", "2024-06-20T08:00:00Z"),
    ("sam", "Disk full on the backup server again?", "2024-06-20T08:02:00Z"),
    ("lin", "Yes, 98 percent.", "2024-06-20T08:03:00Z"),
    ("sam", "Rotate the old archives then.", "2024-06-20T08:05:00Z"),
]


def write_chat(path: Path, rows: list[tuple[str, str, str]] = CHAT) -> Path:
    lines = [json.dumps({"speaker": s, "text": t, "time": w}) for s, t, w in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_short_reply_is_recalled_by_its_surroundings_and_dates_narrow_it(e5_ws: Path) -> None:
    ws = Workspace.open(e5_ws)
    store = MemoryStore.for_workspace(ws)
    result = import_chat(store, write_chat(e5_ws / "incident.jsonl"), base=e5_ws)
    assert (result.messages, result.sessions, len(result.added)) == (10, 2, 10)
    reply = "chat_incident_00008"  # "Yes, 98 percent."
    row = store.read(reply, EVERYONE)
    assert row is not None and row.text == "[20 June 2024] lin: Yes, 98 percent."
    assert row.context is not None and "Disk full on the backup server" in row.context
    last_of_may = store.read("chat_incident_00005", EVERYONE)
    assert last_of_may is not None and last_of_may.context is not None
    assert "Backups of the branch routers" not in last_of_may.context  # windows keep to a session

    hits = store.search(
        "how full was the disk of the backup server",
        k=5,
        filter=SearchFilter(categories=["document"], reader=EVERYONE),
    )
    by_id = {h.record.id: h for h in hits}
    assert reply in by_id
    assert {"context_vector", "context_fts"} & set(by_id[reply].ranks)

    dated = store.search(
        "what did lin say in May 2024",
        k=6,
        filter=SearchFilter(categories=["document"], reader=EVERYONE),
    )
    may = {f"chat_incident_{i:05d}" for i in range(6)}
    assert {h.record.id for h in dated[:3]} <= may
    assert all("time_vector" in h.ranks for h in dated[:3])


def test_reimport_replaces_and_a_shorter_file_removes_the_tail(hash_ws: Path) -> None:
    ws = Workspace.open(hash_ws)
    store = MemoryStore.for_workspace(ws)
    path = write_chat(hash_ws / "c.jsonl")
    steps: list[tuple[int, int]] = []
    first = import_chat(store, path, base=hash_ws, progress=lambda d, t: steps.append((d, t)))
    assert steps and steps[-1] == (first.messages, first.messages)  # the bar ends full
    again = import_chat(store, path, base=hash_ws)
    assert len(first.added) == 10 and not again.added and len(again.updated) == 10
    write_chat(path, CHAT[:6])
    shorter = import_chat(store, path, base=hash_ws)
    assert shorter.removed == 4
    assert len(store.list_rows("id LIKE 'chat_c_%'")) == 6
    assert shorter.sessions == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"speaker": "a", "text": "hi"}\n{"speaker": "b"}\n', "line 2: field 'text'"),
        ('{"speaker": "a", "text": "hi", "time": "yesterday"}\n', "line 1: field 'time'"),
        ('{"speaker": "a", "text": "hi"}\nnot json\n', "line 2 is not JSON"),
        ('{"speaker": "a", "text": "hi", "mood": "ok"}\n', "field 'mood'"),
        ("\n\n", "holds no messages"),
    ],
)
def test_bad_transcripts_name_the_line_and_write_nothing(
    hash_ws: Path, content: str, message: str
) -> None:
    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    before = store.size()
    path = hash_ws / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(OlavError, match=message):
        import_chat(store, path, base=hash_ws)
    assert store.size() == before


def test_import_chat_cli(hash_ws: Path, olav_main: OlavMain) -> None:
    write_chat(hash_ws / "c.jsonl")
    out = olav_main("kb", "import-chat", "c.jsonl")
    assert out.returncode == 0, out.stderr
    assert "imported 10 messages in 2 session(s)" in out.stdout
    events = audit_rows(hash_ws, "SELECT memory_id, action, actor FROM memory_events")
    assert events == [("chat:c.jsonl", "import", "user")]  # audited by the library
    bad = olav_main("kb", "import-chat", "missing.jsonl")
    assert bad.returncode != 0 and "missing.jsonl does not exist" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_recall_block_shows_a_turn_with_its_surroundings(hash_ws: Path) -> None:
    from olav.memory.recall.recaller import Recaller, RecallOptions

    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    import_chat(store, write_chat(hash_ws / "c.jsonl"), base=hash_ws)
    result = Recaller(store, agent="global", options=RecallOptions(tier="large")).recall(
        "Yes, 98 percent", dry_run=True
    )
    assert "chat_c_00008" in result.injected_ids
    assert "Disk full on the backup server again?" in result.block  # the question it answers
