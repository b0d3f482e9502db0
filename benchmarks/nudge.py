"""When the rescue layer asks again (the nudge): on narrations (the tool-call corpora's
``narration`` cases, raw model outputs that announce an action instead of calling the tool) and on
plain answers (``benchmarks/data/nudge/plain*.jsonl``: "Noted.", summaries, explanations, questions
back, to requests that sound like actions). Each set has a held-out half that was not looked at
while the rule was written. The earlier rule (the request asks for an action and is not a question)
is measured beside it on the same cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from olav.bench.toolcalls import heldout_corpus, shipped_corpus
from olav.runtime.outcome import asks_for_action, is_question, narrates
from olav.runtime.rescue.think import split_reasoning

DATA = Path(__file__).parent / "data"  # the plain answers; the narrations ship with olav
# the tools of the template workspace, offered with every plain answer
OFFERED = (
    "backup_device_config",
    "take_snapshot",
    "format_and_export",
    "db_query",
    "list_devices",
    "propose_memory_draft",
    "memory_stats",
)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _answer(raw: str) -> str:
    return split_reasoning(raw)[0]


def _row(narrations: list[dict[str, Any]], plain: list[dict[str, Any]]) -> dict[str, Any]:
    caught = sum(
        narrates(_answer(c["raw_text"]), [t["name"] for t in c.get("tools", [])])
        for c in narrations
    )
    false = [p["id"] for p in plain if narrates(p["answer"], OFFERED)]
    earlier_caught = sum(
        asks_for_action(c["request"]) and not is_question(c["request"]) for c in narrations
    )
    earlier_false = sum(
        asks_for_action(p["request"]) and not is_question(p["request"]) for p in plain
    )
    return {
        "narrations": len(narrations),
        "nudged": caught,
        "plain": len(plain),
        "plain_nudged": len(false),
        "plain_nudged_ids": false,
        "earlier_nudged": earlier_caught,
        "earlier_plain_nudged": earlier_false,
    }


def run_nudge_bench() -> dict[str, Any]:
    def narrations(path: Path) -> list[dict[str, Any]]:
        return [c for c in _lines(path) if c["kind"] == "narration"]

    return {
        "corpus": _row(narrations(shipped_corpus()), _lines(DATA / "nudge" / "plain.jsonl")),
        "heldout": _row(
            narrations(heldout_corpus()), _lines(DATA / "nudge" / "plain_heldout.jsonl")
        ),
    }


def markdown_nudge(r: dict[str, Any]) -> str:
    lines = [
        "| set | narrations asked again | plain answers asked again | earlier rule: narrations "
        "| earlier rule: plain answers |",
        "|---|---|---|---|---|",
    ]
    for name in ("corpus", "heldout"):
        x = r[name]
        lines.append(
            f"| {name} | {x['nudged']}/{x['narrations']} | {x['plain_nudged']}/{x['plain']} | "
            f"{x['earlier_nudged']}/{x['narrations']} | {x['earlier_plain_nudged']}/{x['plain']} |"
        )
    lines += [
        "",
        "The earlier rule is the request alone (it asks for an action and is not a question); "
        "in a run it also fired when a recalled guide named a tool, so on plain answers it "
        "asked again at least this often.",
        "",
    ]
    return "\n".join(lines)
