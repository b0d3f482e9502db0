"""Two weeks of history for the console's screenshot demo (test_console_screens.py), so that
every chart of the Health page shows a trend rather than one point.

- **Memory:** the rows the demo wrote (the template guides, the confirmed facts, the lessons)
  are dated back over the last 14 days, as if the workspace was set up two weeks ago and
  learned a little every few days: the store's own ``upsert(restore=True)`` writes them back
  with their new dates, and their ``memory_events`` follow.
- **Runs and recalls:** a few runs a day on each of the 13 days before today, written through
  :class:`olav.audit.recorder.AuditRecorder` (the run, its messages, tool calls, a ``run_stats``
  event and its recall with the ``<relevant-memories>`` block rendered from the memories that
  existed that day); then their timestamps are moved to that day. Outcomes improve and blocks
  grow as memory grows; recall latency drifts up with it, with a slow day after a restart.

Everything is seeded from a fixed random seed: the same demo every time. ASCII only."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from olav.memory.store.scopes import EVERYONE

DAYS = 14
SEED = 2026
MODEL = "qwen3:8b"
RUNS_PER_DAY = (3, 4, 2, 5, 4, 3, 6, 5, 4, 3, 5, 6, 4)  # 13 days ago .. yesterday
NOTHING_RELEVANT = 0.025  # a day further back: more runs whose memories fell under the floors
CANCELLED = (6, 2)  # days ago, which run of the day: the person stopped it
SALVAGED = 0.1  # a tool call the rescue layer salvaged from the model's text
SLOW_DAY = 8  # days ago: the server restarted and the first recalls read a cold index
FACT_AGE = {  # days ago each confirmed fact was learned
    "fact_lab_change_window": 12,
    "fact_sh1_core_routers": 10,
    "fact_backup_retention": 7,
    "fact_lab_dns": 4,
    "fact_change_freeze": 2,
}
LESSON_AGE = (9, 5, 3)  # the demo's lessons, in the order it writes them
PRIVATE_AGE = 6  # the operator's private note
GUIDE_AGE = {"core": 13, "netops": 11}  # the other agents' guides came two days later still
OTHER_GUIDE_AGE = 9


@dataclass(frozen=True)
class Ask:
    """A request of the demo's history: the memories recall would give it, the tool the
    agent calls (None: it answers from memory) and what it says."""

    agent: str
    text: str
    wants: tuple[str, ...]
    tool: str | None
    args: dict[str, Any]
    result: str
    answer: str


ASKS = (
    Ask(
        "netops",
        "show the border routers of site sh2",
        ("guide_netops_list_devices_by_role_and_site",),
        "list_devices",
        {"role": "border", "site": "sh2"},
        "hostname | role | site\nsh2-border01 | border | sh2\nsh2-border02 | border | sh2",
        "site sh2 has two border routers: sh2-border01 and sh2-border02",
    ),
    Ask(
        "netops",
        "back up the config of sh1-core02",
        ("fact_backup_retention", "guide_netops_list_devices_by_role_and_site"),
        "backup_device_config",
        {"device": "sh1-core02"},
        "Saved exports/backups/sh1-core02.cfg",
        "saved the configuration of sh1-core02 to exports/backups; it is kept 30 days",
    ),
    Ask(
        "core",
        "when can I change the lab routers",
        ("fact_lab_change_window", "fact_change_freeze"),
        None,
        {},
        "",
        "in the lab change window, tuesdays at 02:00 UTC (not during the year-end freeze)",
    ),
    Ask(
        "netops",
        "which routers are in the core of site sh1",
        ("fact_sh1_core_routers", "guide_netops_list_devices_by_role_and_site"),
        "list_devices",
        {"role": "core", "site": "sh1"},
        "hostname | role | site\nsh1-core01 | core | sh1\nsh1-core02 | core | sh1",
        "the core routers of sh1 are sh1-core01 and sh1-core02",
    ),
    Ask(
        "core",
        "what is the address of the lab DNS server",
        ("fact_lab_dns",),
        None,
        {},
        "",
        "the lab DNS server is 10.20.0.53 (it moved in november)",
    ),
    Ask(
        "netops",
        "take a snapshot of sh1-access03",
        ("guide_netops_take_snapshot_when_db_stale",),
        "take_snapshot",
        {"devices": ["sh1-access03"]},
        "Saved exports/snapshots/snapshot.json",
        "took a snapshot of sh1-access03",
    ),
    Ask(
        "core",
        "save the list of lab devices to a file",
        ("guide_core_export_when_asked_to_save", "guide_core_delegate_network_tasks_to_netops"),
        "format_and_export",
        {"fmt": "csv", "filename": "lab_devices.csv"},
        "Saved exports/lab_devices.csv",
        "saved the device list to exports/lab_devices.csv",
    ),
    Ask(
        "netops",
        "why is the BGP session to sh1-border02 idle",
        ("guide_netops_troubleshoot_layered_l1_to_l4",),
        "list_devices",
        {"role": "border", "site": "sh1"},
        "hostname | role | site\nsh1-border01 | border | sh1\nsh1-border02 | border | sh1",
        "sh1-border02 is in the inventory; check its neighbor config and the route to its peer",
    ),
)
LESSON_WORDS = {  # a lesson recall adds to a request that mentions these words
    "ping": ("gateway",),
    "backup_device_config": ("back up", "config"),
    "ssh": ("access",),
}


def seed_history(ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    opened = Workspace.open(ws)
    store = MemoryStore.for_workspace(opened)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    born = _date_memory(store, Path(opened.audit_path), today)
    _runs(store, Path(opened.audit_path), today, born)


# -- memory: the demo's rows, dated back --------------------------------------------------------


def _age(rec: Any, lessons: dict[str, int]) -> int:
    if rec.id in FACT_AGE:
        return FACT_AGE[rec.id]
    if rec.category == "reflection":
        return lessons.get(rec.id, PRIVATE_AGE)
    words = rec.id.split("_")  # guide_<agent>_<intent>
    agent = rec.scope if rec.scope in GUIDE_AGE else words[1] if len(words) > 1 else ""
    return GUIDE_AGE.get(agent, OTHER_GUIDE_AGE)


def _date_memory(store: Any, audit: Path, today: datetime) -> dict[str, datetime]:
    """Every row's created_at moved back by its age (the time of day kept apart by a few
    minutes a row); returns id -> the new created_at."""
    from olav.audit.db import connect

    cols = store.column_values(["id", "category", "created_at"])
    ids = cols["id"].to_pylist()
    lessons = sorted(
        (at, i)
        for i, c, at in zip(
            ids, cols["category"].to_pylist(), cols["created_at"].to_pylist(), strict=True
        )
        if c == "reflection"
    )
    lesson_age = {i: age for (_, i), age in zip(lessons, LESSON_AGE, strict=False)}
    born: dict[str, datetime] = {}
    moved = []
    for n, rid in enumerate(sorted(ids)):
        rec = store.read(rid, EVERYONE, with_vector=True)
        at = today - timedelta(days=_age(rec, lesson_age), hours=-9, seconds=-197 * n)
        if rec.expires_at is not None:  # a lesson lives as long from its new date
            lives = (rec.expires_at - rec.created_at).total_seconds() / 86400
            rec.expires_at = at + timedelta(days=round(lives))
        rec.created_at = rec.updated_at = rec.event_at = at
        born[rid] = at
        moved.append(rec)
    store.upsert(moved, restore=True)
    with connect(audit) as con:
        con.executemany(
            "UPDATE memory_events SET created_at = ? WHERE memory_id = ? AND created_at > ?",
            [[at, rid, at] for rid, at in born.items()],
        )
    return born


# -- the audit: runs and recalls of the last two weeks ---------------------------------------


def _runs(store: Any, audit: Path, today: datetime, born: dict[str, datetime]) -> None:
    from olav.audit.db import connect
    from olav.audit.recorder import AuditRecorder

    rng = random.Random(SEED)
    recorder = AuditRecorder(audit)
    records = {rid: store.read(rid, EVERYONE) for rid in born}
    times: dict[str, tuple[datetime, datetime]] = {}
    reads: Counter[str] = Counter()
    with recorder.batch():  # one opening of the audit for two weeks of writes
        for back, count in zip(range(len(RUNS_PER_DAY), 0, -1), RUNS_PER_DAY, strict=True):
            day = today - timedelta(days=back)
            for k in range(count):
                at = day + timedelta(hours=8 + k * 10 / count, seconds=rng.randint(0, 3000))
                ask = rng.choice(ASKS)
                outcome = "cancelled" if (back, k) == CANCELLED else _outcome(rng, back, ask)
                rid = recorder.start_run(ask.agent, uuid.uuid4().hex, ask.text, MODEL)
                known = [records[i] for i in _recalled(ask, records, at)]
                if rng.random() < NOTHING_RELEVANT * back:
                    known = []  # under every floor that day
                _recall(recorder, rid, ask, known, _latency(rng, back, len(known), k))
                reads.update(r.id for r in known)
                _steps(recorder, rid, ask, outcome, salvaged=rng.random() < SALVAGED)
                took = timedelta(seconds=rng.uniform(2.5, 14.0))
                error = "the model call timed out after 120 s" if outcome == "failed" else None
                status = {"failed": "error", "cancelled": "cancelled"}.get(outcome, "completed")
                recorder.end_run(rid, status, error, outcome=outcome)
                times[rid] = (at, at + took)
    with connect(audit) as con:
        rows = [[start, end, rid] for rid, (start, end) in times.items()]
        con.executemany("UPDATE runs SET started_at = ?, ended_at = ? WHERE id = ?", rows)
        for table in ("steps", "tool_calls", "events"):
            con.executemany(
                f"UPDATE {table} SET created_at = ? WHERE run_id = ?", [[s, r] for s, _, r in rows]
            )
        con.executemany(
            "UPDATE recalls SET created_at = ? WHERE run_id = ?",
            [[s + timedelta(milliseconds=40), r] for s, _, r in rows],
        )
    store.bump_access(dict(reads))  # what recall read, as the Recaller counts it


def _outcome(rng: random.Random, back: int, ask: Ask) -> str:
    """Worse two weeks ago, better as the guides and lessons arrived."""
    bad = 0.08 + 0.025 * back  # 0.4 two weeks ago, 0.1 yesterday
    roll = rng.random()
    if roll >= bad:
        return "completed"
    if ask.tool is not None and roll < bad * 0.45:
        return "narrated"  # said it would call the tool, and did not
    if ask.tool is not None and roll < bad * 0.8:
        return "tool_error"
    return "failed"


def _recalled(ask: Ask, records: dict[str, Any], at: datetime) -> list[str]:
    """What recall would have injected then: the request's memories that existed, and a
    lesson whose words the request uses."""
    got = [i for i in ask.wants if i in records and records[i].created_at <= at]
    for rid, rec in records.items():
        if rec.category != "reflection" or rec.created_at > at or rec.scope != "global":
            continue
        for word, needs in LESSON_WORDS.items():
            if rec.text.startswith(word) and all(n in ask.text for n in needs):
                got.append(rid)
    return got


def _latency(rng: random.Random, back: int, injected: int, k: int) -> float:
    ms = 11.0 + (DAYS - back) * 0.9 + injected * 2.5 + rng.gauss(0, 2.5)
    if back == SLOW_DAY and k == 0:
        ms += 120.0  # the first recall after the restart
    elif rng.random() < 0.08:
        ms *= 2.6  # a recall that waited for the embedder
    return round(max(ms, 4.0), 2)


def _recall(recorder: Any, run_id: str, ask: Ask, records: list[Any], ms: float) -> None:
    from olav.memory.recall.block import render_block
    from olav.memory.recall.recaller import Candidate, RecallResult
    from olav.memory.store.hits import Hit

    hits = [Hit(rec, score=0.09 - 0.01 * n) for n, rec in enumerate(records)]
    cands = [Candidate(hit, decision="injected") for hit in hits]
    result = RecallResult(ask.text, ask.agent, "small", cands, render_block(hits), ms)
    recorder.recall(run_id, ask.agent, result)


def _steps(recorder: Any, run_id: str, ask: Ask, outcome: str, *, salvaged: bool) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from olav.audit.events import RUN_STATS_EVENT, SALVAGE_EVENT
    from olav.audit.recorder import ToolCallEntry

    said: list[Any] = [HumanMessage(ask.text)]
    tokens_out = 40
    if outcome in ("failed", "cancelled"):
        pass
    elif outcome == "narrated" or ask.tool is None:
        narrated = f"I will call {ask.tool} now." if outcome == "narrated" else ask.answer
        said.append(AIMessage(narrated))
    else:
        call = {"name": ask.tool, "args": ask.args, "id": f"call_{run_id[:8]}"}
        error = outcome == "tool_error"
        result = "error: the lab simulator did not answer in 30 s" if error else ask.result
        status = "error" if error else "success"
        said.append(AIMessage("", tool_calls=[call]))
        said.append(ToolMessage(result, tool_call_id=call["id"], name=ask.tool, status=status))
        answer = f"{ask.tool} failed: the lab simulator did not answer" if error else ask.answer
        said.append(AIMessage(answer))
        if salvaged:  # the model wrote the call as text; the rescue layer ran it
            recorder.event(run_id, SALVAGE_EVENT, {"tool": ask.tool, "from": "content"})
        recorder.tool_call(
            run_id, ask.agent, ToolCallEntry(ask.tool, ask.args, result, status, 180.0)
        )
        tokens_out += 25
    recorder.steps(run_id, said)
    calls = sum(1 for m in said if m.type == "ai")
    stats = {"model_calls": calls, "tokens_in": 310 * max(calls, 1), "tokens_out": tokens_out}
    recorder.event(run_id, RUN_STATS_EVENT, stats)
