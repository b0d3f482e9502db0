"""Cron expressions, meaning what they mean in cron.

Day-of-week 0 and 7 are Sunday, 1 is Monday, and when both day-of-month and day-of-week are
restricted a job fires when *either* matches. APScheduler 3.11 reads a numeric day-of-week as
0 = Monday and ANDs the two day fields, so :func:`parse_expression` rewrites the day-of-week
field to names and :func:`build_trigger` ORs two triggers where cron would. :func:`next_fire`
is the pure schedule computation tests call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any

from olav.cron import CronExpressionError

# cron numbering: 0 (and 7) = Sunday. These are also APScheduler's day names.
DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DOW_ORDER = (1, 2, 3, 4, 5, 6, 0)  # APScheduler likes mon..sun
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = (("minute", "minute"), ("hour", "hour"), ("day-of-month", "day"), ("month", "month"))
_APS_PREFIX = re.compile(r"^Error validating expression '[^']*': ")


# --------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class CronSpec:
    """A parsed five-field expression, day-of-week already in APScheduler's (named) form."""

    expr: str
    minute: str
    hour: str
    day: str
    month: str
    day_of_week: str
    dom_restricted: bool
    dow_restricted: bool


def _dow_value(token: str, expr: str) -> int:
    t = token.strip().lower()
    if t.isdigit():
        n = int(t)
        if n > 7:
            raise CronExpressionError(
                expr, f"day-of-week {token} is out of range (0-7; 0 and 7 = Sunday)"
            )
        return n
    if t in DOW_NAMES:
        return DOW_NAMES.index(t)
    raise CronExpressionError(expr, f"day-of-week '{token}' is not a number 0-7 or a day name")


def cron_dow_to_names(field: str, expr: str | None = None) -> str:
    """Rewrite a cron day-of-week field (0/7 = Sunday) as APScheduler day names.

    Every form is expanded to the set of days it means (``1-5`` -> ``mon,...,fri``,
    ``*/2`` -> ``sun,tue,thu,sat``), so no numeric value ever reaches APScheduler.
    """
    expr = field if expr is None else expr
    if field == "*":
        return "*"
    days: set[int] = set()
    for item in field.split(","):
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronExpressionError(
                    expr, f"day-of-week step '/{step_text}' must be 1 or more"
                )
            step = int(step_text)
        if base == "*":
            lo, hi = 0, 7
        elif "-" in base:
            first, _, last = base.partition("-")
            lo, hi = _dow_value(first, expr), _dow_value(last, expr)
            if lo > hi:
                raise CronExpressionError(expr, f"day-of-week range '{base}' runs backwards")
        elif base:
            lo = _dow_value(base, expr)
            hi = 7 if slash else lo
        else:
            raise CronExpressionError(expr, f"day-of-week '{field}' has an empty item")
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(DOW_NAMES[d] for d in _DOW_ORDER if d in days)


def parse_expression(expr: str) -> CronSpec:
    """Parse and validate a cron expression (five fields or an @macro)."""
    from apscheduler.triggers.cron import CronTrigger

    text = " ".join(str(expr).split())
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise CronExpressionError(
                text, f"unknown macro (use one of {', '.join(sorted(MACROS))})"
            )
        fields = MACROS[text.lower()].split()
    else:
        fields = text.split()
    if len(fields) != 5:
        raise CronExpressionError(
            text,
            f"{len(fields)} field{'s' if len(fields) != 1 else ''}, expected 5",
        )
    for (label, kwarg), value in zip(_FIELDS, fields[:4], strict=True):
        if value.lower() in {"l", "?", "last"} or " " in value:
            raise CronExpressionError(text, f"{label} '{value}' is not a cron value")
        try:
            CronTrigger(**{kwarg: value})
        except ValueError as exc:
            raise CronExpressionError(
                text, f"{label} '{value}': {_APS_PREFIX.sub('', str(exc))}"
            ) from None
    dow = cron_dow_to_names(fields[4], text)
    return CronSpec(
        expr=text,
        minute=fields[0],
        hour=fields[1],
        day=fields[2],
        month=fields[3],
        day_of_week=dow,
        dom_restricted=not fields[2].startswith("*"),
        dow_restricted=not fields[4].startswith("*"),
    )


def local_timezone() -> tzinfo:
    """The zone the daemon schedules in (the machine's, as APScheduler uses by default)."""
    from tzlocal import get_localzone

    zone: tzinfo = get_localzone()
    return zone


def build_trigger(expr: str, timezone: tzinfo | None = None, *, seconds: str = "0") -> Any:
    """An APScheduler trigger that fires when cron would fire ``expr``.

    ``seconds`` is the field cron does not have: ``"0"``, the start of the minute, as cron.
    A finer one (``"*/2"``) makes ``* * * * *`` fire every two seconds, which lets a test of
    the daemon run a per-minute job without waiting for a minute boundary.
    """
    from apscheduler.triggers.cron import CronTrigger

    spec = parse_expression(expr)
    tz = timezone or local_timezone()
    common = {
        "second": seconds,
        "minute": spec.minute,
        "hour": spec.hour,
        "month": spec.month,
        "timezone": tz,
    }
    if spec.dom_restricted and spec.dow_restricted:
        # cron: "if both fields are restricted, the command runs when either field matches"
        from apscheduler.triggers.combining import OrTrigger

        return OrTrigger(
            [
                CronTrigger(day=spec.day, day_of_week="*", **common),
                CronTrigger(day="*", day_of_week=spec.day_of_week, **common),
            ]
        )
    return CronTrigger(day=spec.day, day_of_week=spec.day_of_week, **common)


def next_fire(expr: str, after: datetime, *, timezone: tzinfo | None = None) -> datetime | None:
    """The first time strictly after ``after`` at which ``expr`` fires (None: never again).

    The schedule is read in ``timezone``, else in ``after``'s zone, else (naive ``after``) in
    local time. Pure: no clock, no files.
    """
    if after.tzinfo is None:
        after = after.astimezone()
    tz = timezone or after.tzinfo
    trigger = build_trigger(expr, tz)
    fire: datetime | None = trigger.get_next_fire_time(None, after + timedelta(microseconds=1))
    return fire


def validate_expression(expr: str) -> str:
    """The expression, whitespace normalised, or a one-line :class:`CronExpressionError`."""
    spec = parse_expression(expr)
    if spec.dom_restricted and not spec.month.startswith("*") and not spec.dow_restricted:
        # e.g. "0 0 31 2 *": valid syntax, but it would never fire
        probe = datetime(2000, 1, 1, tzinfo=local_timezone())
        if next_fire(spec.expr, probe) is None:
            raise CronExpressionError(spec.expr, "that day never occurs in that month")
    return spec.expr
