"""Every page of the console on a demo workspace, in Debian's chromium at 1280×800: no page
scrolls sideways, the memory table keeps every column (the score too) inside its box at 1280
wide and in a narrow window, the Why table's reasons wrap inside its box at 1280, and the
Health charts fill their cards with every label inside.

The demo has two weeks of history (tests/serve/_history.py: memory dated back, runs and
recalls on each day), so that the Health charts show trends; a chat thread with two turns
(tool calls, their results, what the model saw) and a thread waiting for an approval.

With ``OLAV_SCREENSHOTS=docs/img`` (``make screenshots``) it also saves each page as
``docs/img/console-<page>.png`` for docs/console.md. The demo is ASCII only (Debian's chromium
has no CJK fonts): the template guides written in Chinese are left out of it."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from olav.memory.store.scopes import EVERYONE
from tests.serve._history import DAYS, seed_history
from tests.serve._support import (
    Model,
    Served,
    human,
    last_user,
    log_near_miss,
    logged_in_page,
    serving,
)

pytestmark = pytest.mark.slow

SHOTS = os.environ.get("OLAV_SCREENSHOTS", "")
INVENTORY = "list the border routers of site sh1"
BACKUP = "back up the config of sh1-border01"
SNAPSHOT = "take a snapshot of sh1-border01 before the change"
GAP = "write the device list to a file for me"
SEARCH = "change window"
WHY = "when is the lab change window"
# relevance on with the stub's hash embedder (as in test_console_why.py): the Why page has
# floors to draw
FLOORS = "memory:\n  relevance: '0.0,-0.25,-0.25,0.04,0.03,0.3'\n"
FACTS = {
    "lab_change_window": "the lab change window opens on tuesdays at 02:00 UTC",
    "sh1_core_routers": "the core routers of site sh1 are sh1-core01 and sh1-core02",
    "backup_retention": "backups of border routers go to exports/backups and are kept 30 days",
    "lab_dns": "the lab DNS server moved to 10.20.0.53 in november",
    "change_freeze": "no change window during the year-end freeze, december 20 to january 5",
}
LESSONS = (
    "ping the gateway twice before declaring it down",
    "backup_device_config takes the hostname, never the IP address",
    "ssh to the access switches needs a 30 second timeout",
)


class DemoModel(Model):
    """Calls a tool for the demo's requests (list_devices, backup_device_config, take_snapshot:
    the one that waits for an approval), then answers with what the tool said."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        text = last_user(body)
        result = _tool_result(body)
        if INVENTORY in text:
            if result is None:
                return {
                    "tool_calls": [
                        {"name": "list_devices", "args": {"role": "border", "site": "sh1"}}
                    ]
                }
            return {"content": "site sh1 has two border routers: sh1-border01 and sh1-border02"}
        if BACKUP in text:
            if result is None:
                return {
                    "tool_calls": [
                        {"name": "backup_device_config", "args": {"device": "sh1-border01"}}
                    ]
                }
            saved = result.removeprefix("Saved ").split(" ", 1)[0]
            return {"content": f"backed up sh1-border01 to {saved}; backups are kept 30 days"}
        if SNAPSHOT in text:
            if result is None:
                return {
                    "tool_calls": [{"name": "take_snapshot", "args": {"devices": ["sh1-border01"]}}]
                }
            return {"content": f"snapshot taken: {result[:80]}"}
        return super().reply(body)


