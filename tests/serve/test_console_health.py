"""The console's Health page (`/health`) against seeded audit rows and memory: its JSON twin's
numbers per day (runs with a memory block and their share, tokens per block, outcomes, recall
latency p50/p95, memory growth per category), bob's view without alice's runs and private
rows, the charts drawn in a real browser (one point or bar per seeded number) with their tables,
and a bad window refused with a 400."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.serve._support import Served, logged_in_page, serving, session

pytestmark = pytest.mark.slow

TODAY = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
D2, D1 = TODAY - timedelta(days=2), TODAY - timedelta(days=1)
DAY2, DAY1 = D2.date().isoformat(), D1.date().isoformat()
BLOCK = "<relevant-memories>\n- [fact] the {} uplink is on port {}\n</relevant-memories>"
B1, B3, B4 = BLOCK.format("heron", 1), BLOCK.format("otter", 22), BLOCK.format("ibis", 333)
BOBS_BLOCK = BLOCK.format("pelican", 9999) + " and a much longer tail " * 20
THREADS = {"alice": "health-thread-alice", "bob": "health-thread-bob"}


def _prepare(ws: Path) -> None:
    """alice's runs on two days (one without a thread: the workspace operator's), one of bob's,
    their recalls (latencies, blocks) and a recall outside any run; memory rows created on those
    days: two global facts and a decision in alice's private scope."""
    from olav.audit.db import connect
    from olav.core.config import Workspace
    from olav.memory.store.schema import MemoryRecord
    from olav.memory.store.scopes import user_name, user_scope
    from olav.memory.store.table import MemoryStore
    from olav.runtime.threads import ThreadStore

    opened = Workspace.open(ws)
    alice = user_name(opened.config)
    threads = ThreadStore.for_workspace(opened)
    threads.create("core", THREADS["alice"], owner=alice)
    threads.create("core", THREADS["bob"], owner="bob")
    runs = [  # id, thread, outcome, day
        ("h-r1", THREADS["alice"], "completed", D2),
        ("h-r2", THREADS["alice"], "failed", D2),
        ("h-r3", THREADS["alice"], "completed", D1),
        ("h-r4", None, "narrated", D1),
        ("h-r5", THREADS["bob"], "failed", D1),
    ]
    recalls = [  # run, latency ms, block
        ("h-r1", 10.0, B1),
        ("h-r2", 30.0, None),
        ("h-r3", 20.0, B3),
        ("h-r4", 40.0, B4),
        ("h-r5", 999.0, BOBS_BLOCK),
        (None, 60.0, None),  # outside a run: the workspace operator's (alice)
    ]
    started = {rid: at for rid, _, _, at in runs}
    operators = {THREADS["alice"]: alice, THREADS["bob"]: "bob"}  # whose each run is
    with connect(Path(opened.audit_path)) as con:
        for rid, tid, outcome, at in runs:
            status = "error" if outcome == "failed" else "completed"
            con.execute(
                "INSERT INTO runs (id, agent, status, outcome, query, started_at, ended_at, "
                "thread_id, operator) VALUES (?, 'core', ?, ?, ?, ?, ?, ?, ?)",
                [rid, status, outcome, f"request {rid}", at, at, tid, operators.get(tid or "")],
            )
        for rid, ms, block in recalls:
            at = started.get(rid or "", D1) + timedelta(seconds=1)
            injected = json.dumps(["fact_seeded"] if block else [])
            con.execute(
                "INSERT INTO recalls (id, run_id, agent, query, candidates, injected, latency_ms, "
                "created_at, block) VALUES (?, ?, 'core', 'q', '[]', ?, ?, ?, ?)",
                [uuid.uuid4().hex, rid, injected, ms, at, block],
            )
    store = MemoryStore.for_workspace(opened)
    store.upsert(
        [
            MemoryRecord("h-fact-1", "the heron uplink", "fact", origin="user", created_at=D2),
            MemoryRecord("h-fact-2", "the otter uplink", "fact", origin="user", created_at=D1),
            MemoryRecord(
                "h-decision",
                "alice decided to keep the ibis uplink",
                "decision",
                scope=user_scope(opened.config),
                origin="user",
                created_at=D1,
            ),
        ]
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("serve-health") / "ws", prepare=_prepare) as s:
        yield s


def _days(rows: list[dict[str, Any]], *keep: str) -> dict[str, tuple[Any, ...]]:
    return {r["day"]: tuple(r[k] for k in keep) for r in rows if r["day"] in (DAY2, DAY1)}


