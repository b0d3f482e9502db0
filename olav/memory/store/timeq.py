"""The period a query names ("in May 2023", "last week", "2023年5月", "上周"), as a window.

Hybrid search adds two rankings pre-filtered to that window on ``event_at`` (when a memory
happened, which defaults to when it was written). The window only adds rankings; memories
outside it can still be recalled. Absolute dates stretch past the named period because events
are often told some days after they happen: a day covers that day and the week after; a month
covers that month and the next; a year runs to the end of the next January.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTH_NAMES = [
    *("january", "february", "march", "april", "may", "june"),
    *("july", "august", "september", "october", "november", "december"),
]
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, start=1)}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items()) if m != "may"})
_MONTHS["sept"] = 9
_M = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_I = re.IGNORECASE

_DAY_FIRST = re.compile(rf"\b(\d{{1,2}}){_ORD} (?:of )?({_M})\.?,? (\d{{4}})\b", _I)
_MONTH_FIRST = re.compile(rf"\b({_M})\.? (\d{{1,2}}){_ORD},? (\d{{4}})\b", _I)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_ZH_DAY = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_MONTH_YEAR = re.compile(rf"\b({_M})\.?,? (\d{{4}})\b", _I)
_ZH_MONTH_YEAR = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月")
# a bare month needs a preposition, so that "may" the verb is not a month
_MONTH_ONLY = re.compile(
    rf"\b(?:in|of|during|since|early|late|mid|before|after|until|by|last|this|next) "
    rf"({'|'.join(_MONTH_NAMES)})\b",
    _I,
)
_YEAR = re.compile(r"\b(?:in|of|during|since|before|after|until|by) ((?:19|20)\d\d)\b", _I)
_ZH_YEAR = re.compile(r"((?:19|20)\d\d)\s*年(?!\s*\d)")

# relative periods: (pattern, days back to the start, days covered)
_RELATIVE: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(r"\b(?:today|this morning|tonight)\b|今天|今日|今早", _I), 0, 1),
    (re.compile(r"\byesterday\b|昨天|昨日|昨晚", _I), 1, 1),
    (re.compile(r"前天", _I), 2, 1),
    (re.compile(r"\b(?:this|the past) week\b|本周|这周|这个星期|本星期", _I), 7, 8),
    (re.compile(r"\blast week\b|上周|上个星期|上星期", _I), 14, 9),
    (re.compile(r"\b(?:this|the past) month\b|本月|这个月", _I), 31, 32),
    (re.compile(r"\blast month\b|上个月|上月", _I), 62, 40),
    (re.compile(r"\b(?:this|the past) year\b|今年", _I), 366, 367),
    (re.compile(r"\blast year\b|去年", _I), 730, 400),
)
_DAYS_AGO = re.compile(r"\b(\d{1,3}) days? ago\b|(\d{1,3})\s*天前", _I)


@dataclass(frozen=True)
class Period:
    """A half-open window [start, end) in UTC, or any year's months (``months``). A window's
    end, or its start, may be open (None), as a filter on a creation time is
    (olav.memory.store.filters.SearchFilter.created); the periods a query names have both."""

    start: datetime | None = None
    end: datetime | None = None
    months: tuple[int, ...] = ()

    def sql(self, column: str = "event_at") -> str:
        if self.months:
            return f"date_part('month', {column}) IN ({', '.join(map(str, self.months))})"
        if self.start is not None and self.end is not None:
            return f"({column} >= {_ts(self.start)} AND {column} < {_ts(self.end)})"
        if self.start is not None:
            return f"({column} >= {_ts(self.start)})"
        if self.end is not None:
            return f"({column} < {_ts(self.end)})"
        return "true"

    def contains(self, when: datetime) -> bool:
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        if self.months:
            return when.month in self.months
        return (self.start is None or self.start <= when) and (self.end is None or when < self.end)


def _ts(d: datetime) -> str:
    fmt = "%Y-%m-%d %H:%M:%S.%f" if d.microsecond else "%Y-%m-%d %H:%M:%S"
    return f"CAST('{d.astimezone(UTC).strftime(fmt)}' AS TIMESTAMP)"


def _day(year: int, month: int, day: int) -> Period:
    start = datetime(year, month, day, tzinfo=UTC)
    return Period(start, start + timedelta(days=8))


def _month(year: int, month: int) -> Period:
    start = datetime(year, month, 1, tzinfo=UTC)
    nxt = month + 2
    end = datetime(year + (nxt - 1) // 12, (nxt - 1) % 12 + 1, 1, tzinfo=UTC)
    return Period(start, end)


def _month_index(name: str) -> int:
    return _MONTHS[name.lower().rstrip(".")]


def query_period(query: str, *, now: datetime | None = None) -> Period | None:
    """The period ``query`` names, or None. Absolute dates win over relative phrases."""
    try:
        if m := _DAY_FIRST.search(query):
            return _day(int(m.group(3)), _month_index(m.group(2)), int(m.group(1)))
        if m := _MONTH_FIRST.search(query):
            return _day(int(m.group(3)), _month_index(m.group(1)), int(m.group(2)))
        if m := _ISO_DAY.search(query) or _ZH_DAY.search(query):
            return _day(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if m := _MONTH_YEAR.search(query):
            return _month(int(m.group(2)), _month_index(m.group(1)))
        if (m := _ZH_MONTH_YEAR.search(query)) and 1 <= int(m.group(2)) <= 12:
            return _month(int(m.group(1)), int(m.group(2)))
    except ValueError:  # "February 30", month 13
        return None
    if m := _MONTH_ONLY.search(query):
        month = _month_index(m.group(1))
        return Period(months=(month, month % 12 + 1))
    if m := _YEAR.search(query) or _ZH_YEAR.search(query):
        year = int(m.group(1))
        return Period(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 2, 1, tzinfo=UTC))
    today = (now or datetime.now(UTC)).astimezone(UTC)
    today = today.replace(hour=0, minute=0, second=0, microsecond=0)
    if m := _DAYS_AGO.search(query):
        days = int(m.group(1) or m.group(2))
        start = today - timedelta(days=days + 1)
        return Period(start, start + timedelta(days=3))
    for pattern, back, span in _RELATIVE:
        if pattern.search(query):
            start = today - timedelta(days=back)
            return Period(start, start + timedelta(days=span))
    return None
