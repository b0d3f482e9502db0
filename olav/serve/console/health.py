"""The Health page, ``/health``: how memory and the runs fare over time, per UTC day, for the
logged-in operator.

- **Memory blocks:** the share of runs that got a ``<relevant-memories>`` block, and the
  tokens per block (the one token estimate, :func:`olav.memory.store.token_counts.estimate_tokens`).
- **Outcomes:** runs per day by outcome.
- **Memory growth:** rows created per day per category, cumulative (every row the operator
  may read, retired ones too: they were created), for the categories that grew in the window.
- **Recall latency:** p50 and p95 per day.

The runs are the ones the operator may see (:func:`olav.serve.console.runs.visibility`), and
the recalls are theirs; a recall outside a run is the workspace's own operator's. The charts
are drawn in the browser by ``static/chart.js`` from this page's JSON twin
(``?format=json``); each has its numbers as a table under it, for the keyboard, screen readers
and a browser without JavaScript.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any

from olav.serve.console.context import BadRequest, Ctx, Page
from olav.serve.console.html import Markup, h, join, table, url
from olav.serve.console.runs import VISIBILITY_NOTE

WINDOWS = (7, 30, 90, 365)
DEFAULT_DAYS = 30
MAX_DAYS = 365
CHARTS = (
    ("share", "Runs that got a memory block", "share of the day's runs, %"),
    ("tokens", "Tokens per memory block", "mean estimated tokens of the day's blocks"),
    ("outcomes", "Run outcomes", "runs per day, by outcome"),
    ("memory", "Memory growth", "rows created, cumulative, by category"),
    ("latency", "Recall latency", "milliseconds per recall, p50 and p95"),
)


def window_days(ctx: Ctx) -> int:
    raw = ctx.text("days", 10) or str(DEFAULT_DAYS)
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_DAYS:
        raise BadRequest(f"days must be a whole number from 1 to {MAX_DAYS}, not {raw!r}")
    return int(raw)


def health_data(ctx: Ctx, days: int) -> dict[str, Any]:
    """The page's numbers (its JSON twin)."""
    until = datetime.now(UTC).date()
    first = until - timedelta(days=days - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=UTC)
    rows = ctx.audit.health(since)
    return {
        "days": days,
        "since": first.isoformat(),
        "until": until.isoformat(),
        "injection": [
            {"day": d.isoformat(), "runs": n, "with_block": b, "share": round(b / n, 4)}
            for d, n, b in rows.injection
        ],
        "block_tokens": _block_tokens(rows.blocks),
        "outcomes": _outcomes(rows.outcomes),
        "memory": _memory_growth(ctx, first),
        "recall_latency": [
            {"day": d.isoformat(), "recalls": n, "p50_ms": round(p50, 2), "p95_ms": round(p95, 2)}
            for d, n, p50, p95 in rows.latency
        ],
    }


def _block_tokens(blocks: list[tuple[date, str]]) -> list[dict[str, Any]]:
    from olav.memory.store.token_counts import estimate_tokens

    by_day: dict[date, list[int]] = {}
    for day, block in blocks:
        by_day.setdefault(day, []).append(estimate_tokens(block))
    return [
        {
            "day": d.isoformat(),
            "blocks": len(t),
            "mean_tokens": round(sum(t) / len(t), 1),
            "max_tokens": max(t),
        }
        for d, t in sorted(by_day.items())
    ]


def _outcomes(rows: list[tuple[date, str, int]]) -> list[dict[str, Any]]:
    by_day: dict[date, dict[str, int]] = {}
    for day, outcome, n in rows:
        by_day.setdefault(day, {})[outcome] = n
    return [
        {"day": d.isoformat(), "total": sum(c.values()), "by_outcome": c}
        for d, c in sorted(by_day.items())
    ]