def test_the_json_twin_counts_alices_runs_and_recalls(served: Served) -> None:
    from olav.memory.store.token_counts import estimate_tokens

    with session(served) as alice:
        got = alice.get("/health", params={"format": "json", "days": "7"})
    assert got.status_code == 200, got.text
    data = got.json()
    assert data["days"] == 7 and data["until"] == TODAY.date().isoformat()
    assert _days(data["injection"], "runs", "with_block", "share") == {
        DAY2: (2, 1, 0.5),  # r1 got a block, r2 none
        DAY1: (2, 2, 1.0),  # r3 and r4 (no thread: alice is the workspace's operator)
    }
    assert _days(data["block_tokens"], "blocks", "mean_tokens", "max_tokens") == {
        DAY2: (1, float(estimate_tokens(B1)), estimate_tokens(B1)),
        DAY1: (
            2,
            round((estimate_tokens(B3) + estimate_tokens(B4)) / 2, 1),
            estimate_tokens(B4),
        ),
    }
    assert _days(data["outcomes"], "total", "by_outcome") == {
        DAY2: (2, {"completed": 1, "failed": 1}),
        DAY1: (2, {"completed": 1, "narrated": 1}),
    }
    assert _days(data["recall_latency"], "recalls", "p50_ms", "p95_ms") == {
        DAY2: (2, 20.0, 29.0),  # 10 and 30 ms
        DAY1: (3, 40.0, 58.0),  # 20, 40 and the recall outside a run, 60 ms
    }
    growth = {r["day"]: r for r in data["memory"]["days"]}
    assert growth[DAY2]["created"] == {"fact": 1} and growth[DAY2]["total"] == {"fact": 1}
    assert growth[DAY1]["created"] == {"decision": 1, "fact": 1}
    assert growth[DAY1]["total"] == {"decision": 1, "fact": 2}
    assert {"fact", "decision"} <= set(data["memory"]["categories"])


def test_bob_sees_only_his_run_and_not_alices_private_rows(served: Served) -> None:
    with session(served, "bob") as bob:
        data = bob.get("/health", params={"format": "json", "days": "7"}).json()
    assert _days(data["outcomes"], "total", "by_outcome") == {DAY1: (1, {"failed": 1})}
    assert _days(data["injection"], "runs", "with_block") == {DAY1: (1, 1)}
    assert _days(data["recall_latency"], "recalls", "p50_ms") == {DAY1: (1, 999.0)}
    growth = {r["day"]: r for r in data["memory"]["days"]}
    assert growth[DAY1]["created"] == {"fact": 1}  # alice's private decision is not his
    assert "decision" not in data["memory"]["categories"]
    with session(served) as alice:  # and bob's run is not alice's
        mine = alice.get("/health", params={"format": "json", "days": "7"}).json()
    assert 999.0 not in [r["p50_ms"] for r in mine["recall_latency"]]


def test_the_charts_render_in_the_browser_with_their_tables(served: Served) -> None:
    with session(served) as alice:
        data = alice.get("/health", params={"format": "json", "days": "7"}).json()
    with logged_in_page(served) as page:
        page.get_by_role("link", name="Health", exact=True).click()
        page.wait_for_url(served.url + "/health")
        page.get_by_label("window").select_option("7")
        page.wait_for_url(served.url + "/health?days=7")
        page.locator('#health[data-drawn="yes"]').wait_for()
        points = {
            name: page.locator(f'[data-chart="{name}"] svg circle.chart-point').count()
            for name in ("share", "tokens", "latency", "memory")
        }
        assert points["share"] == len(data["injection"]) == 2
        assert points["tokens"] == len(data["block_tokens"]) == 2
        assert points["latency"] == 2 * len(data["recall_latency"]) == 4  # p50 and p95
        fact = page.locator('[data-chart="memory"] g[data-series="fact"] circle.chart-point')
        assert fact.count() == 2  # D2 and D1 (facts created before the window: none)
        series = page.locator('[data-chart="memory"] g.series').count()
        assert series == len(data["memory"]["categories"])
        bars = page.locator('[data-chart="outcomes"] svg rect.chart-bar')
        assert bars.count() == 4  # completed and failed on D2, completed and narrated on D1
        assert {bars.nth(i).get_attribute("data-key") for i in range(4)} == {
            "completed",
            "failed",
            "narrated",
        }
        drawn_svg = page.locator('[data-chart="outcomes"] svg')
        view_w = float((drawn_svg.get_attribute("viewBox") or "").split()[2])
        scale = drawn_svg.bounding_box()["width"] / view_w
        for i in range(4):  # drawn as tall as their numbers (no stylesheet rule resizes them)
            drawn = bars.nth(i).bounding_box()["height"]
            assert abs(drawn - float(bars.nth(i).get_attribute("height")) * scale) < 1.5
        svg = page.locator('[data-chart="share"] svg')
        assert svg.get_attribute("role") == "img" and "memory block" in (
            svg.get_attribute("aria-label") or ""
        )
        ticks = page.locator('[data-chart="share"] svg text.x-tick').all_text_contents()
        assert ticks[0] == data["since"] and ticks[-1] == data["until"]  # the axis is labelled
        numbers = page.locator("#chart-latency details")
        numbers.locator("summary").click()
        row = numbers.locator("tr", has_text=DAY1)
        assert row.locator("td").nth(2).inner_text() == "40.0"  # p50 ms
        assert row.locator("td").nth(3).inner_text() == "58.0"  # p95 ms


def test_a_bad_window_is_a_400_with_one_line(served: Served) -> None:
    with session(served) as alice:
        for days in ("0", "400", "ten", "-3"):
            got = alice.get("/health", params={"format": "json", "days": days})
            assert got.status_code == 400, (days, got.text)
            assert "days must be a whole number from 1 to 365" in got.json()["detail"]
        page = alice.get("/health", params={"days": "ten"})
        assert page.status_code == 400 and "Traceback" not in page.text
