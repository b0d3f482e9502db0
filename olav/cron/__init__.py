"""Scheduled jobs: the nightly reflector and friends.

- :mod:`olav.cron.registry`: the built-in jobs, a job's spec and its result.
- :mod:`olav.cron.jobfile`: the jobs file (``.olav/cron.yaml``): list, enable, disable.
- :mod:`olav.cron.jobs`: run a job now; :mod:`olav.cron.joblog`: the cron log.
- :mod:`olav.cron.scheduler`: cron expressions (``next_fire``) and the ``olav cron serve`` daemon.

This package imports no scheduler library at import time; APScheduler is loaded only by the
functions that need it.
"""

from __future__ import annotations

from olav.core.errors import OlavError

EXPRESSION_HINT = (
    "Use five fields, minute hour day-of-month month day-of-week, "
    "e.g. '0 4 * * *' (day-of-week 0 or 7 = Sunday, 1 = Monday)"
)


class CronError(OlavError):
    """A cron job, schedule or daemon problem the user can act on."""


class CronExpressionError(CronError):
    """A cron expression that cron would not accept."""

    def __init__(self, expr: str, problem: str) -> None:
        self.expr, self.problem = expr, problem
        super().__init__(f"invalid cron expression '{expr}': {problem}", hint=EXPRESSION_HINT)


class UnknownJobError(CronError):
    def __init__(self, name: str, known: list[str]) -> None:
        self.name, self.known = name, known
        super().__init__(
            f"unknown cron job '{name}'",
            hint=f"Known jobs: {', '.join(known)}. A custom job needs "
            "`olav cron enable NAME --at EXPR --target module:function`",
        )


class JobTargetError(CronError):
    """A job's ``module:function`` target cannot be imported."""


class JobBusyError(CronError):
    """The job is already running in another process."""


class DaemonRunningError(CronError):
    exit_code = 3

    def __init__(self, pid: int | None, path: str) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else f"lock {path}"
        stop = f"`kill {pid}`" if pid else "stopping it"
        super().__init__(
            f"the cron daemon is already running for this workspace ({who})",
            hint=f"Stop it first ({stop} or `systemctl --user stop olav-cron`); "
            "`olav cron run NAME` runs a job now without a daemon",
        )
