"""``olav bench toolcalls``: how well the rescue layer salvages tool calls written as text.

A corpus is JSONL, one case a line: ``{"id", "kind": "call"|"negative"|"narration",
"family"?, "request"?, "raw_text", "tools": [{"name", "description", "parameters"}],
"expect": [{"name", "arguments"}], "source"?}``. Every case runs through
:func:`olav.runtime.rescue.salvage`, the code the agent runs.

Per format family the report gives, for call cases: **exact** (the same calls, names and
arguments equal after the schema's repair), **wrong** (calls, not those) and **missed** (no
call); for negatives and narrations: **executions** (cases where anything would run). Parse
time is timed per case (p50, p95), and for a 4 KB message apart; the fast path, a message that
has structured calls, never reaches the parser (the middleware checks ``tool_calls`` first).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError

KINDS = ("call", "negative", "narration")
TARGET_EXACT = 0.97
TARGET_P95_4KB_MS = 0.5
CORPUS = "corpus.jsonl"  # olav/bench/data/toolcalls/


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    family: str
    request: str
    raw_text: str
    tools: dict[str, dict[str, Any]]
    expect: list[dict[str, Any]]
    source: str = ""


def shipped_corpus() -> Path:
    """The project's own corpus (installed with the package)."""
    return Path(str(resources.files("olav.bench") / "data" / "toolcalls" / CORPUS))


def heldout_corpus() -> Path:
    """98 cases written after the parser, from sources the corpus does not use, by someone
    who did not read the parser: the out-of-sample check of the corpus's numbers."""
    return Path(str(resources.files("olav.bench") / "data" / "toolcalls" / "heldout.jsonl"))


def load_cases(path: Path) -> list[Case]:
    """The cases of a JSONL corpus; a bad line is a one-line error naming it."""
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Give a JSONL corpus file")
    cases: list[Case] = []
    seen: set[str] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        case = _case(path, n, line)
        if case.id in seen:
            raise OlavError(f"{path}:{n}: id {case.id!r} is used twice", hint="Give ids once")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise OlavError(f"{path} has no cases", hint="One JSON object a line")
    return cases


def _case(path: Path, n: int, line: str) -> Case:
    where = f"{path}:{n}"
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise OlavError(f"{where}: not JSON ({exc.msg})", hint="One JSON object a line") from None
    if not isinstance(raw, dict):
        raise OlavError(f"{where}: expected a JSON object", hint="One JSON object a line")
    for key in ("id", "kind", "raw_text", "tools"):
        if key not in raw:
            raise OlavError(f"{where}: field {key!r} is missing", hint="See docs/cli.md")
    if raw["kind"] not in KINDS:
        raise OlavError(
            f"{where}: kind {raw['kind']!r} is not one of {', '.join(KINDS)}",
            hint="Fix the kind",
        )
    tools: dict[str, dict[str, Any]] = {}
    for tool in raw["tools"]:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise OlavError(f"{where}: every tool needs a name", hint="See docs/cli.md")
        tools[tool["name"]] = tool.get("parameters") or {"type": "object", "properties": {}}
    expect = raw.get("expect") or []
    if raw["kind"] != "call" and expect:
        raise OlavError(f"{where}: a {raw['kind']} expects no calls", hint="Use expect: []")
    if raw["kind"] == "call" and not expect:
        raise OlavError(f"{where}: a call case needs expect", hint="List the calls to run")
    return Case(
        id=str(raw["id"]),
        kind=raw["kind"],
        family=str(raw.get("family") or "unknown"),
        request=str(raw.get("request") or ""),
        raw_text=str(raw["raw_text"]),
        tools=tools,
        expect=[{"name": e["name"], "arguments": e.get("arguments") or {}} for e in expect],
        source=str(raw.get("source") or ""),
    )


@dataclass
class _Family:
    calls: int = 0
    exact: int = 0
    wrong: int = 0
    missed: int = 0
    negatives: int = 0
    executions: int = 0
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "exact": self.exact,
            "wrong": self.wrong,
            "missed": self.missed,
            "exact_rate": round(self.exact / self.calls, 4) if self.calls else None,
            "negatives": self.negatives,
            "executions": self.executions,
            "failures": self.failures,
        }


def _normalised(calls: Iterable[dict[str, Any]], tools: dict[str, dict[str, Any]]) -> list[str]:
    """Calls as comparable strings, arguments repaired by the schema (so ``9000`` and
    ``"9000"`` for an integer field compare equal), in order."""
    from olav.runtime.rescue import coerce

    out = []
    for c in calls:
        args = c.get("arguments") or {}
        schema = tools.get(c["name"])
        if schema is not None:
            checked = coerce(args, schema)
            args = checked.args if checked.ok else args
        out.append(c["name"] + json.dumps(args, sort_keys=True, ensure_ascii=False))
    return out


def _timed(case: Case, repeat: int, grammars: bool = True) -> tuple[list[dict[str, Any]], float]:
    from olav.runtime.rescue import salvage

    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = salvage(case.raw_text, case.tools, request=case.request, grammars=grammars)
        best = min(best, time.perf_counter() - t0)
    assert result is not None
    calls = [{"name": c.name, "arguments": c.args, "family": c.family} for c in result.calls]
    return calls, best * 1000


