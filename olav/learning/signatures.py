"""scan_error_signatures: normalise recent errors into a bounded histogram.

Timestamps, ids, numbers, paths and quoted values become placeholders, so the same failure
seen a hundred times is one signature with a count.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

_RULES = (
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
        "<ts>",
    ),
    (
        re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b", re.I),
        "<id>",
    ),
    (re.compile(r"\b[0-9a-f]{16,}\b", re.I), "<id>"),
    (re.compile(r"(?:/[\w.\-]+){2,}/?"), "<path>"),
    (re.compile(r"\b\d+(?:\.\d+){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"'[^']{1,80}'|\"[^\"]{1,80}\""), "<val>"),
    (re.compile(r"\b\d+(?:\.\d+)?\b"), "<n>"),
)
MAX_SIGNATURES = 50


def normalise_error(text: str) -> str:
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    for pat, repl in _RULES:
        line = pat.sub(repl, line)
    return line[:200]


@dataclass
class Signature:
    signature: str
    count: int
    example: str


def scan_error_signatures(
    audit_db: Path, logs: Path | None = None, *, days: int = 7
) -> list[Signature]:
    """Errors from failed runs, failed tool calls and ``*.log`` tails, newest window only."""
    since = datetime.now(UTC) - timedelta(days=days)
    texts: list[str] = []
    if audit_db.exists():
        from olav.audit.db import connect

        with connect(audit_db) as con:
            texts += [
                r[0]
                for r in con.execute(
                    "SELECT error FROM runs WHERE status IN ('error', 'cancelled') "
                    "AND error IS NOT NULL AND started_at >= ?",
                    [since],
                ).fetchall()
            ]
            texts += [
                f"{r[0]}: {r[1]}"
                for r in con.execute(
                    "SELECT tool, result FROM tool_calls "
                    "WHERE status = 'error' AND created_at >= ?",
                    [since],
                ).fetchall()
            ]
    if logs is not None and logs.is_dir():
        for log in sorted(logs.glob("*.log")):
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-500:]
            texts += [ln for ln in tail if re.search(r"\b(ERROR|Error|Traceback|failed)\b", ln)]
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for text in texts:
        sig = normalise_error(text)
        if sig:
            counts[sig] += 1
            examples.setdefault(sig, text[:300])
    return [Signature(s, n, examples[s]) for s, n in counts.most_common(MAX_SIGNATURES)]
