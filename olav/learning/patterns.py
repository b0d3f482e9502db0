"""L2 pattern extraction: groups of operational events become expert_knowledge.

Never in the hot path: run on demand (``olav kb extract-patterns``, ``python -m
olav.learning.patterns``) or by cron. Each group of at least ``min_samples`` events of one tool
in one scope, inside the window, costs exactly one model call. The pattern's id is stable per
scope and tool, so a re-run updates it instead of adding another.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from olav.core.errors import OlavError
from olav.llm.answers import ParseError, ask_model, extract_json
from olav.memory.store.filters import Order, SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE, scoped_id
from olav.memory.store.table import MemoryStore
from olav.memory.store.timeq import Period

OLDEST = Order((("created", "asc"), ("id", "asc")))  # the events in the order they happened

PROMPT = """Below are {n} successful calls of the tool `{tool}` made by the `{agent}` agent.
Abstract them into ONE reusable pattern so that the next call is right the first time.
Answer with a JSON object and nothing else:
{{"summary": "one sentence: when and how to call {tool}",
 "required_args": ["arguments every call had"],
 "naming_conventions": ["naming rules you can see in the values"],
 "auth_pattern": "how credentials are passed (never a secret value), or empty",
 "variations": ["what differs between calls and how to choose it"]}}

Calls:
{examples}
"""


@dataclass
class PatternResult:
    scope: str
    agent: str
    tool: str
    samples: int
    memory_id: str = ""
    written: bool = False
    error: str = ""
    pattern: dict[str, Any] = field(default_factory=dict)


def group_events(
    store: MemoryStore, *, scope: str | None, window_days: int
) -> dict[tuple[str, str, str], list[MemoryRecord]]:
    since = datetime.now(UTC) - timedelta(days=window_days)
    # every operator's events, grouped by scope: an operator's own events (their user: scope)
    # make a pattern of theirs alone, in that scope
    events = SearchFilter(
        reader=EVERYONE,
        categories=["operational_event"],
        scopes=[scope] if scope else None,
        created=Period(start=since),
        include_invalid=True,  # expired events still count; retired ones do not (below)
    )
    groups: dict[tuple[str, str, str], list[MemoryRecord]] = {}
    for rec in store.rows(events, order=OLDEST):
        if rec.invalidated_at is not None:
            continue
        tool = str(rec.metadata.get("tool") or "")
        agent = str(rec.metadata.get("agent") or rec.scope)
        if tool:
            groups.setdefault((rec.scope, agent, tool), []).append(rec)
    return groups


def validate_pattern(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ParseError("the model's pattern is not a JSON object")
    summary = str(data.get("summary") or "").strip()
    if len(summary) < 10:
        raise ParseError(
            "the model's pattern has no usable summary",
            hint="Retry, or use a larger model for extraction",
        )
    out: dict[str, Any] = {"summary": summary}
    for key in ("required_args", "naming_conventions", "variations"):
        val = data.get(key) or []
        out[key] = [str(v) for v in val] if isinstance(val, list) else [str(val)]
    out["auth_pattern"] = str(data.get("auth_pattern") or "")
    return out


def render_pattern(tool: str, pattern: dict[str, Any], samples: int) -> str:
    lines = [f"Pattern for {tool} (from {samples} successful calls): {pattern['summary']}"]
    if pattern["required_args"]:
        lines.append("Required arguments: " + ", ".join(pattern["required_args"]))
    for rule in pattern["naming_conventions"]:
        lines.append(f"Naming: {rule}")
    if pattern["auth_pattern"]:
        lines.append(f"Auth: {pattern['auth_pattern']}")
    for var in pattern["variations"]:
        lines.append(f"Varies: {var}")
    return "\n".join(lines)


def extract_patterns(
    store: MemoryStore,
    model: Any,
    *,
    scope: str | None = None,
    min_samples: int = 5,
    window_days: int = 30,
    dry_run: bool = False,
) -> list[PatternResult]:
    results = []
    for (sc, agent, tool), events in sorted(
        group_events(store, scope=scope, window_days=window_days).items()
    ):
        # stable per scope, agent and tool, so a re-run updates it
        memory_id = scoped_id(f"pattern_{agent}_{tool}", sc)
        res = PatternResult(
            scope=sc, agent=agent, tool=tool, samples=len(events), memory_id=memory_id
        )
        results.append(res)
        if len(events) < min_samples or dry_run:
            continue
        examples = "\n".join(f"- {e.text}" for e in events[:20])
        try:
            answer = ask_model(
                model, PROMPT.format(n=len(events), tool=tool, agent=agent, examples=examples)
            )
            res.pattern = validate_pattern(extract_json(answer))
        except OlavError as exc:
            res.error = exc.one_line()
            continue
        store.upsert(
            [
                MemoryRecord(
                    id=res.memory_id,
                    text=render_pattern(tool, res.pattern, len(events)),
                    category="expert_knowledge",
                    scope=sc,
                    origin="agent",
                    confidence=round(min(0.95, 0.5 + 0.05 * len(events)), 3),
                    tags=[tool],
                    metadata={
                        "tool": tool,
                        "samples": len(events),
                        "pattern": res.pattern,
                        "source_ids": [e.id for e in events][:50],
                        "body": render_pattern(tool, res.pattern, len(events)),
                    },
                )
            ]
        )
        res.written = True
    return results


def run_extract_patterns(ws: Any) -> str:
    """The `extract-patterns` cron job."""
    from olav.llm.models import workspace_chat_model

    store = MemoryStore.for_workspace(ws)
    results = extract_patterns(store, workspace_chat_model(ws))
    errors = [r for r in results if r.error]
    return f"{sum(r.written for r in results)} patterns written, {len(errors)} rejected"


def main(argv: list[str] | None = None) -> int:
    """``python -m olav.learning.patterns`` — the same as ``olav kb extract-patterns``."""
    from olav.core.config import Workspace
    from olav.llm.models import workspace_chat_model

    parser = argparse.ArgumentParser(prog="python -m olav.learning.patterns")
    parser.add_argument("--scope")
    parser.add_argument("--min-samples", type=int, default=5)
    parser.add_argument("--window-days", type=int, default=30)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    try:
        ws = Workspace.open()
        store = MemoryStore.for_workspace(ws)
        results = extract_patterns(
            store,
            workspace_chat_model(ws),
            scope=args.scope,
            min_samples=args.min_samples,
            window_days=args.window_days,
            dry_run=args.dry_run,
        )
    except OlavError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 1
    for r in results:
        print(
            json.dumps(
                {
                    "scope": r.scope,
                    "tool": r.tool,
                    "samples": r.samples,
                    "written": r.written,
                    "error": r.error,
                },
                ensure_ascii=False,
            )
        )
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
