"""The workspace's own examples recall the guide written for them (the bundled e5 embedder,
recall as ``olav memory why`` runs it): the README's example requests, and a request made of
each template guide's own keyword line, English and Chinese. A guide whose keywords the request
uses is never left out for one that matches nothing in words."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from olav.core.config import Workspace
from olav.llm.tiers import model_tier
from olav.memory.recall.recaller import Recaller
from olav.memory.store.table import MemoryStore

TEMPLATE = Path(__file__).resolve().parent.parent / "workspace_template"
CJK = re.compile(r"[\u4e00-\u9fff]")

# the README's walkthrough and the requests the first-hour report tried:
# (request, agent, the guide written for it)
README = [
    ("back up the border routers in sh1", "netops", "guide_netops_backup_device_configs"),
    ("take a snapshot of sh1-border01", "netops", "guide_netops_take_snapshot_when_db_stale"),
    ("备份路由器配置", "netops", "guide_netops_backup_device_configs"),
]


def _keyword_requests() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted(TEMPLATE.glob("*/guides/*.guide.yaml")):
        guide = yaml.safe_load(path.read_text(encoding="utf-8"))
        agent = guide.get("agent") or path.parts[-3]
        want = f"guide_{agent}_{guide['intent']}"
        words = [str(k) for k in guide.get("keywords") or []]
        english = " ".join([k for k in words if not CJK.search(k)][:4])
        chinese = "".join([k for k in words if CJK.search(k)][:2])
        out += [(q, agent, want) for q in (english, chinese) if q]
    return out


@pytest.fixture(scope="module")
def recallers(_e5_ws_template: Path) -> Any:
    ws = Workspace.open(_e5_ws_template)
    store = MemoryStore.for_workspace(ws, cold=True)
    tier = model_tier(ws.config["llm.model"], ws.config["llm.tier"])
    made: dict[str, Recaller] = {}

    def get(agent: str) -> Recaller:
        if agent not in made:
            made[agent] = Recaller.for_config(store, ws.config, agent=agent, tier=tier)
        return made[agent]

    return get


def _injected(rec: Recaller, query: str) -> tuple[list[str], dict[str, str]]:
    result = rec.recall(query, dry_run=True)
    decided = {c.hit.record.id: c.decision for c in result.candidates}
    return [i for i, d in decided.items() if d == "injected"], decided


@pytest.mark.parametrize(("query", "agent", "want"), README)
def test_readme_examples_inject_their_guide(
    recallers: Any, query: str, agent: str, want: str
) -> None:
    injected, decided = _injected(recallers(agent), query)
    assert want in injected, f"{query!r}: {want} was {decided.get(want, 'not a candidate')}"


def test_every_guide_keyword_line_injects_its_guide(recallers: Any) -> None:
    cases = _keyword_requests()
    assert len(cases) > 40  # every template guide, in both languages where it has them
    missed = []
    for query, agent, want in cases:
        injected, decided = _injected(recallers(agent), query)
        if want not in injected:
            missed.append(f"{agent} {query!r}: {want} {decided.get(want, 'not a candidate')}")
    assert not missed, "\n".join(missed)