def _memory_growth(ctx: Ctx, first: date) -> dict[str, Any]:
    """Rows created per day and category from ``first`` on, each day with the running total
    (``before``: the rows created earlier)."""
    from olav.memory.store.filters import SearchFilter
    from olav.memory.store.scopes import Reader

    every = SearchFilter(reader=Reader.of(ctx.config), include_invalid=True)  # retired too
    cols = ctx.store().values(["category", "created_at"], every)
    before: Counter[str] = Counter()
    created: dict[date, Counter[str]] = {}
    for category, at in zip(
        cols["category"].to_pylist(), cols["created_at"].to_pylist(), strict=True
    ):
        if at is None:
            continue
        day = (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC).date()
        if day < first:
            before[category] += 1
        else:
            created.setdefault(day, Counter())[category] += 1
    running = Counter(before)
    out = []
    for day, counts in sorted(created.items()):
        running.update(counts)
        out.append(
            {
                "day": day.isoformat(),
                "created": dict(sorted(counts.items())),
                "total": {c: running[c] for c in sorted(counts)},
            }
        )
    grew = sorted({c for counts in created.values() for c in counts})
    return {"categories": grew, "before": dict(sorted(before.items())), "days": out}


# -- the page ------------------------------------------------------------------------------------


def health_page(ctx: Ctx) -> Page:
    days = window_days(ctx)
    data = health_data(ctx, days)
    options = join(
        h(
            '<option value="{}"{}>last {} days</option>',
            n,
            Markup(" selected" if n == days else ""),
            n,
        )
        for n in sorted({*WINDOWS, days})
    )
    form = h(
        '<form class="filters" method="get" action="/health">'
        '<label>window <select name="days" data-autosubmit>{}</select></label>'
        '<button type="submit">Show</button></form>',
        options,
    )
    tables = _tables(data)
    figures = join(
        h(
            '<figure class="chart" id="chart-{0}" aria-labelledby="cap-{0}">'
            '<figcaption id="cap-{0}"><strong>{1}</strong> <span class="hint">{2}</span>'
            "</figcaption>"
            '<div class="plot" data-chart="{0}"><p class="empty">The chart needs '
            "JavaScript; the numbers are below.</p></div>"
            "<details><summary>The numbers: {1}</summary>{3}</details></figure>",
            name,
            title,
            what,
            tables[name],
        )
        for name, title, what in CHARTS
    )
    body = join(
        [
            form,
            h(
                '<p class="lead">Per UTC day, {} to {}. {}</p>',
                data["since"],
                data["until"],
                VISIBILITY_NOTE,
            ),
            h(
                '<div class="health" id="health" data-src="{}" data-since="{}" '
                'data-until="{}">{}</div>',
                url("/health", {"format": "json", "days": days}),
                data["since"],
                data["until"],
                figures,
            ),
            Markup('<script src="/static/chart.js" defer></script>'),
        ]
    )
    return Page("Health", body, data, active="/health")


def _tables(data: dict[str, Any]) -> dict[str, Markup]:
    outcomes = sorted({o for d in data["outcomes"] for o in d["by_outcome"]})
    cats = data["memory"]["categories"]
    growth = data["memory"]["days"]
    return {
        "share": table(
            ["day", "runs", "with a memory block", "share"],
            [
                (r["day"], r["runs"], r["with_block"], f"{r['share'] * 100:.0f} %")
                for r in data["injection"]
            ],
            empty="No runs in this window.",
        ),
        "tokens": table(
            ["day", "blocks", "mean tokens", "largest"],
            [
                (r["day"], r["blocks"], r["mean_tokens"], r["max_tokens"])
                for r in data["block_tokens"]
            ],
            empty="No memory block was injected in this window.",
        ),
        "outcomes": table(
            ["day", "runs", *outcomes],
            [
                (r["day"], r["total"], *(r["by_outcome"].get(o, 0) for o in outcomes))
                for r in data["outcomes"]
            ],
            empty="No runs in this window.",
        ),
        "memory": table(
            ["day", *cats],
            [
                (
                    r["day"],
                    *(_growth_cell(r, c) for c in cats),
                )
                for r in growth
            ],
            empty="No memory was created in this window.",
        ),
        "latency": table(
            ["day", "recalls", "p50 ms", "p95 ms"],
            [(r["day"], r["recalls"], r["p50_ms"], r["p95_ms"]) for r in data["recall_latency"]],
            empty="No recall in this window.",
        ),
    }


def _growth_cell(row: dict[str, Any], category: str) -> str:
    if category not in row["created"]:
        return ""
    return f"{row['total'][category]} (+{row['created'][category]})"
