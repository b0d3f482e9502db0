"""``olav bench toolcalls --suite canitoolcall``: the rescue layer judged by CanIToolCall.

CanIToolCall (the ``canitoolcall`` package, Apache-2.0) is a neutral conformance suite for
tool-call parsers: raw outputs of open model families with provenance (engine test suites,
renders of each model's official chat template, public bug reports) and the parse a correct
parser must give. This module replays every fixture through the code the agent runs and
judges the result with the suite's own checks (:func:`canitoolcall.checks.run_checks`):

- **non-streaming**: :func:`olav.runtime.rescue.salvage` reads the message's text, as it
  does when the engine's parser left the call in ``content``; a fixture tagged
  ``truncated`` ends on the token limit (``finish_reason: length``);
- **streaming**: the same text cut into deltas by each of the suite's chunking strategies
  goes through :class:`olav.runtime.rescue.stream.StreamGuard`, and what the person sees is
  what the guard showed plus what the runner prints at the end of the message
  (:func:`olav.runtime.rescue.stream.unshown`); the calls are the final message's.

The suite cuts streams by token ids, and its tokenizers live on a model hub this project
does not reach. The deltas here are made of the same kind of units: every special token of
the family (its ``markers`` and anything written as a special token) is one unit, and the
text between them is cut into word pieces. The suite's grouping code
(:func:`canitoolcall.chunking.split`) then makes the ``one``, ``special``, ``token`` and
``rand:S:8`` streams from them; ``char:S`` (one character a delta, special tokens split)
is run too, as stress that no server sends.

A fixture whose family olav has no grammar for fails like any other: nothing is skipped.
A deterministic quarter of the fixtures (by a hash of the id) is the held-out part, kept
apart from the rest while the parser was worked on; the report gives both parts.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from olav.core.errors import OlavError

SUITE = "canitoolcall"
TARGET_EXACT = 0.97
TARGET_FAMILY = 0.90
TARGET_P95_4KB_MS = 0.5
# the engines' own parsers on the suite's published matrix (pass + soft pass / fixtures
# supported), for context: olav's parser runs after theirs have failed
PUBLISHED = {"vLLM 0.30.0": (354, 469), "llama.cpp": (324, 438), "Ollama": (234, 261)}
STRATEGIES = ("one", "special", "token", "rand:1:8", "rand:2:8", "rand:3:8", "rand:4:8", "rand:5:8")
STRESS = ("char:1", "char:2")  # not a server's deltas: reported apart, never in a status

# a special token written literally: <|x|>, <｜x｜>, [X_Y], <x|>, <|x>, and a tag of one
# of the families (the suite's markers name the rest)
_SPECIAL = re.compile(
    r"<\|[^<>|\s]{1,48}\|>|<｜[^<>｜]{1,48}｜>|</?｜DSML｜[^<>]{0,24}|\[/?[A-Z][A-Z_]{1,18}\]"
    r"|<[a-z_]{2,24}\|>|<\|[a-z_\"]{1,24}>"
)
_PIECE = re.compile(r" ?[^\W_]+|\s+|[^\w\s]|_", re.U)


def available() -> bool:
    try:
        import canitoolcall  # noqa: F401
    except ImportError:
        return False
    return True


def _require() -> None:
    if not available():
        raise OlavError(
            "the canitoolcall package is not installed",
            hint="pip install canitoolcall (it is one of olav's dev dependencies: make install)",
        )


def held_out(fixture_id: str) -> bool:
    """The held-out quarter: fixed by the id alone, so it never moves."""
    return hashlib.sha256(fixture_id.encode()).hexdigest()[0] in "0123"


def tool_schemas(tools: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """OpenAI-format tools as the rescue layer takes them: name to argument schema."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        fn = tool.get("function", tool)
        out[str(fn["name"])] = dict(fn.get("parameters") or {"type": "object", "properties": {}})
    return out


