"""olav cron: the schedule expressions (cron's fields, day of week, next fire, refusals)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

MONDAY = datetime(2026, 11, 30, 5, 0, tzinfo=UTC)  # a Monday, after 04:00


def _fires(expr: str, n: int, after: datetime = MONDAY) -> list[datetime]:
    from olav.cron.expression import next_fire

    out: list[datetime] = []
    for _ in range(n):
        nxt = next_fire(expr, after)
        assert nxt is not None
        out.append(nxt)
        after = nxt
    return out


def test_dow_zero_and_seven_are_sunday() -> None:
    for expr in ("0 4 * * 0", "0 4 * * 7", "0 4 * * sun"):
        nxt = _fires(expr, 1)[0]
        assert nxt.weekday() == 6, expr  # Python: Monday=0 .. Sunday=6
        assert (nxt.year, nxt.month, nxt.day, nxt.hour, nxt.minute) == (2026, 12, 6, 4, 0)


@pytest.mark.parametrize(
    ("expr", "weekdays"),
    [
        ("0 4 * * 1-5", {0, 1, 2, 3, 4}),
        ("0 4 * * 6,0", {5, 6}),
        ("0 4 * * 0,6", {5, 6}),
        ("0 4 * * */2", {6, 1, 3, 5}),  # 0,2,4,6 = Sun, Tue, Thu, Sat
        ("0 4 * * 1-5/2", {0, 2, 4}),
        ("0 4 * * 0-2", {6, 0, 1}),
        ("0 4 * * 5-7", {4, 5, 6}),
        ("0 4 * * mon-fri", {0, 1, 2, 3, 4}),
        ("0 4 * * 1", {0}),
    ],
)
def test_numeric_day_of_week_means_what_cron_means(expr: str, weekdays: set[int]) -> None:
    fires = _fires(expr, 14)
    assert {f.weekday() for f in fires} == weekdays
    assert all((f.hour, f.minute) == (4, 0) for f in fires)


def test_dow_field_is_rewritten_to_names() -> None:
    from olav.cron.expression import cron_dow_to_names

    assert cron_dow_to_names("0") == "sun"
    assert cron_dow_to_names("7") == "sun"
    assert cron_dow_to_names("1-5") == "mon,tue,wed,thu,fri"
    assert cron_dow_to_names("6,0") == "sat,sun"
    assert cron_dow_to_names("*/2") == "tue,thu,sat,sun"
    assert cron_dow_to_names("*") == "*"


def test_day_of_month_or_day_of_week_like_cron() -> None:
    # cron: "0 0 13 * 5" fires on every Friday *and* on every 13th
    fires = _fires("0 0 13 * 5", 8)
    assert any(f.day == 13 and f.weekday() != 4 for f in fires)
    assert all(f.day == 13 or f.weekday() == 4 for f in fires)
    assert sum(f.weekday() == 4 for f in fires) >= 5


def test_the_seconds_field_is_crons_zero_unless_a_finer_one_is_asked_for() -> None:
    from olav.cron.expression import build_trigger

    after = MONDAY + timedelta(seconds=1)
    cron = build_trigger("* * * * *", UTC)
    assert cron.get_next_fire_time(None, after) == MONDAY + timedelta(minutes=1)
    fine = build_trigger("* * * * *", UTC, seconds="*/2")
    assert fine.get_next_fire_time(None, after) == MONDAY + timedelta(seconds=2)
    both = build_trigger("0 4 1 * 1", UTC, seconds="*/2")  # cron's OR of the two day fields
    assert both.get_next_fire_time(None, after) == datetime(2026, 12, 1, 4, 0, 0, tzinfo=UTC)


def test_next_fire_is_strictly_after_and_pure() -> None:
    from olav.cron.expression import next_fire

    at = datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
    assert next_fire("0 4 * * 0", at) == datetime(2026, 12, 13, 4, 0, tzinfo=UTC)
    assert next_fire("*/15 * * * *", MONDAY) == datetime(2026, 11, 30, 5, 15, tzinfo=UTC)
    assert next_fire("@daily", MONDAY) == datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
    assert next_fire("30 * * * *", MONDAY) == datetime(2026, 11, 30, 5, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "expr",
    [
        "0 4 * *",
        "0 4 * * * *",
        "61 4 * * *",
        "0 24 * * *",
        "0 4 32 * *",
        "0 4 * 13 *",
        "0 4 * * 8",
        "0 4 * * 5-1",
        "*/0 * * * *",
        "0 4 * * mon/0",
        "0 4 L * *",
        "0 0 31 2 *",
        "@reboot",
        "every day",
    ],
)
def test_invalid_expression_is_refused_on_one_line(expr: str) -> None:
    from olav.cron import CronExpressionError
    from olav.cron.expression import validate_expression

    with pytest.raises(CronExpressionError) as info:
        validate_expression(expr)
    message = str(info.value)
    assert f"'{expr}'" in message
    assert "\n" not in message
