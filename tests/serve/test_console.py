"""The web console of `olav serve`, in a real browser: Playwright drives Debian's chromium
(`apt-get install chromium`, `make browser`) against the real CLI server on the Ollama stub.

The login exchanges a token for a session cookie; pages need the session; the memory search
finds a guide and never shows bob alice's private row; a run made through the API shows its tool
call and what recall injected; Confirm stores a draft and Reject does not. With httpx: a POST
without the CSRF token or from another origin is 403, and the cookie never authenticates an API
route."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import olav_here, wait_until
from tests.serve._support import (
    Model,
    Served,
    chromium,
    http_events,
    human,
    last_user,
    log_in,
    serving,
    session,
)

pytestmark = pytest.mark.slow

SECRET = "the quokka vault code is 7718 and it rotates on mondays"  # alice's private memory
FACT = "the walrus change window opens on tuesdays at 02:00 utc"  # a draft of alice's
REJECTED = "the narwhal vlan is 4021"  # a draft alice rejects
BOBS = "bob keeps his pelican notes private"  # a draft bob made through the store API
INVENTORY = "show the inventory of the lab devices"  # the request whose run calls list_devices
# the request whose model writes its list_devices call as Hermes text: the rescue layer runs it
SALVAGE = "which devices are racked in the lab"
HERON = "the heron drill is on fridays at noon"  # alice's private memory that she pins, deletes
MARKUP = '<script>document.title = "owned"</script> the ibis uplink is <b>down</b>'  # text only


class InventoryModel(Model):
    """Calls list_devices for the inventory request, then answers with what the tool said."""

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        text = last_user(body)
        roles = [m["role"] for m in body["messages"]]
        if INVENTORY in text and "tool" not in roles:
            return {"tool_calls": [{"name": "list_devices", "args": {}}]}
        if INVENTORY in text:
            return {"content": "the lab has these devices"}
        if SALVAGE in text and "tool" not in roles:
            return {"content": '<tool_call>{"name": "list_devices", "arguments": {}}</tool_call>'}
        if SALVAGE in text:
            return {"content": "these devices are racked"}
        return super().reply(body)


def _prepare(ws: Path) -> None:
    """alice's two private memories (one she pins and deletes), a global row written in
    markup, and three drafts: two of hers (no run: the workspace operator's), one in bob's
    private scope, made as the store API makes them (it records bob)."""
    from olav.core.config import Workspace
    from olav.learning.curator import DraftRequest, propose_draft
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.scopes import user_scope
    from olav.memory.store.table import MemoryStore

    opened = Workspace.open(ws)
    store = MemoryStore.for_workspace(opened)
    for text in (SECRET, HERON):
        added, _ = add_reflection(store, text, dedup_distance=0.0, scope=user_scope(opened.config))
        assert added
    assert add_reflection(store, MARKUP, dedup_distance=0.0)[0]
    for intent, body in (("walrus_window", FACT), ("narwhal_vlan", REJECTED)):
        propose_draft(ws, DraftRequest(intent, ["console"], body, "fact"))
    propose_draft(
        ws,
        DraftRequest("pelican_notes", ["pelican"], BOBS, "fact", scope="user:bob", operator="bob"),
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-console") / "ws"
    with serving(root, prepare=_prepare, model=InventoryModel()) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    try:
        yield tab
    finally:
        context.close()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


def pending_drafts(ws: Path) -> set[str]:
    return {p.name.split(".")[0] for p in (ws / ".curator_drafts").glob("*.draft.json")}


# -- the login --------------------------------------------------------------------------------


def test_the_login_form_opens_a_session_and_a_wrong_token_is_refused(
    served: Served, page: Any
) -> None:
    page.goto(served.url + "/memory")
    assert page.url.startswith(served.url + "/login?next=%2Fmemory")  # pages need a session
    page.get_by_label("Token").fill("olav_000000000000_" + "A" * 43)
    page.get_by_role("button", name="Log in").click()
    assert "not valid" in page.get_by_role("alert").inner_text()
    page.get_by_label("Token").fill(served.tokens[served.alice])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(served.url + "/memory")
    assert served.alice in page.locator("header .who").inner_text()
    (cookie,) = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert served.tokens[served.alice] not in cookie["value"]
    assert served.tokens[served.alice] not in page.content()
    page.goto(served.url + "/")
    assert page.get_by_role("link", name=re.compile("drafts waiting")).is_visible()
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(served.url + "/login")
    page.goto(served.url + "/runs")
    assert "/login" in page.url


def test_pages_need_a_session_and_their_json_twins_take_a_token(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as anonymous:
        for path in (
            "/",
            "/memory",
            "/memory/guide_netops_backup_device_configs",
            "/runs",
            "/drafts",
        ):
            got = anonymous.get(path)
            assert got.status_code == 303 and got.headers["location"].startswith("/login"), path
            assert anonymous.get(path, params={"format": "json"}).status_code == 401
    with served.http() as scripted:  # an API token: the JSON twin, never a button
        rows = scripted.get("/memory", params={"format": "json", "q": "backup"}).json()["rows"]
        assert rows and all("vector" not in r for r in rows)
        assert scripted.post("/drafts/walrus_window/confirm", data={}).status_code == 403
    assert "walrus_window" in pending_drafts(served.ws)


def test_a_revoked_token_ends_its_sessions(served: Served) -> None:
    with session(served, "carol") as carol:
        assert carol.get("/").status_code == 200
        revoked = olav_here(served.ws, "serve", "token", "revoke", served.token_ids["carol"])
        assert revoked.returncode == 0, revoked.stderr
        assert carol.get("/").status_code == 303


# -- memory -----------------------------------------------------------------------------------


def test_the_memory_search_finds_a_guide_and_its_page(served: Served, page: Any) -> None:
    log_in(page, served)
    page.get_by_role("link", name="Memory", exact=True).click()
    page.get_by_label("search").fill("back up the device configs")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r"/memory\?q="))
    page.get_by_role("link", name="guide_netops_backup_device_configs").click()
    page.wait_for_url(served.url + "/memory/guide_netops_backup_device_configs")
    text = page.locator("main").inner_text()
    assert "usage_guide" in text and "read by recall" in text and "History" in text
    page.goto(served.url + "/memory?q=ibis+uplink")  # a memory's markup is shown as text
    page.get_by_role("cell", name=re.compile("ibis uplink")).first.wait_for()
    assert "<b>down</b>" in page.locator("tbody").inner_text() and page.title() != "owned"
    page.goto(served.url + "/memory?category=usage_guide&limit=5")
    assert page.locator("tbody tr").count() == 5
    page.get_by_role("link", name="next →").click()
    assert "rows 6–10" in page.locator(".pager").first.inner_text()


def test_bob_never_sees_alices_private_memory(served: Served) -> None:
    with session(served) as alice:
        found = alice.get("/memory", params={"q": "quokka vault code", "format": "json"}).json()
        mine = [r for r in found["rows"] if r["text"] == SECRET]
        assert mine and mine[0]["scope"] == f"user:{served.alice}"
        secret_id = mine[0]["id"]
        assert SECRET in alice.get(f"/memory/{secret_id}").text
    with session(served, "bob") as bob:
        for params in ({"q": "quokka vault code"}, {}, {"scope": f"user:{served.alice}"}):
            got = bob.get("/memory", params=params)
            assert got.status_code == 200 and SECRET not in got.text and secret_id not in got.text
        got = bob.get(f"/memory/{secret_id}")
        assert got.status_code == 404 and SECRET not in got.text


def test_pin_and_delete_follow_the_clis_rules(served: Served, page: Any) -> None:
    log_in(page, served)
    page.goto(served.url + "/memory?q=heron+drill+fridays")
    page.get_by_role("link", name=re.compile("^refl_")).first.click()
    assert HERON in page.locator("main pre").first.inner_text()
    page.get_by_role("button", name="Pin (never decays)").click()
    assert "Pinned" in page.get_by_role("status").inner_text()
    assert "it never decays" in page.locator("dl.facts").inner_text()
    page.get_by_role("button", name="Delete (kept for history)").click()
    assert "kept for history" in page.get_by_role("status").inner_text()
    assert "retired" in page.locator("p.lead").inner_text()
    history = page.locator("main table").inner_text()
    assert "pin" in history and "delete" in history and served.alice in history
    guide = "/memory/guide_netops_backup_device_configs"
    with session(served, "bob") as bob:  # a global guide: not bob's to change
        shown = bob.get(guide).text
        assert "Pin (never decays)" not in shown
        got = bob.post(
            guide + "/pin", data={"csrf": csrf_of(shown)}, headers={"Origin": served.url}
        )
        assert got.status_code == 403 and "only your own private memories" in got.text


# -- runs -------------------------------------------------------------------------------------


def test_a_run_made_through_the_api_shows_its_tool_call(served: Served, page: Any) -> None:
    client = served.sdk()
    tid = client.threads.create(metadata={"graph_id": "netops"})["thread_id"]
    client.runs.wait(tid, "netops", input=human(INVENTORY))
    log_in(page, served)
    page.goto(served.url + "/runs?outcome=completed&agent=netops")
    page.get_by_role("link", name=INVENTORY).click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+"))
    run_url = page.url
    main = page.locator("main").inner_text()
    assert "calls list_devices" in main and "tool result · list_devices · success" in main
    assert "the lab has these devices" in main and "What the model saw" in main
    page.goto(served.url + "/runs?outcome=failed")
    assert INVENTORY not in page.locator("main").inner_text()
    with session(served, "bob") as bob:  # alice's thread: not bob's run
        assert INVENTORY not in bob.get("/runs").text
        assert bob.get(run_url.removeprefix(served.url)).status_code == 404


def test_a_run_page_shows_a_salvaged_call(served: Served, page: Any) -> None:
    """The model wrote its tool call as text; the rescue layer ran it. The runs page finds the
    run under "salvaged", and its page shows the call, its result and the salvage event, never
    the raw tags."""
    client = served.sdk()
    tid = client.threads.create(metadata={"graph_id": "netops"})["thread_id"]
    done = client.runs.wait(tid, "netops", input=human(SALVAGE))
    assert done["messages"][-1]["content"] == "these devices are racked"
    log_in(page, served)
    page.goto(served.url + "/runs?rescue=salvaged")
    page.get_by_role("link", name=SALVAGE).click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+"))
    main = page.locator("main").inner_text()
    # the salvage is an event of the run (a badge in its events table), not just a word
    assert page.locator("table .badge-salvaged").count() >= 1
    assert "calls list_devices" in main and "tool result · list_devices · success" in main
    assert "<tool_call>" not in main
    page.goto(served.url + "/runs?rescue=salvaged")
    assert INVENTORY not in page.locator("main").inner_text()  # its call was a real one


# -- drafts -----------------------------------------------------------------------------------


def test_confirm_stores_a_draft_and_reject_does_not(served: Served, page: Any) -> None:
    log_in(page, served)
    page.goto(served.url + "/drafts")
    walrus = page.locator("section.draft", has_text="walrus_window")
    assert FACT in walrus.inner_text()
    assert BOBS not in page.locator("main").inner_text()  # bob's draft is not hers
    walrus.get_by_role("button", name="Confirm").click()
    page.wait_for_url(served.url + "/drafts")
    assert "Committed to memory" in page.get_by_role("status").inner_text()
    page.locator("section.draft", has_text="narwhal_vlan").get_by_role(
        "button", name="Reject"
    ).click()
    assert "Nothing was stored" in page.get_by_role("status").inner_text()
    assert not {"walrus_window", "narwhal_vlan"} & pending_drafts(served.ws)
    page.goto(served.url + "/memory?q=walrus+change+window")
    page.get_by_role("cell", name=re.compile("walrus change window")).wait_for()
    with session(served) as alice:
        rows = alice.get("/memory", params={"q": "narwhal vlan", "format": "json"}).json()["rows"]
        assert REJECTED not in [r["text"] for r in rows]
    with session(served, "bob") as bob:  # bob sees his own draft only
        drafts = bob.get("/drafts", params={"format": "json"}).json()["drafts"]
        assert [d["id"] for d in drafts] == ["pelican_notes"]
    commit = _memory_event(served.ws, "commit", FACT)
    assert commit["confirmed_by"] == "console" and commit["operator"] == served.alice

    def audited() -> bool:  # the request audit names the operator, as for the API's routes
        wanted = (served.alice, "POST", "/drafts/{draft_id}/confirm", 303)
        keys = {
            (e.get("operator"), e["method"], e["route"], e["status"])
            for e in http_events(served.ws)
        }
        return wanted in keys

    wait_until(audited, 30, "the console's request audit row")


def _memory_event(ws: Path, action: str, body: str) -> dict[str, Any]:
    from olav.audit.db import connect

    with connect(ws / ".olav" / "databases" / "audit.duckdb") as con:
        rows = con.execute("SELECT detail FROM memory_events WHERE action = ?", [action]).fetchall()
    found = [json.loads(r[0]) for r in rows if body in r[0]]
    assert found, f"no {action} of {body!r} in memory_events"
    return dict(found[-1])


# -- cross-site requests ----------------------------------------------------------------------


def test_a_post_without_the_csrf_token_or_from_another_origin_is_403(served: Served) -> None:
    with session(served, "bob") as bob:
        token = csrf_of(bob.get("/drafts").text)
        target = "/drafts/pelican_notes/reject"
        tries = [
            ({"Origin": served.url}, {}),  # no CSRF token
            (
                {"Origin": served.url},
                {"csrf": ("y" if token[0] == "x" else "x") + token[1:]},
            ),  # a wrong one
            ({"Origin": "http://evil.example"}, {"csrf": token}),  # another site
            ({"Referer": "http://evil.example/page"}, {"csrf": token}),
            ({}, {"csrf": token}),  # neither Origin nor Referer
        ]
        for headers, form in tries:
            got = bob.post(target, data=form, headers=headers)
            assert got.status_code == 403 and "Refused" in got.text, (headers, form)
        assert "pelican_notes" in pending_drafts(served.ws)
        foreign = bob.post(
            "/login",
            data={"token": served.tokens["bob"]},
            headers={"Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403


def test_the_cookie_does_not_authenticate_the_api(served: Served) -> None:
    with session(served) as alice:
        assert alice.get("/").status_code == 200
        for method, path in (("POST", "/threads"), ("POST", "/threads/search"), ("GET", "/info")):
            got = alice.request(method, path, json={})
            assert got.status_code == 401, (method, path, got.text)
        assert alice.post("/runs/wait", json={"assistant_id": "core"}).status_code == 401
        assert alice.get("/v1/models").status_code == 401
        page = alice.get("/runs")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
