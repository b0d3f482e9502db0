"""``olav memory calibrate``: floors for an embedder olav ships none for, measured on the golden
suite through the real Ollama client, saved per embedder, used by AutoRecall and doctor."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from olav.admin.doctor import check_relevance
from olav.core.config import Workspace
from olav.memory.golden.block import margin_scale, scaled
from olav.memory.policy import Floors
from olav.memory.recall import calibration
from tests.helpers import olav_entry, workspace_from_template, write_config
from tests.stubs.ollama_stub import StubState, ollama_stub

pytestmark = pytest.mark.slow  # a module of 10 s or more: scheduled first (conftest.py)

CONFIG = """\
embedder:
  provider: ollama
  model: {model}
  base_url: {url}
llm:
  base_url: http://127.0.0.1:9
"""


@pytest.fixture
def stub_ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A workspace whose embedder is "bge-m3" served by the Ollama stub (nobody calibrated it)."""
    with ollama_stub(StubState(models={"bge-m3": 32, "other-embed": 32})) as (url, _):
        # what olav init makes with this embedder (the template's: the stub's bge-m3)
        root = workspace_from_template(
            tmp_path / "ws", "ollama", CONFIG.format(model="bge-m3", url=url)
        )
        monkeypatch.chdir(root)
        yield root, url


def _relevance(root: Path) -> Any:
    ws = Workspace.open(root)
    name = f"ollama:{ws.config['embedder.model']}"
    return calibration.relevance_floors(ws.config, name, ws.databases), ws, name


def test_calibrate_measures_saves_and_recall_uses_the_floors(
    stub_ws: tuple[Path, str], olav: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import olav.memory.golden.ceiling as golden_ceiling

    small = {"directive": (0.0, 0.03), "directive_words": (0.01,), "specific": (-0.02,)}
    small |= {"spread": (0.005,), "lesson": (0.04,), "lesson_words": (0.04,)}
    monkeypatch.setattr(golden_ceiling, "GRID", small)  # the full grid takes a minute
    root, url = stub_ws
    floors, ws, name = _relevance(root)
    assert floors is None  # uncalibrated: relevance is off, doctor says what to run
    check = check_relevance(ws.config, name, ws.databases)
    assert check.status == "warn" and "olav memory calibrate" in check.fix

    res = olav("memory", "calibrate", "--ceiling", input="n\n")
    assert res.exit_code == 0, res.output
    assert "with these floors" in res.output and "Nothing saved" in res.output
    assert "what any floors could reach" in res.output and "most targets met" in res.output
    assert not (ws.databases / calibration.WORKSPACE_FILE).exists()

    res = olav("memory", "calibrate", "--yes")
    assert res.exit_code == 0, res.output
    saved = json.loads((ws.databases / calibration.WORKSPACE_FILE).read_text())
    # kept under the embedder and the second opinion on lessons: they were measured together
    key = "ollama:bge-m3+use-m3"
    assert list(saved["embedders"]) == [key]
    assert saved["embedders"][key]["measured"]["expect"] is not None
    floors, ws, name = _relevance(root)
    assert floors == Floors(**saved["embedders"][f"{name}+use-m3"]["floors"])
    off = {**ws.config.values, "memory.second_opinion": "off"}
    assert calibration.relevance_floors(off, name, ws.databases) is None
    check = check_relevance(ws.config, name, ws.databases)
    assert check.status == "ok" and "olav memory calibrate" in check.detail

    # AutoRecall decides relevance now: every candidate has a margin and a reason
    res = olav("memory", "why", "tell me a joke about cats", "--json")
    assert res.exit_code == 0, res.output
    cands = json.loads(res.output)["candidates"]
    assert cands and all(c["margin"] is not None and "margin" in c["reason"] for c in cands)

    # another embedder inherits nothing
    write_config(root, CONFIG.format(model="other-embed", url=url))
    assert _relevance(root)[0] is None

    write_config(root, CONFIG.format(model="bge-m3", url=url))
    res = olav("memory", "calibrate", "--forget")
    assert res.exit_code == 0 and "dropped" in res.output
    assert _relevance(root)[0] is None


def test_an_unreadable_calibration_never_fails_recall(stub_ws: tuple[Path, str], olav: Any) -> None:
    root, _ = stub_ws
    ws = Workspace.open(root)
    (ws.databases / calibration.WORKSPACE_FILE).write_text("{not json")
    assert _relevance(root)[0] is None  # recall goes on with relevance off
    res = olav("memory", "why", "restart nginx", "--json")
    assert res.exit_code == 0, res.output
    check = check_relevance(ws.config, "ollama:bge-m3", ws.databases)
    assert check.status == "fail"
    assert calibration.WORKSPACE_FILE in check.detail and "olav memory calibrate" in check.fix


def test_calibrate_with_the_embedder_down_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_config(root, CONFIG.format(model="bge-m3", url="http://127.0.0.1:9"))
    res = olav_entry(root, "memory", "calibrate", "--yes")
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert "127.0.0.1:9" in lines[0] and "Traceback" not in res.stderr
    assert not (root / ".olav" / "databases" / calibration.WORKSPACE_FILE).exists()


def test_the_grid_follows_the_embedders_scale() -> None:
    """An embedder whose margins spread twice as wide gets floors twice as far apart."""
    from olav.memory.golden.block import GRID, Recalled, calibrate
    from olav.memory.golden.dataset import GoldenQuery, split_of
    from olav.memory.recall.recaller import Candidate
    from olav.memory.recall.relevance import Signals
    from olav.memory.store.schema import MemoryRecord
    from olav.memory.store.table import Hit

    def rows(factor: float) -> list[Recalled]:
        def cand(rid: str, margin: float) -> Candidate:
            rec = MemoryRecord(id=rid, text=rid, category="usage_guide", scope="ops")
            sig = Signals(margin=margin * factor)
            return Candidate(Hit(rec, 0.1, distance=0.3), tokens=10, signals=sig)

        out = []
        ids = [f"id{n}" for n in range(60) if split_of(f"id{n}") == "cal"]
        for i in range(12):
            q = GoldenQuery(f"q{i}", id=ids[i], expect=("g1",) if i % 2 else ())
            q = dataclasses.replace(q, negative=not q.expect)
            top = 0.045 if q.expect else 0.012
            cands = [cand("g1", top), *(cand(f"n{j}", -0.01 * j) for j in range(1, 5))]
            out.append(Recalled(q, cands, True))
        return out

    one, two = rows(1.0), rows(2.0)
    assert margin_scale(two) == pytest.approx(2 * margin_scale(one))
    start = Floors(0.06, 0.06, 0.06, 0.06, 0.06, 1.0)
    f1 = calibrate(one, start, 1000, scaled(GRID, 1.0))
    f2 = calibrate(two, Floors(**scaled(dataclasses.asdict(start), 2.0)), 1000, scaled(GRID, 2.0))
    assert f2.directive == pytest.approx(2 * f1.directive)
    assert 0.012 < f1.directive <= 0.045
