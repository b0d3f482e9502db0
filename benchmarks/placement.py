"""``python -m benchmarks placement --base-url URL --workspace WS``: where the block goes.

The questions of ``olav/bench/data/steer/guide_answers.yaml`` each have an answer that only a
guide of a fresh workspace holds. For each one, recall builds the block the product would
inject (the workspace's own recaller, embedder and decision, as a dry run), and the engine is
asked four ways, everything else the same (olav's rules as the system prompt, temperature 0):

- ``none``: no block (memory off);
- ``request``: the block in the person's message, before the request (what AutoRecall does);
- ``system``: the block at the end of the system prompt;
- ``end``: the block in the person's message, after the request.

Reported per placement: right answers (any expected answer in the reply, case aside), and how
many blocks held the answer at all (recall's part, the same for every placement).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

PLACEMENTS = ("none", "request", "system", "end")
QUESTIONS = (
    Path(__file__).resolve().parents[1] / "olav" / "bench" / "data" / "steer" / "guide_answers.yaml"
)


def _messages(rules: str, block: str, question: str, where: str) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    system, human = rules, question
    if block and where == "request":
        human = f"{block}\n\n{question}"
    elif block and where == "system":
        system = f"{rules}\n\n{block}"
    elif block and where == "end":
        human = f"{question}\n\n{block}"
    return [SystemMessage(content=system), HumanMessage(content=human)]


def run_placement(base_url: str, workspace: Path, model: str = "smollm2") -> dict[str, Any]:
    from olav.bench.steer import answered, load_scenarios
    from olav.core.config import Config, Workspace
    from olav.llm.models import make_chat_model
    from olav.llm.tiers import model_tier
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.table import MemoryStore
    from olav.runtime.builder import RULES

    ws = Workspace.open(workspace)
    store = MemoryStore.for_workspace(ws)
    values = {**ws.config.values, "llm.provider": "openai", "llm.base_url": base_url}
    values |= {"llm.model": model, "llm.temperature": 0.0, "llm.num_predict": 96}
    config = Config(values=values, agents={})
    chat = make_chat_model(config)
    tier = model_tier(model, str(ws.config["llm.tier"]))
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for s in load_scenarios(QUESTIONS):
        expected = list(s.expect_answer or [])
        rec = Recaller.for_config(store, ws.config, agent=s.agent, tier=tier)
        block = rec.recall(s.prompt, dry_run=True).block
        row: dict[str, Any] = {
            "id": s.id,
            "block": bool(block),
            "in_block": answered(block, expected),
        }
        for where in PLACEMENTS:
            took = time.perf_counter()
            reply = chat.invoke(_messages(RULES, block, s.prompt, where))
            answer = str(reply.content)
            row[where] = {
                "right": bool(answered(answer, expected)),
                "seconds": round(time.perf_counter() - took, 2),
                "answer": " ".join(answer.split())[:160],
            }
        rows.append(row)
    n = len(rows)
    return {
        "benchmark": "placement",
        "model": model,
        "tier": tier,
        "questions": n,
        "blocks_with_answer": sum(r["in_block"] for r in rows),
        "right": {w: sum(r[w]["right"] for r in rows) for w in PLACEMENTS},
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
    }