def units(text: str, markers: Sequence[str]) -> tuple[list[str], set[str]]:
    """``text`` cut into stream units, and which of them are special tokens."""
    marks = sorted({m for m in markers if m}, key=len, reverse=True)
    pattern = re.compile(
        "|".join([*(re.escape(m) for m in marks), _SPECIAL.pattern]) if marks else _SPECIAL.pattern
    )
    out: list[str] = []
    special: set[str] = set()
    pos = 0
    for m in pattern.finditer(text):
        out.extend(_PIECE.findall(text[pos : m.start()]))
        out.append(m.group())
        special.add(m.group())
        pos = m.end()
    out.extend(_PIECE.findall(text[pos:]))
    assert "".join(out) == text
    return out, special


def chunks(text: str, markers: Sequence[str], strategy: str) -> list[str]:
    """The deltas of ``text`` under one of the suite's strategy ids."""
    from canitoolcall.chunking import ChunkStrategy, split, split_text

    strat = ChunkStrategy.parse(strategy)
    if strat.kind == "char":
        return split_text(text, strat)
    pieces, special = units(text, markers)
    return ["".join(group) for group in split(pieces, strat, special)]


@dataclass(frozen=True)
class Parse:
    """What olav made of one output: the text shown, the reasoning kept apart, the calls."""

    content: str | None
    reasoning: str | None
    calls: tuple[tuple[str, str], ...]  # (name, arguments as JSON text)


def parse(
    text: str,
    tools: Mapping[str, dict[str, Any]],
    *,
    finished: bool = True,
    prompt: str = "",
    grammars: bool = True,
) -> Parse:
    """The non-streaming parse: the message's text through :func:`salvage` (with
    ``grammars=False``, the schema-driven reader alone)."""
    from olav.runtime.rescue import salvage

    got = salvage(text, tools, finished=finished, prompt=prompt, grammars=grammars)
    return Parse(
        got.answer or None,
        got.reasoning or None,
        tuple((c.name, json.dumps(c.args, ensure_ascii=False)) for c in got.calls),
    )


def parse_stream(
    deltas: Iterable[str],
    tools: Mapping[str, dict[str, Any]],
    *,
    finished: bool = True,
    prompt: str = "",
    grammars: bool = True,
) -> Parse:
    """The streaming parse: the deltas through the stream guard, the final message through
    :func:`salvage`; the content is what the person saw, as the runner prints it."""
    from olav.runtime.rescue import salvage
    from olav.runtime.rescue.stream import StreamGuard, unshown

    guard = StreamGuard(prompt=prompt)
    seen: list[str] = []
    whole: list[str] = []
    for delta in deltas:
        whole.append(delta)
        seen.append(guard.feed(delta))
    seen.append(guard.flush())
    got = salvage("".join(whole), tools, finished=finished, prompt=prompt, grammars=grammars)
    shown = "".join(seen)
    content = shown + unshown(shown, got.answer) if shown.strip() else got.answer
    return Parse(
        content.strip() or None,
        got.reasoning or None,
        tuple((c.name, json.dumps(c.args, ensure_ascii=False)) for c in got.calls),
    )


def _result(p: Parse) -> Any:
    from canitoolcall.results import ParsedToolCall, ParseResult

    return ParseResult(
        content=p.content,
        reasoning_content=p.reasoning,
        tool_calls=tuple(ParsedToolCall(n, a) for n, a in p.calls),
    )


def observe(fixture: Any, family: Any, *, stress: bool = True, grammars: bool = True) -> Any:
    """The suite's :class:`~canitoolcall.results.Observation` of one fixture by olav."""
    from canitoolcall.results import Observation

    tools = tool_schemas(fixture.tools)
    finished = not fixture.truncated
    markers = list(family.markers) if family is not None else []
    prompt = generation_prompt(fixture, family)
    streams = {
        s: _result(
            parse_stream(
                chunks(fixture.raw_output, markers, s),
                tools,
                finished=finished,
                prompt=prompt,
                grammars=grammars,
            )
        )
        for s in (*STRATEGIES, *(STRESS if stress else ()))
    }
    return Observation(
        nonstream=_result(
            parse(fixture.raw_output, tools, finished=finished, prompt=prompt, grammars=grammars)
        ),
        streams=streams,
        synthetic=frozenset(STRESS if stress else ()),
    )


