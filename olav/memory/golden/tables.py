"""The golden report as tables: one set of rows (header, rows), written as Markdown here and
as rich tables by ``olav bench golden``."""

from __future__ import annotations

import math
from typing import Any

from olav.memory.golden.block import TIERS

Rows = tuple[list[str], list[list[str]]]  # header, rows


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def floors_label(f: dict[str, Any]) -> str:
    """``0.03 (0.0 with words, -0.04 with specific words) · lessons ... · spread 0.005``."""
    spread = "none" if f["spread"] is None or math.isinf(f["spread"]) else f["spread"]
    return (
        f"{f['directive']} ({f['directive_words']} with words, {f['specific']} with "
        f"specific words) · lessons {f['lesson']} ({f['lesson_words']} with a full-text "
        f"match) · spread {spread}"
    )


MEASURES = (
    ("expect", "expected in block"),
    ("precision", "block precision"),
    ("empty", "unrelated: empty block"),
    ("nomatch_clean", "no-match: clean block"),
    ("stray", "in-domain: stray lesson"),
    ("unrelated_lesson", "unrelated: lesson"),
    ("lesson_kept", "expected lesson kept"),
)


def summary_line(report: dict[str, Any]) -> str:
    c = report["counts"]
    return (
        f"Golden suite, embedder `{report['embedder']}`"
        + (" with the second opinion on lessons" if report.get("second_opinion") else "")
        + f": {c['guides']} guides, "
        f"{c['reflections']} lessons, {c['precedents']} precedents; {c['queries']} queries "
        f"({c['positive']} expect a guide or precedent, {c['lesson']} a lesson, "
        f"{c['nomatch']} in-domain with no memory that applies, {c['negative']} unrelated), "
        f"split by id into a calibration half ({c['split']['cal']}) and a test half "
        f"({c['split']['test']}). Recall as AutoRecall runs it for agent `{report['agent']}`, "
        f"token budget {report['token_budget']}."
    )


def target_rows(report: dict[str, Any]) -> Rows:
    conf = report["blocks"]["configured"]["test"]["small"]
    sugg = report["blocks"]["suggested"]["test"]["small"]
    names = dict(MEASURES)
    rows = []
    for key, t in report["targets"].items():
        value = conf[key]
        met = value is not None and (value >= t["target"] if t["higher"] else value <= t["target"])
        sign = "≥" if t["higher"] else "≤"
        target = f"{sign} {_pct(t['target'])}"
        verdict = "yes" if met else "**no**"
        rows.append([names[key], _pct(value), _pct(sugg[key]), target, verdict])
    head = ["measure (test half, small tier)", "configured floors", "suggested floors"]
    return [*head, "target", "met"], rows


def block_rows(blocks: dict[str, Any], split: str) -> Rows:
    part = blocks[split]
    labelled = [(f"{tier} tier, all", part[tier]) for tier in TIERS]
    labelled += [(f"small tier, {lang}", m) for lang, m in part["by_language"].items()]
    rows = [
        [label, str(m["n"]), *(_pct(m[key]) for key, _ in MEASURES), str(m["tokens"])]
        for label, m in labelled
    ]
    return [f"{split} half", "n", *(name for _, name in MEASURES), "tokens"], rows


def miss_rows(misses: list[dict[str, Any]]) -> Rows:
    rows = []
    for m in misses:
        want = "; ".join(
            f"{e['id']}: " + (e.get("reason") or "not a candidate") for e in m["expected"]
        )
        injected, wrong = ", ".join(m["injected"]) or "-", ", ".join(m["wrong"]) or "-"
        rows.append([m["query"], m["kind"], injected, wrong, want or "-"])
    return ["query", "kind", "injected", "not acceptable", "expected: why not"], rows


def retrieval_rows(ret: dict[str, Any]) -> Rows:
    keys = ("top1", "top3", "top5", "search_top1", "search_top3")
    rows = [
        [name, str(b["n"]), *(_pct(b[k]) for k in keys)]
        for name, b in [("all", ret["overall"]), *ret["by_language"].items()]
    ]
    return ["queries", "n", "top-1", "top-3", "top-5", "search only: top-1", "top-3"], rows


def dedup_rows(d: dict[str, Any]) -> tuple[Rows, Rows]:
    spread = [
        [name, *(str(d[name][k]) for k in ("n", "min", "median", "max"))]
        for name in ("duplicates", "distinct")
    ]
    chosen = [
        [f"{d[n]['threshold']} ({n})", _pct(d[n]["skipped"]), _pct(d[n]["kept"])]
        for n in ("configured", "suggested")
    ]
    return (
        (["pairs", "n", "min", "median", "max"], spread),
        (["dedup distance", "duplicates skipped", "distinct kept"], chosen),
    )