def _tool_result(body: dict[str, Any]) -> str | None:
    """What a tool answered since the person's last message (None: no tool ran yet)."""
    messages = body["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    found = [m for m in messages[last:] if m["role"] == "tool"]
    return str(found[-1]["content"]) if found else None


def _ascii_only(ws: Path) -> None:
    """Drop the template guides written in Chinese, and the Chinese keywords of the others."""
    import yaml

    from olav.core.config import Workspace
    from olav.memory.ingest.guides import find_guides, import_guides
    from olav.memory.store.table import MemoryStore

    cjk = re.compile(r"[\u3400-\u9fff]")
    for path in find_guides(ws):
        guide = yaml.safe_load(path.read_text(encoding="utf-8"))
        if cjk.search(guide["body"]):
            path.unlink()
            continue
        guide["keywords"] = [k for k in guide["keywords"] if not cjk.search(k)]
        path.write_text(yaml.safe_dump(guide, sort_keys=False), encoding="utf-8")
    store = MemoryStore.for_workspace(Workspace.open(ws))
    import_guides(store, find_guides(ws), base=ws, prune_under=ws)


def _prepare(ws: Path) -> None:
    """The demo: facts confirmed through the curator, lessons, a private one, one draft of
    each kind, a near miss in the recall log, and two weeks of history."""
    from olav.core.config import Workspace
    from olav.learning.curator import DraftRequest, commit_draft, propose_draft
    from olav.learning.curator.amend import propose_keywords
    from olav.learning.reflector import write_code_fix
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.scopes import user_scope
    from olav.memory.store.table import MemoryStore

    config = ws / ".olav" / "olav.yaml"
    config.write_text(config.read_text() + FLOORS)
    _ascii_only(ws)
    opened = Workspace.open(ws)
    store = MemoryStore.for_workspace(opened)
    for intent, body in FACTS.items():
        propose_draft(ws, DraftRequest(intent, intent.split("_"), body, "fact", agent="netops"))
        commit_draft(ws, store, intent=intent, audit_path=opened.audit_path, confirmed_by="cli")
    for text in LESSONS:
        assert add_reflection(store, text, dedup_distance=0.0)[0]
    private = "my own note: the quokka lab rack is row 4"
    assert add_reflection(store, private, dedup_distance=0.0, scope=user_scope(opened.config))[0]
    propose_draft(
        ws,
        DraftRequest(
            "sh2_border_replacement",
            ["sh2", "border"],
            "the sh2 border router is replaced in january",
            "fact",
        ),
    )
    body = "To reset a stuck BGP session: show the neighbor first, then clear it softly."
    propose_draft(
        ws, DraftRequest("reset_bgp_session", ["bgp", "reset"], body, "usage_guide", "netops")
    )
    write_code_fix(
        ws,
        Path(opened.exports),
        title="list_devices times out on large sites",
        root_cause="The inventory query reads every column of every device.",
        suggested_fix="Select only the columns the tool prints, and page by site.",
    )
    log_near_miss(ws, GAP, "guide_core_export_when_asked_to_save", 0.041, 0.05)
    guide = store.read("guide_netops_list_devices_by_role_and_site", EVERYONE)
    draft = propose_keywords(ws, guide, ["border routers"], request=INVENTORY)
    path = ws / ".curator_drafts" / f"{draft}.draft.json"  # proposed an hour ago: shown first
    data = json.loads(path.read_text(encoding="utf-8"))
    data["created_at"] = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    path.write_text(json.dumps(data), encoding="utf-8")
    seed_history(ws)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-screens") / "ws"
    with serving(root, prepare=_prepare, model=DemoModel()) as s:
        yield s


@pytest.fixture(scope="module")
def chats(served: Served) -> dict[str, str]:
    """The demo's threads: ``chat``, two turns with tool calls; ``waiting``, a snapshot that
    waits for the person's Allow or Deny."""
    # a dry-run recall (the Why page) warms the server's index first, so that the demo's
    # first recall is not a cold one (a spike of today's latency on the Health page)
    with served.http() as api:
        got = api.get("/why", params={"q": INVENTORY, "agent": "netops", "format": "json"})
        assert got.status_code == 200, got.text
    client = served.sdk()
    tid = client.threads.create(metadata={"graph_id": "netops"})["thread_id"]
    client.runs.wait(tid, "netops", input=human(INVENTORY))
    client.runs.wait(tid, "netops", input=human(BACKUP))
    waiting = client.threads.create(metadata={"graph_id": "netops"})["thread_id"]
    client.runs.wait(waiting, "netops", input=human(SNAPSHOT))
    return {"chat": tid, "waiting": waiting}


@pytest.fixture(scope="module")
def page(served: Served, chats: dict[str, str]) -> Iterator[Any]:
    with logged_in_page(served) as tab:
        yield tab


def _pages(served: Served, page: Any, chats: dict[str, str]) -> list[tuple[str, str]]:
    """(name, path) of every page: the navigation's (the chat with a thread open), a row, a
    run, and a search."""
    from olav.serve.console.html import NAV

    out = [(href.strip("/") or "dashboard", href) for href, _ in NAV]
    out = [
        (n, f"/memory?q={SEARCH.replace(' ', '+')}") if n == "memory" else (n, p) for n, p in out
    ]
    out = [
        (n, f"/why?q={WHY.replace(' ', '+')}&agent=netops") if n == "why" else (n, p)
        for n, p in out
    ]
    out = [(n, f"/chat?thread={chats['chat']}") if n == "chat" else (n, p) for n, p in out]
    out = [(n, f"/health?days={DAYS}") if n == "health" else (n, p) for n, p in out]
    page.goto(served.url + "/runs")
    run = page.get_by_role("link", name=INVENTORY).get_attribute("href")
    out += [("run", run), ("memory-row", "/memory/fact_lab_change_window")]
    return out


def _no_sideways_scroll(page: Any) -> None:
    wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0, f"{page.url} scrolls sideways by {wide}px"


def _memory_columns_fit(page: Any) -> None:
    """Every cell of the memory table lies inside the table's box (nothing to scroll to)."""
    overflow = page.evaluate(
        """() => {
          const wrap = document.querySelector('.table-wrap');
          const box = wrap.getBoundingClientRect();
          const cells = [...wrap.querySelectorAll('td')];
          return [wrap.scrollWidth - wrap.clientWidth,
                  cells.filter(td => td.getBoundingClientRect().right > box.right + 1).length];
        }"""
    )
    assert overflow == [0, 0], f"the memory table overflows at {page.viewport_size}: {overflow}"


def _why_reasons_fit(page: Any) -> None:
    """The Why table's last column, the reason, lies inside the table's box and the window,
    and no reason is clipped in its cell (its text wraps: issue 38 cut it at 1280 px)."""
    got = page.evaluate(
        """() => {
          const wrap = document.querySelector('.table-wrap');
          const box = wrap.getBoundingClientRect();
          const cells = [...wrap.querySelectorAll('td[data-col="why"]')];
          return {
            cells: cells.length,
            scroll: wrap.scrollWidth - wrap.clientWidth,
            outside: cells.filter(td => {
              const r = td.getBoundingClientRect();
              return r.right > box.right + 1 || r.right > window.innerWidth;
            }).map(td => td.textContent),
            clipped: cells.filter(td => td.scrollWidth > td.clientWidth + 1)
              .map(td => td.textContent),
            longest: Math.max(...cells.map(td => td.textContent.length)),
          };
        }"""
    )
    assert got["cells"] > 0 and got["longest"] > 40, got  # reasons long enough to wrap
    assert got["scroll"] <= 0, f"the Why table scrolls sideways at {page.viewport_size}: {got}"
    assert not got["outside"] and not got["clipped"], got


def _charts_fit(page: Any) -> None:
    """Every Health chart is as wide as its card, and every label lies inside its svg."""
    page.locator('#health[data-drawn="yes"]').wait_for()
    got = page.evaluate(
        """() => [...document.querySelectorAll('[data-chart] svg')].map(svg => {
          const box = svg.getBoundingClientRect();
          const plot = svg.parentElement;
          const out = [...svg.querySelectorAll('text')].filter(t => {
            const r = t.getBoundingClientRect();
            return r.left < box.left - 0.5 || r.right > box.right + 0.5;
          }).map(t => t.textContent);
          return [plot.dataset.chart, plot.clientWidth - box.width, out];
        })"""
    )
    assert len(got) == 5, got
    for name, short, outside in got:
        assert abs(short) <= 1 and not outside, (page.viewport_size, name, short, outside)


def _shoot(page: Any, name: str, *, full: bool = False) -> None:
    if SHOTS:
        page.wait_for_load_state("networkidle")  # a chart draws from its page's JSON twin
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"console-{name}.png"), full_page=full)