def generation_prompt(fixture: Any, family: Any) -> str:
    """What the template appended before the model's output: the fixture's own, else its
    reference model's default (as the suite's adapters take it)."""
    if fixture.generation_prompt is not None:
        return str(fixture.generation_prompt)
    ref = family.reference_for(fixture.reference_model) if family is not None else None
    return str(getattr(ref, "default_generation_prompt", None) or "")


def _kind(fixture: Any) -> str:
    """``call`` (a call expected), ``error`` (truncated or malformed: no call may run) or
    ``text`` (a complete message with no call)."""
    if fixture.expected_error is not None:
        return "error"
    if fixture.expected is not None and fixture.expected.tool_calls:
        return "call"
    tags = set(fixture.tags)
    return "error" if tags & {"truncated", "malformed"} else "text"


def judge(fixture: Any, family: Any, *, grammars: bool = True) -> dict[str, Any]:
    """One fixture's verdict: the suite's status and the checks that did not pass."""
    from canitoolcall.checks import case_status, run_checks

    obs = observe(fixture, family, grammars=grammars)
    rows = run_checks(fixture, family, obs)
    status = case_status(rows, obs.synthetic)
    failed = sorted(
        {
            f"{r.check}@{r.strategy}"
            for r in rows
            if r.status.value in ("fail", "error") and r.strategy not in obs.synthetic
        }
    )
    stress_failed = sorted(
        {r.check for r in rows if r.status.value == "fail" and r.strategy in obs.synthetic}
    )
    expected_calls = len(fixture.expected.tool_calls) if fixture.expected is not None else 0
    ran = [tc.name for tc in obs.nonstream.tool_calls]
    kind = _kind(fixture)
    return {
        "id": fixture.id,
        "family": fixture.family,
        "kind": kind,
        "held_out": held_out(fixture.id),
        "status": status.value,
        "failed": failed,
        "stress_failed": stress_failed,
        # a call run where none (or fewer) may: the unsafe outcome
        "unsafe": bool(ran) and (kind != "call" or len(ran) > expected_calls),
        "leak": any(c.startswith("no_leakage") for c in failed),
        "stream_differs": any(
            c.startswith(("stream_equals_nonstream", "split_invariance")) for c in failed
        ),
    }


def fixtures(split: str = "all") -> tuple[list[Any], dict[str, Any]]:
    """The suite's fixtures (``all``, ``dev`` or ``held_out``) and its families."""
    _require()
    from canitoolcall.fixtures import load_families, load_fixtures

    every = load_fixtures()
    if split == "dev":
        every = [f for f in every if not held_out(f.id)]
    elif split == "held_out":
        every = [f for f in every if held_out(f.id)]
    elif split != "all":
        raise OlavError(f"unknown split {split!r}", hint="Use all, dev or held_out")
    return every, load_families()