def ceiling_rows(c: dict[str, Any], floors: bool = True) -> Rows:
    """What any floors could reach on the test half (small tier), and what margins raised
    for the acceptable memories would give under the calibrated floors; without the floors
    column when ``floors`` is false (too wide for a terminal)."""
    keys = ("expect", "precision", "empty", "stray", "lesson_kept")
    head = ["test half, small tier", *(dict(MEASURES)[k] for k in keys), "floors"]

    def row(label: str, point: dict[str, Any] | None) -> list[str]:
        if point is None:
            return [label, "no floors in the grid reach it", *([""] * len(keys))]
        m = point["metrics"]
        return [label, *(_pct(m[k]) for k in keys), floors_label(point["floors"])]

    most = c["most_targets"]
    rows = [
        row("best expected with precision ≥ 85 % and empty ≥ 90 %", c["expect_at_precision"]),
        row("best precision with expected ≥ 92 % and empty ≥ 90 %", c["precision_at_expect"]),
        row("best lessons kept with stray ≤ 10 % and lessons for unrelated ≤ 3 %", c["lessons"]),
        row(f"most targets met: {most['met']} of 6", most),
    ]
    for r in c["raised"]:
        label = f"acceptable memories' margins + {r['delta']} (e5's unit), calibrated floors"
        rows.append([label, *(_pct(r[k]) for k in keys), ""])
    return (head, rows) if floors else (head[:-1], [r[:-1] for r in rows])


def _off_line(report: dict[str, Any]) -> str:
    off = report["blocks"]["off"]
    return (
        "With no floor (the nearest memories, as before the relevance decision), the same "
        f"test half gets: expected in block {_pct(off['expect'])}, block precision "
        f"{_pct(off['precision'])}, unrelated requests with an empty block {_pct(off['empty'])}, "
        f"stray lessons {_pct(off['stray'])}, unrelated requests with a lesson "
        f"{_pct(off['unrelated_lesson'])}, {off['tokens']} tokens a block."
    )


def _alone_line(report: dict[str, Any]) -> str | None:
    alone = report["blocks"].get("alone")
    if not alone:
        return None
    return (
        "Without the second opinion on lessons (`memory.second_opinion: off`: e5's margin "
        "alone, with e5's own floors), the same test half gets: expected in block "
        f"{_pct(alone['expect'])}, block precision {_pct(alone['precision'])}, stray lessons "
        f"{_pct(alone['stray'])}, unrelated requests with a lesson "
        f"{_pct(alone['unrelated_lesson'])}, expected lesson kept {_pct(alone['lesson_kept'])}."
    )


def _md(table: Rows) -> list[str]:
    head, rows = table
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def markdown_golden(report: dict[str, Any]) -> str:
    """The report as Markdown tables (for docs/benchmarks.md)."""
    f = report["floors"]
    out = [
        summary_line(report),
        "",
        f"Configured floors: {floors_label(f['configured'])}. Floors the calibration half "
        f"suggests: {floors_label(f['suggested'])}.",
        "",
        *_md(target_rows(report)),
        "",
        _off_line(report),
        "",
        *([line, ""] if (line := _alone_line(report)) else []),
        "The block per tier and language, configured floors:",
        "",
        *_md(block_rows(report["blocks"]["configured"], "test")),
        "",
        *_md(block_rows(report["blocks"]["configured"], "cal")),
    ]
    if report["misses"]:
        out += [
            "",
            "Test-half queries whose small-tier block falls short (why the expected memory "
            "was left out):",
            "",
            *_md(miss_rows(report["misses"])),
        ]
    if report.get("ceiling"):
        out += [
            "",
            "What the signals allow at all: the test half's best blocks over every combination "
            f"of floors in the grid ({report['ceiling']['combinations']} replays), the floors "
            "chosen **on the test half itself**. These are an upper bound fitted in sample, not "
            "results. The last rows raise the margin of every acceptable memory by a constant "
            "(in e5's unit: its margins span 0.062 from p10 to p90): what an embedder that puts "
            "the right memories that much nearer would give with the floors the calibration "
            "half chose.",
            "",
            *_md(ceiling_rows(report["ceiling"])),
        ]
    spread, chosen = dedup_rows(report["dedup"])
    out += [
        "",
        "Ranking before the relevance decision (queries with an expected guide or precedent): "
        "its position among the Recaller's candidates, and in the search alone.",
        "",
        *_md(retrieval_rows(report["retrieval"])),
        "",
        "Lesson dedup distance (the new lesson as a query against the stored one, as "
        "add_reflection searches):",
        "",
        *_md(spread),
        "",
        *_md(chosen),
    ]
    return "\n".join(out) + "\n"
