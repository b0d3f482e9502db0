"""``python -m benchmarks reask --base-url URL``: the constrained re-ask on a real engine.

Each case is a request, the tools on offer and a reply olav cannot read safely (a call cut
off, never closed, or with arguments the schema refuses). The re-ask goes through the
product's own code (:mod:`olav.runtime.rescue.reask`): the schema of the tool's call, the
constraint the engine takes (found once: ``json_schema``, else ``json_object`` with the
schema), the note to the model, and the check of what comes back against the tool's schema.
The chat model is olav's own (``olav.llm.models.make_chat_model``, provider ``openai``) pointed at
the engine. Reported: schema-valid calls of all re-asks, the right tool named, the
constraint used, and the added time (median, p95).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
BACKUP = {
    "type": "object",
    "properties": {"device": {"type": "string"}},
    "required": ["device"],
}
EXPORT = {
    "type": "object",
    "properties": {
        "data": {"type": "string"},
        "format": {"type": "string", "enum": ["md", "csv", "json"]},
        "filename": {"type": "string"},
    },
    "required": ["data", "format", "filename"],
}
PING = {
    "type": "object",
    "properties": {"host": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["host", "count"],
}
TOOLS = {"get_weather": WEATHER, "backup_device_config": BACKUP, "export": EXPORT, "ping": PING}

# (request, the tool the broken reply tried, the broken reply)
CASES = [
    ("what's the weather in {x}?", "get_weather",
     '<tool_call>{{"name": "get_weather", "arguments": {{"city": "{x}'),
    ("back up the running config of {x}", "backup_device_config",
     '{{"name": "backup_device_config", "arguments": {{"device": 7}}}}'),
    ("save the device list for {x} as markdown", "export",
     '[export(data="# {x}\\n- sh1-border01", format="md"'),
    ("ping {x} four times", "ping", '<function=ping>\n<parameter=host>\n{x}\n</parameter>\n<param'),
]  # fmt: skip
PLACES = ("Paris", "Berlin", "Tokyo", "sh1-border01", "sh2-core02", "Lima", "Oslo", "Cairo",
          "sh1-access03", "Quito", "Hanoi", "Perth")  # fmt: skip


def run_reask(base_url: str, model: str, repeat: int = 12) -> dict[str, Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    from olav.core.settings import SETTINGS
    from olav.llm.models import make_chat_model
    from olav.runtime.rescue import reask

    config: dict[str, Any] = {s.key: s.default for s in SETTINGS}
    config.update(
        {"llm.provider": "openai", "llm.base_url": base_url, "llm.model": model,
         "llm.num_predict": 256, "llm.temperature": 0.0}
    )  # fmt: skip
    llm = make_chat_model(config)
    rows: list[dict[str, Any]] = []
    for i in range(repeat):
        x = PLACES[i % len(PLACES)]
        for request, tool, broken in CASES:
            schema = reask.call_schema({tool: TOOLS[tool]})
            messages = [
                HumanMessage(content=request.format(x=x)),
                AIMessage(content=broken.format(x=x)),
                HumanMessage(content=reask.note("it was cut off or never closed")),
            ]
            how = reask.constraint(llm, schema)
            assert how is not None
            t0 = time.perf_counter()
            got: Any
            try:
                reply = llm.bind(**how[1]).invoke(messages)
            except Exception:  # the engine refused json_schema: what the product does next
                if how[0] == "json_schema":
                    reask.remember_refusal(llm)
                    how = reask.constraint(llm, schema)
                    assert how is not None
                t0 = time.perf_counter()
                reply = None
                try:
                    reply = llm.bind(**how[1]).invoke(messages)
                except Exception as exc:  # e.g. the answer ran to the token limit
                    got = f"{type(exc).__name__}"
            ms = (time.perf_counter() - t0) * 1000
            if reply is not None:
                got = reask.read_reply(str(reply.content or ""), {tool: TOOLS[tool]})
            bad = got if isinstance(got, str) else None
            rows.append({"tool": tool, "constraint": how[0], "ms": ms, "valid": bad is None,
                         "problem": bad})  # fmt: skip
    times = sorted(r["ms"] for r in rows)
    valid = sum(r["valid"] for r in rows)
    return {
        "benchmark": "reask",
        "engine": base_url,
        "model": model,
        "reasks": len(rows),
        "valid": valid,
        "valid_rate": round(valid / len(rows), 3),
        "constraints": sorted({r["constraint"] for r in rows}),
        "ms_median": round(statistics.median(times), 1),
        "ms_p95": round(times[int(0.95 * (len(times) - 1))], 1),
        "by_tool": {
            t: sum(r["valid"] for r in rows if r["tool"] == t)
            for t in sorted({r["tool"] for r in rows})
        },
        "problems": sorted({r["problem"] for r in rows if r["problem"]})[:5],
    }
