"""The console's Why page (`/why`) in a real browser, against `olav memory why` on the same
workspace: a netops request shows a netops guide injected and its block; an unrelated one
shows "nothing is injected"; the page's JSON twin decides as the CLI does (same injected ids,
same block, same decision for every candidate). On a workspace whose floors are set
(``memory.relevance``, so relevance is on with the stub's embedder) the unrelated request gets
"nothing is injected" for certain, and the CLI agrees."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import olav_here
from tests.serve._support import Served, log_in, logged_in_page, serving

pytestmark = pytest.mark.slow

NETOPS = "back up the device configs of the lab routers"
UNRELATED = "what is a good recipe for banana bread"
# floors for the stub's hash embedder: nothing on its margin alone (every margin is negative
# there), a guide the request names in its keywords well below zero
FLOORS = "memory:\n  relevance: '0.0,-0.25,-0.25,0.04,0.03,0.3'\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("serve-why") / "ws") as s:
        yield s


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A second server whose workspace has relevance floors."""

    def floors(ws: Path) -> None:
        config = ws / ".olav" / "olav.yaml"
        config.write_text(config.read_text() + FLOORS)

    with serving(tmp_path_factory.mktemp("serve-why-gated") / "ws", prepare=floors) as s:
        yield s


@pytest.fixture(scope="module")
def page(served: Served) -> Iterator[Any]:
    with logged_in_page(served) as tab:
        yield tab


def cli_why(ws: Path, query: str) -> dict[str, Any]:
    done = olav_here(ws, "memory", "why", query, "--agent", "netops", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def page_why(page: Any, served: Served, query: str) -> dict[str, Any]:
    """Fill the form in the browser and submit it; then the same page's JSON twin."""
    page.goto(served.url + "/")
    page.get_by_role("link", name="Why", exact=True).click()
    page.wait_for_url(served.url + "/why")
    page.get_by_label("request").fill(query)
    page.get_by_label("agent").select_option("netops")
    page.get_by_role("button", name="Explain").click()
    page.wait_for_url(lambda u: "q=" in u)
    got = page.context.request.get(page.url + "&format=json")
    assert got.ok, got.text()
    return dict(got.json())


def same_decisions(web: dict[str, Any], cli: dict[str, Any]) -> None:
    assert web["injected"] == cli["injected"]
    assert web["block"] == cli["block"]
    assert web["tier"] == cli["tier"]
    decided = [(c["id"], c["decision"]) for c in web["candidates"]]
    assert decided == [(c["id"], c["decision"]) for c in cli["candidates"]]


def test_a_netops_request_shows_the_guide_injected_and_its_block(served: Served, page: Any) -> None:
    web = page_why(page, served, NETOPS)
    cli = cli_why(served.ws, NETOPS)
    same_decisions(web, cli)
    guides = [i for i in web["injected"] if i.startswith("guide_netops_")]
    assert guides, web["injected"]  # a netops guide, whatever the stub embedder ranks first
    guide = guides[0]
    assert web["block"].startswith("<relevant-memories>")
    shown = page.locator("pre.block").inner_text()
    assert shown == web["block"]  # escaped: the tags are text, as the model gets them
    row = page.locator("tbody tr", has=page.get_by_role("link", name=guide, exact=True))
    assert row.locator(".decision").inner_text() == "injected"
    assert row.get_by_role("link", name=guide).get_attribute("href") == f"/memory/{guide}"
    signals = next(c for c in web["candidates"] if c["id"] == guide)
    if signals["margin"] is None and signals["floor"] is None:  # relevance off on the stub
        assert row.locator(".no-bars").count() == 1
    else:
        assert row.locator(".bar-row").count() == 2  # margin over floor
    assert page.locator("nav.main a[aria-current=page]").inner_text() == "Why"


def test_an_unrelated_request_injects_what_the_cli_says(served: Served, page: Any) -> None:
    web = page_why(page, served, UNRELATED)
    cli = cli_why(served.ws, UNRELATED)
    same_decisions(web, cli)
    if cli["injected"]:  # relevance off (an uncalibrated embedder): the nearest are sent
        assert page.locator("pre.block").inner_text() == cli["block"]
    else:
        assert page.locator(".nothing").inner_text() == "nothing is injected"
        assert page.locator("pre.block").count() == 0
        assert web["block"] == ""


def test_margin_and_floor_bars_share_one_scale() -> None:
    from olav.serve.console.why import _bars

    drawn = _bars(0.05, 0.1, 0.1)
    assert 'bar bar-margin below w50"' in drawn and 'bar bar-floor w100"' in drawn
    assert "+0.050" in drawn and "style=" not in drawn  # the CSP allows no inline style
    assert 'bar-margin w100"' in _bars(0.2, 0.1, 0.2) and "relevance off" in _bars(
        None, None, 0.0, relevance_on=False
    )
    # above the floor but left out (weaker, over a quota): never the green of an injected row
    assert 'bar bar-margin left w100"' in _bars(0.2, 0.1, 0.2, injected=False)


def test_an_unrelated_request_gets_nothing_and_the_cli_agrees(gated: Served, page: Any) -> None:
    context = page.context.browser.new_context(viewport={"width": 1280, "height": 800})
    try:  # the module's browser, a context of its own for the second server
        tab = context.new_page()
        log_in(tab, gated)
        web = page_why(tab, gated, UNRELATED)
        cli = cli_why(gated.ws, UNRELATED)
        same_decisions(web, cli)
        assert cli["injected"] == [] and cli["block"] == "" and web["block"] == ""
        assert web["candidates"] and all(c["decision"] != "injected" for c in web["candidates"])
        assert tab.locator(".nothing").inner_text() == "nothing is injected"
        assert tab.locator("pre.block").count() == 0
        assert "relevance off" not in tab.locator("main .lead").first.inner_text()
        # the same floors let a request in that names a guide's keywords: the gate opens
        named = page_why(tab, gated, NETOPS)
        assert "guide_netops_backup_device_configs" in named["injected"]
        same_decisions(named, cli_why(gated.ws, NETOPS))
    finally:
        context.close()