def run_toolcalls(cases: list[Case], *, repeat: int = 5, grammars: bool = True) -> dict[str, Any]:
    """The report (see the module docstring); JSON-safe. ``grammars=False``: the
    schema-driven reader alone, every family grammar off."""
    families: dict[str, _Family] = {}
    per_case: list[dict[str, Any]] = []
    times: list[float] = []
    for case in cases:
        calls, ms = _timed(case, repeat, grammars)
        times.append(ms)
        per_case.append({"id": case.id, "calls": calls})
        fam = families.setdefault(case.family, _Family())
        if case.kind == "call":
            fam.calls += 1
            got = _normalised(calls, case.tools)
            if got == _normalised(case.expect, case.tools):
                fam.exact += 1
            elif calls:
                fam.wrong += 1
                fam.failures.append(case.id)
            else:
                fam.missed += 1
                fam.failures.append(case.id)
        else:
            fam.negatives += 1
            if calls:
                fam.executions += 1
                fam.failures.append(case.id)
    total = _Family()
    for fam in families.values():
        for key in ("calls", "exact", "wrong", "missed", "negatives", "executions"):
            setattr(total, key, getattr(total, key) + getattr(fam, key))
    big = parse_4kb(repeat=max(repeat, 50))
    by_kind = {k: sum(c.kind == k for c in cases) for k in KINDS}
    report = {
        "benchmark": "toolcalls",
        "cases": len(cases),
        "by_kind": by_kind,
        "families": {name: families[name].as_dict() for name in sorted(families)},
        "total": total.as_dict(),
        "parse_ms": {"p50": _pct(times, 0.5), "p95": _pct(times, 0.95), "max": max(times)},
        "parse_4kb_ms": big,
        "targets": {
            "exact": TARGET_EXACT,
            "executions_on_negatives": 0,
            "parse_4kb_p95_ms": TARGET_P95_4KB_MS,
        },
        "per_case": per_case,
    }
    report["met"] = {
        "exact": (total.exact / total.calls if total.calls else 0) >= TARGET_EXACT,
        "executions_on_negatives": total.executions == 0,
        "parse_4kb_p95_ms": big["p95"] <= TARGET_P95_4KB_MS,
    }
    return report


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)


# 4 KB messages: an answer with no call (the common case), a Hermes call carrying a long
# document, and a long answer with a fenced script (a negative)
_PROSE = (
    "The border routers in sh1 peer with two upstreams. BGP sessions are stable; the last "
    "flap was on Tuesday and lasted forty seconds. Interface errors stay below the alarm. "
)


def _four_kb() -> dict[str, str]:
    prose = (_PROSE * 30)[:4096]
    doc = json.dumps(
        {
            "name": "format_and_export",
            "arguments": {"data": prose[:3900], "format": "md", "filename": "sh1.md"},
        }
    )
    script = "```python\n" + ("print('backing up sh1-border01')\n" * 110)[:3900] + "```\n"
    return {
        "answer": prose,
        "hermes": f"I will export it now.\n<tool_call>\n{doc}\n</tool_call>",
        "script": "Here is the script:\n" + script,
    }


def parse_4kb(*, repeat: int = 50) -> dict[str, Any]:
    """Parse time of 4 KB messages (best of ``repeat`` each, in milliseconds): p95 over the
    kinds, and each kind's time."""
    from olav.runtime.rescue import salvage

    tools = {
        "format_and_export": {
            "type": "object",
            "properties": {
                "data": {"type": "string"},
                "format": {"type": "string", "enum": ["md", "json", "csv", "html", "txt"]},
                "filename": {"type": "string"},
            },
            "required": ["data", "format", "filename"],
        }
    }
    kinds: dict[str, float] = {}
    samples: list[float] = []
    for name, text in _four_kb().items():
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            salvage(text, tools, request="save the sh1 summary")
            runs.append((time.perf_counter() - t0) * 1000)
        samples.extend(runs)
        kinds[name] = round(statistics.median(runs), 4)
    return {"p95": _pct(samples, 0.95), "p50": _pct(samples, 0.5), "by_message": kinds}


def markdown_toolcalls(report: dict[str, Any]) -> str:
    """The report as a Markdown section for docs/benchmarks.md."""
    t = report["total"]
    rate = t["exact"] / t["calls"] if t["calls"] else 0.0
    big = report["parse_4kb_ms"]
    lines = [
        f"{report['cases']} cases ({report['by_kind']['call']} calls, "
        f"{report['by_kind']['negative']} negatives, {report['by_kind']['narration']} "
        f"narrations) in {len(report['families'])} format families.",
        "",
        "| family | call cases | exact | wrong | missed | negatives | executions |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in report["families"].items():
        lines.append(
            f"| {name} | {f['calls']} | {f['exact']} | {f['wrong']} | {f['missed']} "
            f"| {f['negatives']} | {f['executions']} |"
        )
    lines.append(
        f"| **all** | {t['calls']} | {t['exact']} | {t['wrong']} | {t['missed']} "
        f"| {t['negatives']} | {t['executions']} |"
    )
    met = report["met"]
    lines += [
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| exact on call cases ≥ {TARGET_EXACT:.0%} | {rate:.1%} | {_yes(met['exact'])} |",
        f"| executions on negatives = 0 | {t['executions']} "
        f"| {_yes(met['executions_on_negatives'])} |",
        f"| parse p95 of a 4 KB message ≤ {TARGET_P95_4KB_MS} ms | {big['p95']:.3f} ms "
        f"| {_yes(met['parse_4kb_p95_ms'])} |",
        "",
        f"Parse time per corpus case: p50 {report['parse_ms']['p50']:.3f} ms, p95 "
        f"{report['parse_ms']['p95']:.3f} ms. 4 KB messages (median): "
        + ", ".join(f"{k} {v:.3f} ms" for k, v in big["by_message"].items())
        + ". A message with structured tool calls is never parsed.",
        "",
    ]
    failures = [i for f in report["families"].values() for i in f["failures"]]
    if failures:
        lines += ["Cases not right: " + ", ".join(failures) + ".", ""]
    return "\n".join(lines)


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"
