"""The statistics and the Markdown of an ``olav bench steer`` report (olav.bench.steer)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MODES = ("on", "off")  # memory (AutoRecall) on / off

Rows = dict[str, list[dict[str, Any]]]  # mode: the results of its runs


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def stats(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    secs = [r["seconds"] for r in rows]
    return {
        "runs": n,
        "tool_called": round(sum(r["tool_called"] for r in rows) / n, 3),
        "tool_calls_mean": round(sum(r["tool_calls"] for r in rows) / n, 2),
        "artifact": round(sum(r["artifact"] for r in rows) / n, 3),
        "seconds_mean": round(sum(secs) / n, 2),
        "seconds_p95": round(_p95(secs), 2),
        "errors": sum(r["status"] == "error" for r in rows),
        # the rescue layer (olav.runtime.rescue): runs with a call salvaged from text, and
        # runs nudged after a narrated action (older reports lack them)
        "salvaged": round(sum(bool(r.get("salvaged")) for r in rows) / n, 3),
        "nudged": round(sum(bool(r.get("nudged")) for r in rows) / n, 3),
        "outcomes": _counts(str(r.get("outcome") or r["status"]) for r in rows),
    }


def _counts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _outcomes(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def summary_line(summary: dict[str, Any]) -> str:
    on, off = summary["on"], summary["off"]
    return (
        f"memory on: tool called {pct(on['tool_called'])}, artifact {pct(on['artifact'])}, "
        f"{on['seconds_mean']:.1f}s mean; memory off: tool called {pct(off['tool_called'])}, "
        f"artifact {pct(off['artifact'])}, {off['seconds_mean']:.1f}s mean; memory adds "
        f"{summary['tool_called_delta'] * 100:+.0f} pp tool calls, "
        f"{summary['artifact_delta'] * 100:+.0f} pp artifacts"
    )


def summarize(everything: Rows) -> dict[str, Any]:
    """Every scenario's runs together, per mode; what memory adds; the summary line."""
    summary: dict[str, Any] = {m: stats(everything[m]) for m in MODES}
    for key in ("tool_called", "artifact"):
        summary[f"{key}_delta"] = round(summary["on"][key] - summary["off"][key], 3)
    summary["line"] = summary_line(summary)
    return summary


def scenario_blocks(scenarios: Sequence[Any], rows: dict[str, Rows]) -> list[dict[str, Any]]:
    """Each scenario with its statistics and results per mode."""
    return [
        {
            **s.model_dump(),
            **{m: {**stats(rows[s.id][m]), "results": rows[s.id][m]} for m in MODES},
        }
        for s in scenarios
    ]


def markdown_steer(report: dict[str, Any]) -> str:
    """The report as a Markdown section for docs/benchmarks.md."""
    head = (
        "| scenario | agent | memory | tool called | tool calls | artifact | salvaged | nudged "
        "| outcomes | mean s | p95 s | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [
        "### Steering: memory on vs off (`olav bench steer`)",
        "",
        f"Model {', '.join(report['models'])} ({report['provider']}), {report['runs']} runs "
        "per scenario and mode; each run in a throwaway copy of the workspace.",
        "",
        head,
    ]
    for s in report["scenarios"]:
        for mode in MODES:
            m = s[mode]
            lines.append(
                f"| {s['id']} | {s['agent']} | {mode} | {pct(m['tool_called'])} "
                f"| {m['tool_calls_mean']:.2f} | {pct(m['artifact'])} "
                f"| {pct(m.get('salvaged', 0))} | {pct(m.get('nudged', 0))} "
                f"| {_outcomes(m.get('outcomes') or {})} | {m['seconds_mean']:.1f} "
                f"| {m['seconds_p95']:.1f} | {m['errors']} |"
            )
    lines += ["", f"Summary: {report['summary']['line']}.", ""]
    return "\n".join(lines)
