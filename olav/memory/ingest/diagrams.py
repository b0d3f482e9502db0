"""Diagrams in memory (category ``topology``): Mermaid, Graphviz DOT or SVG, told apart by
:func:`detect_diagram_format`, and the labels in them that are worth embedding."""

from __future__ import annotations

import re

DIAGRAM_SUFFIXES = (".mmd", ".mermaid", ".dot", ".gv", ".svg")

_MERMAID_START = re.compile(
    r"^(graph|flowchart)(\s+(TD|TB|BT|RL|LR)\b.*|\s*;.*|\s*)$"
    r"|^pie(\s+showData)?(\s+title\s.*)?\s*$"
    r"|^(sequenceDiagram|classDiagram(-v2)?|stateDiagram(-v2)?|erDiagram|journey|gantt|gitGraph"
    r"|mindmap|timeline|quadrantChart|requirementDiagram|C4Context|C4Container|C4Component"
    r"|C4Deployment|block-beta|architecture-beta|packet-beta|sankey-beta|xychart-beta)\s*$"
)
_DOT_START = re.compile(r'^(strict\s+)?(di)?graph(\s+("[^"]*"|[\w.]+))?\s*\{', re.I)
_EMBEDDED_FENCE = re.compile(r"^\s*```\s*(mermaid|dot|graphviz|gv|svg)\s*$", re.M | re.I)
# ```lang, its blank lines, the body (less the blank lines before the closing fence), ```;
# matched once per text, without a blank run being split every way between two \s*
_FENCE_LANG = re.compile(
    r"^\s*+```(?:\s*+(?=[\w-]))?([\w-]*+)(?:[^\S\n]*+\n)++((?:.*\S)?[^\S\n]*+)\n\s*+```\s*+$",
    re.S,
)


def _strip_fence(text: str) -> tuple[str, str]:
    m = _FENCE_LANG.match(text.strip())
    return (m.group(1).lower(), m.group(2)) if m else ("", text)


def detect_diagram_format(text: str) -> str | None:
    """``mermaid``, ``dot``, ``svg`` or None. A Markdown code fence around the source is fine."""
    lang, body = _strip_fence(text)
    if lang == "mermaid":
        return "mermaid"
    if lang in ("dot", "graphviz", "gv"):
        return "dot"
    if lang == "svg":
        return "svg"
    src = body.strip()
    head = re.sub(r"<\?xml.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>", "", src[:4000], flags=re.S | re.I)
    if head.lstrip().lower().startswith("<svg"):
        return "svg"
    lines = [
        ln.strip()
        for ln in src.splitlines()
        if ln.strip() and not ln.strip().startswith(("%%", "//", "#", "/*"))
    ]
    if not lines:
        return None
    if lines[0].startswith("---"):  # Mermaid front matter (title: ...)
        closing = next((i for i, ln in enumerate(lines[1:], 1) if ln.startswith("---")), None)
        lines = lines[closing + 1 :] if closing is not None else lines
        if not lines:
            return None
    if _DOT_START.match(" ".join(lines[:3])):
        return "dot"
    if _MERMAID_START.match(lines[0]):
        return "mermaid"
    embedded = _EMBEDDED_FENCE.search(src)  # Markdown prose around one diagram block
    if embedded:
        lang = embedded.group(1).lower()
        return {"graphviz": "dot", "gv": "dot"}.get(lang, lang)
    return None


def diagram_labels(text: str, fmt: str, *, limit: int = 60) -> list[str]:
    """Human-readable names in a diagram (node labels, SVG text), for the embedded text."""
    if fmt == "svg":
        found = re.findall(r"<(?:title|text|tspan|desc)[^<>]*+>([^<]++)<", text)
    elif fmt == "dot":
        found = re.findall(r'label\s*=\s*"([^"]+)"', text)
        found += re.findall(r"^\s*\"?([\w.-]+)\"?\s*(?:->|--)", text, re.M)
    else:
        found = [a or b for a, b in re.findall(r'\["?([^"\[\]]++)"?\]|\("?([^"()]++)"?\)', text)]
        found += re.findall(r"subgraph\s+([\w-]+)", text)
    out: list[str] = []
    for item in found:
        label = " ".join(re.sub(r"<[^<>]++>", " ", str(item)).split())
        if label and label not in out:
            out.append(label)
    return out[:limit]
