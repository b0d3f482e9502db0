"""The LoCoMo report as Markdown, and the questions asked of a report."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchmarks.locomo.measure import BASELINES


def best_method(report: dict[str, Any], k: int | None = None) -> str:
    """The method with the highest R@k (the largest k by default), ties to R@ smaller ks."""
    ks = sorted(report["ks"], reverse=True)
    if k is not None:
        ks = [k, *[x for x in ks if x != k]]

    def key(name: str) -> tuple[float, ...]:
        o = report["methods"][name]["overall"]
        return tuple(o[f"R@{x}"] or 0.0 for x in ks)

    return max(report["methods"], key=key)


def method_names(report: dict[str, Any], experimental: bool) -> Iterable[str]:
    return [m for m, v in report["methods"].items() if v["experimental"] == experimental]


def markdown_recall(report: dict[str, Any]) -> str:
    """The recall report as Markdown tables: baselines, olav by category, experiments."""
    ks = report["ks"]
    head = "| method | " + " | ".join(f"R@{k}" for k in ks) + " | ms/question | what |"
    rule = "|---|" + "---|" * (len(ks) + 2)

    def row(name: str) -> str:
        m = report["methods"][name]
        vals = " | ".join(
            "-" if m["overall"][f"R@{k}"] is None else f"{m['overall'][f'R@{k}']:.3f}" for k in ks
        )
        bold = "**" if name == "olav" else ""
        return f"| {bold}{name}{bold} | {vals} | {m['search_ms_per_question']} | {m['label']} |"

    lines = [
        f"LoCoMo conversations {', '.join(report['conversations'])}: {report['turns']} turns, "
        f"{report['questions']} questions ({report['excluded_category_5']} adversarial "
        f"excluded), embedder `{report['embedder']}`, {report['candidates_per_ranking']} "
        "candidates per ranking.",
        "",
        head,
        rule,
        *(row(m) for m in BASELINES),
        "",
        "olav by question category:",
        "",
        "| category | questions | " + " | ".join(f"R@{k}" for k in ks) + " |",
        "|---|---|" + "---|" * len(ks),
    ]
    olav = report["methods"]["olav"]
    for cat, block in [*olav["by_category"].items(), ("all", olav["overall"])]:
        vals = " | ".join("-" if block[f"R@{k}"] is None else f"{block[f'R@{k}']:.3f}" for k in ks)
        lines.append(f"| {cat} | {block['n']} | {vals} |")
    extra = list(method_names(report, experimental=True))
    if extra:
        lines += ["", "Experimental recipes (rankings fused by RRF; not olav's default):", ""]
        lines += [head, rule, *(row(m) for m in extra)]
    return "\n".join(lines) + "\n"
