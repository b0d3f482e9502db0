"""scan_error_signatures: normalise recent errors into a bounded histogram.

Timestamps, UUIDs, hex, ids, numbers, IPs and paths become placeholders, so the same failure
seen a hundred times is one signature with a count. The output is bounded (top K) and every
signature is backed by real rows: a model cannot invent one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from olav.audit.queries import errors_since

_RULES = (
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
        "<ts>",
    ),
    (
        re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b", re.I),
        "<uuid>",
    ),
    (re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.\-]+){2,}/?"), "<path>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b[a-z]+[_-]?\d+[a-z0-9_-]*\b", re.I), "<id>"),
    (re.compile(r"'[^']{1,80}'|\"[^\"]{1,80}\""), "<val>"),
    (re.compile(r"\b\d+(?:\.\d+)?\b"), "<n>"),
)
TOP_K = {"small": 15, "medium": 30, "large": 60}
LOG_TAIL_BYTES = 2 * 1024 * 1024
_LOG_LINE = re.compile(r"\b(ERROR|CRITICAL|Traceback|Exception)\b")
_LOG_PREFIX = re.compile(r"^\S+ \S+ (?:ERROR|WARNING|CRITICAL|INFO) (\S+) ")


def normalise_error(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    line = " ".join(first.split())
    for pat, repl in _RULES:
        line = pat.sub(repl, line)
    return line[:200]


@dataclass
class Signature:
    signature: str
    count: int
    example: str
    agents: set[str] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, object]:
        return {
            "signature": self.signature,
            "count": self.count,
            "example": self.example,
            "agents": sorted(self.agents),
            "sources": sorted(self.sources),
        }


def _tail(path: Path, limit: int = LOG_TAIL_BYTES) -> list[str]:
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - limit))
        data = fh.read().decode("utf-8", errors="replace")
    lines = data.splitlines()
    return lines[1:] if size > limit else lines  # the first line may be cut


def scan_error_signatures(
    audit_db: Path, logs: Path | None = None, *, days: int = 7, tier: str = "small"
) -> list[Signature]:
    since = datetime.now(UTC) - timedelta(days=days)
    items = errors_since(audit_db, since) if audit_db.exists() else []
    if logs is not None and logs.is_dir():
        for log in sorted(logs.glob("*.log")):
            for line in _tail(log):
                if _LOG_LINE.search(line):
                    m = _LOG_PREFIX.match(line)
                    text = line[m.end() :] if m else line
                    items.append((text, m.group(1) if m else "?", f"log:{log.name}"))
    sigs: dict[str, Signature] = {}
    for text, agent, source in items:
        key = normalise_error(text)
        if not key:
            continue
        sig = sigs.setdefault(key, Signature(key, 0, " ".join(text.split())[:240]))
        sig.count += 1
        sig.agents.add(agent)
        sig.sources.add(source)
    ranked = sorted(sigs.values(), key=lambda s: (-s.count, s.signature))
    return ranked[: TOP_K.get(tier, 15)]