def _tally(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    good = ("pass", "soft_pass")
    calls = [v for v in verdicts if v["kind"] == "call"]
    errors = [v for v in verdicts if v["kind"] == "error"]
    return {
        "fixtures": len(verdicts),
        "pass": sum(v["status"] == "pass" for v in verdicts),
        "soft_pass": sum(v["status"] == "soft_pass" for v in verdicts),
        "good": sum(v["status"] in good for v in verdicts),
        "calls": len(calls),
        "calls_exact": sum(v["status"] in good for v in calls),
        "errors": len(errors),
        "unsafe": sum(v["unsafe"] for v in verdicts),
        "leaks": sum(v["leak"] for v in verdicts),
        "stream_differs": sum(v["stream_differs"] for v in verdicts),
        "stress_differs": sum(bool(v["stress_failed"]) for v in verdicts),
    }


def run_suite(split: str = "all", *, grammars: bool = True) -> dict[str, Any]:
    """The report: per family and in all, for the dev and held-out parts and together.
    ``grammars=False``: the schema-driven reader alone, every family grammar off."""
    every, families = fixtures(split)
    t0 = time.perf_counter()
    verdicts = [judge(f, families.get(f.family), grammars=grammars) for f in every]
    elapsed = time.perf_counter() - t0
    from canitoolcall import __version__

    by_family = {
        name: _tally([v for v in verdicts if v["family"] == name])
        for name in sorted({v["family"] for v in verdicts})
    }
    total = _tally(verdicts)
    report: dict[str, Any] = {
        "benchmark": "toolcalls-suite",
        "suite": f"{SUITE} {__version__}",
        "split": split,
        "reader": "every grammar, then the schemas" if grammars else "the schemas alone",
        "families": by_family,
        "total": total,
        "dev": _tally([v for v in verdicts if not v["held_out"]]),
        "held_out": _tally([v for v in verdicts if v["held_out"]]),
        "strategies": list(STRATEGIES),
        "stress": list(STRESS),
        "seconds": round(elapsed, 2),
        "published": {k: list(v) for k, v in PUBLISHED.items()},
        "not_passed": [
            {"id": v["id"], "status": v["status"], "failed": v["failed"]}
            for v in verdicts
            if v["status"] not in ("pass", "soft_pass")
        ],
    }
    report["read_alone"] = read_alone(every, families, grammars=grammars)
    rate = total["calls_exact"] / total["calls"] if total["calls"] else 0.0
    worst = min(
        (f["calls_exact"] / f["calls"] for f in by_family.values() if f["calls"]), default=0.0
    )
    report["met"] = {
        "exact": rate >= TARGET_EXACT,
        "every_family": worst >= TARGET_FAMILY,
        "unsafe": total["unsafe"] == 0 and not report["read_alone"]["calls_from"],
        "leaks": total["leaks"] == 0,
        "stream": total["stream_differs"] == 0,
    }
    return report


def read_alone(every: list[Any], families: dict[str, Any], *, grammars: bool) -> dict[str, Any]:
    """The truncated and malformed fixtures read as text alone, with no finish reason (as a
    log, a paste or a server that sends none gives them): the ids any call came from."""
    errors = [f for f in every if _kind(f) == "error"]
    calls_from = []
    for f in errors:
        got = parse(
            f.raw_output,
            tool_schemas(f.tools),
            prompt=generation_prompt(f, families.get(f.family)),
            grammars=grammars,
        )
        if got.calls:
            calls_from.append(f.id)
    return {"fixtures": len(errors), "calls_from": calls_from}


def markdown_suite(report: dict[str, Any]) -> str:
    """The report as a Markdown section for docs/benchmarks.md."""
    t = report["total"]
    lines = [
        f"{t['fixtures']} fixtures of {report['suite']} ({t['calls']} with calls, {t['errors']} "
        "truncated or malformed), each parsed once whole and once for each of "
        f"{len(report['strategies'])} chunkings; judged by the suite's own checks.",
        "",
        "| family | fixtures | pass + soft | calls exact | truncated/malformed | calls run "
        "where none may | marker leaks | stream ≠ whole |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def row(name: str, f: dict[str, Any]) -> str:
        return (
            f"| {name} | {f['fixtures']} | {f['good']} | {f['calls_exact']} / {f['calls']} "
            f"| {f['errors']} | {f['unsafe']} | {f['leaks']} | {f['stream_differs']} |"
        )

    lines += [row(name, f) for name, f in report["families"].items()]
    lines.append(row("**all**", t))
    for part in ("dev", "held_out"):
        lines.append(row(f"*{part.replace('_', '-')}*", report[part]))
    good = t["good"]
    lines += [
        "",
        "For context, the suite's published matrix for the engines' own parsers (pass + soft "
        "pass of the fixtures each supports): "
        + ", ".join(f"{k} {a}/{b}" for k, (a, b) in report["published"].items())
        + f"; olav {good}/{t['fixtures']}.",
        "",
    ]
    alone = report.get("read_alone")
    if alone is not None:  # reports written before the schema reader have neither
        cut = alone["calls_from"]
        lines += [
            f"Reader: {report.get('reader', 'every grammar')}. The {alone['fixtures']} "
            "truncated or malformed fixtures read as text alone, with no finish reason: calls "
            f"from {len(cut)}" + (f" ({', '.join(cut)})" if cut else "") + ".",
            "",
        ]
    if report["not_passed"]:
        lines.append(
            "Not passed: "
            + ", ".join(f"{n['id']} ({'; '.join(n['failed'][:2])})" for n in report["not_passed"])
            + "."
        )
        lines.append("")
    return "\n".join(lines)