def test_every_page_fits_1280_by_800(served: Served, page: Any, chats: dict[str, str]) -> None:
    for name, path in _pages(served, page, chats):
        got = page.goto(served.url + path)
        assert got.status == 200, (path, got.status)
        assert page.locator("h1").count() == 1
        _no_sideways_scroll(page)
        if name == "health":
            _charts_fit(page)
        if name == "why":
            _why_reasons_fit(page)
        if name == "chat":  # what the model saw, opened for the first turn
            page.locator("li.turn details.saw summary").first.click()
            assert page.locator("li.turn details.saw pre.block").first.is_visible()
        _shoot(page, name, full=name in ("chat", "health"))
    page.goto(served.url + f"/memory?q={SEARCH.replace(' ', '+')}")
    assert page.locator("thead th").last.inner_text() == "text"
    assert page.locator("td[data-col=score]").count() > 0
    _memory_columns_fit(page)


def test_the_why_reasons_wrap_at_1280(served: Served, page: Any) -> None:
    assert page.viewport_size == {"width": 1280, "height": 800}
    got = page.goto(served.url + f"/why?q={WHY.replace(' ', '+')}&agent=netops")
    assert got.status == 200
    _why_reasons_fit(page)
    _no_sideways_scroll(page)


def test_the_memory_table_fits_a_narrow_window(served: Served, page: Any) -> None:
    page.set_viewport_size({"width": 420, "height": 800})
    try:
        page.goto(served.url + f"/memory?q={SEARCH.replace(' ', '+')}")
        _no_sideways_scroll(page)
        _memory_columns_fit(page)
        score = page.locator("td[data-col=score]").first
        assert score.is_visible() and re.fullmatch(r"\d\.\d{4}", score.inner_text().strip())
        _shoot(page, "memory-narrow")
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})


