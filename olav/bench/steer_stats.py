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
        "tool_called": share(rows, "tool_called"),
        "tool_calls_mean": round(sum(r["tool_calls"] for r in rows) / n, 2),
        "artifact": share(rows, "artifact"),
        "answered": share(rows, "answered"),
        "seconds_mean": round(sum(secs) / n, 2),
        "seconds_p95": round(_p95(secs), 2),
        "errors": sum(r["status"] == "error" for r in rows),
        # the rescue layer (olav.runtime.rescue): runs with a call salvaged from text, and
        # runs nudged after a narrated action (older reports lack them)
        "salvaged": round(sum(bool(r.get("salvaged")) for r in rows) / n, 3),
        "nudged": round(sum(bool(r.get("nudged")) for r in rows) / n, 3),
        "outcomes": _counts(str(r.get("outcome") or r["status"]) for r in rows),
    }


def share(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """The share of runs where ``key`` held, among the runs it applies to (None: none)."""
    judged = [bool(r[key]) for r in rows if r.get(key) is not None]
    return round(sum(judged) / len(judged), 3) if judged else None


def _counts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _outcomes(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


_MEASURES = (("tool_called", "tool called", "tool calls"), ("artifact", "artifact", "artifacts"),
             ("answered", "answered", "right answers"))  # fmt: skip


def summary_line(summary: dict[str, Any]) -> str:
    parts = []
    for mode in MODES:
        m = summary[mode]
        said = [f"{name} {pct(m[key])}" for key, name, _ in _MEASURES if m.get(key) is not None]
        parts.append(f"memory {mode}: " + ", ".join([*said, f"{m['seconds_mean']:.1f}s mean"]))
    adds = [
        f"{summary[f'{key}_delta'] * 100:+.0f} pp {plural}"
        for key, _, plural in _MEASURES
        if summary.get(f"{key}_delta") is not None
    ]
    return "; ".join(parts) + ("; memory adds " + ", ".join(adds) if adds else "")


def summarize(everything: Rows) -> dict[str, Any]:
    """Every scenario's runs together, per mode; what memory adds; the summary line."""
    summary: dict[str, Any] = {m: stats(everything[m]) for m in MODES}
    for key, _, _ in _MEASURES:
        on, off = summary["on"].get(key), summary["off"].get(key)
        summary[f"{key}_delta"] = None if on is None or off is None else round(on - off, 3)
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
        "| scenario | agent | memory | tool called | tool calls | artifact | answered | salvaged "
        "| nudged | outcomes | mean s | p95 s | errors |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
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
                f"| {m['tool_calls_mean']:.2f} | {pct(m['artifact'])} | {pct(m.get('answered'))} "
                f"| {pct(m.get('salvaged', 0))} | {pct(m.get('nudged', 0))} "
                f"| {_outcomes(m.get('outcomes') or {})} | {m['seconds_mean']:.1f} "
                f"| {m['seconds_p95']:.1f} | {m['errors']} |"
            )
    lines += ["", f"Summary: {report['summary']['line']}.", ""]
    return "\n".join(lines)