def test_the_login_page(served: Served, page: Any) -> None:
    fresh = page.context.browser.new_context(viewport={"width": 1280, "height": 800})
    try:  # a context of its own: no session cookie
        tab = fresh.new_page()
        tab.goto(served.url + "/login")
        assert tab.get_by_label("Token").is_visible()
        _no_sideways_scroll(tab)
        _shoot(tab, "login")
    finally:
        fresh.close()


def test_the_health_charts_fit_a_narrow_window(served: Served, page: Any) -> None:
    page.goto(served.url + f"/health?days={DAYS}")
    _charts_fit(page)
    wide = page.locator('[data-chart="share"] svg').get_attribute("viewBox")
    page.set_viewport_size({"width": 420, "height": 800})
    try:  # drawn again for the narrower card
        page.wait_for_function(
            "w => document.querySelector('[data-chart=share] svg').getAttribute('viewBox') !== w",
            arg=wide,
        )
        _no_sideways_scroll(page)
        _charts_fit(page)
        page.goto(served.url + f"/health?days={DAYS}")  # and drawn narrow from the start
        _no_sideways_scroll(page)
        _charts_fit(page)
        _shoot(page, "health-narrow")
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})


def test_a_chat_waits_for_allow_or_deny(served: Served, page: Any, chats: dict[str, str]) -> None:
    page.goto(served.url + f"/chat?thread={chats['waiting']}")
    turn = page.locator("li.turn").last
    assert turn.locator('.tool-call[data-tool="take_snapshot"]').is_visible()
    asked = page.get_by_role("group", name="approval")
    assert "take_snapshot needs your approval" in asked.inner_text()
    for button in ("Allow", "Deny"):
        assert asked.get_by_role("button", name=button).is_visible()
    _no_sideways_scroll(page)
    _shoot(page, "chat-approval", full=True)
