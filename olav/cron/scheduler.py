"""The ``olav cron serve`` daemon (expressions are in :mod:`olav.cron.expression`).

The daemon holds ``.olav/cron.pid`` locked (``flock``) while it runs, so a second one refuses to
start. It re-reads the jobs file every couple of seconds and reconciles its schedule, because
jobs are enabled and disabled by other processes (``olav cron enable``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shlex
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.cron import CronExpressionError, DaemonRunningError, JobBusyError
from olav.cron.expression import (
    build_trigger,
    local_timezone,
)
from olav.cron.jobfile import get_job, jobs_path, list_jobs
from olav.cron.joblog import cron_logger, kv
from olav.cron.jobs import run_job

PID_FILE = "cron.pid"
RECONCILE_EVERY_S = 2.0
UNIT_NAME = "olav-cron"

# --------------------------------------------------------------------------- pid lock


def pid_path(ws: Workspace) -> Path:
    return ws.olav_dir / PID_FILE


def _read_pid(fd: int) -> int | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


@contextmanager
def pid_lock(ws: Workspace) -> Iterator[None]:
    """Hold ``.olav/cron.pid`` (flock) for the daemon's lifetime; refuse if another holds it."""
    path = pid_path(ws)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DaemonRunningError(_read_pid(fd), str(path)) from None
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # the file stays (unlinking a flock file races); empty = idle
    finally:
        os.close(fd)  # releases the lock


def daemon_pid(ws: Workspace) -> int | None:
    """The running daemon's pid (0 when it runs but its pid is unreadable), else None."""
    path = pid_path(ws)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- daemon


class CronDaemon:
    """An APScheduler BackgroundScheduler kept in step with the jobs file.

    One worker thread, ``max_instances=1`` and ``coalesce=True``: jobs run one at a time and a
    backlog of missed fire times collapses into one run.
    """

    def __init__(
        self,
        ws: Workspace,
        logger: logging.Logger,
        *,
        timezone: tzinfo | None = None,
        seconds: str = "0",
    ):
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.ws = ws
        self.logger = logger
        self.tz = timezone or local_timezone()
        self.seconds = seconds  # the seconds field of every schedule (see build_trigger)
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600},
            timezone=self.tz,
        )
        self._scheduled: dict[str, tuple[str, str]] = {}  # name -> (schedule, target)
        self._seen: bytes | None = None

    def start(self) -> None:
        self.scheduler.start()

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)  # lets a running job finish

    def scheduled(self) -> dict[str, datetime | None]:
        """Job name -> next run time, as the scheduler has them now."""
        return {job.id: job.next_run_time for job in self.scheduler.get_jobs()}

    def reconcile(self, *, force: bool = False) -> list[str]:
        """Re-read the jobs file if it changed; add, reschedule and remove jobs to match it.

        Returns one ``"+name"``, ``"~name"`` or ``"-name"`` per change.
        """
        path = jobs_path(self.ws)
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            content = b""
        if not force and content == self._seen:
            return []
        self._seen = content
        try:
            specs = list_jobs(self.ws)
        except OlavError as exc:  # a hand edit broke the file: keep the current schedule
            self.logger.error(kv("schedule.unreadable", message=exc.one_line()))
            return []
        desired: dict[str, tuple[str, str, Any]] = {}
        for spec in specs:
            if not spec.enabled:
                continue
            try:
                trigger = build_trigger(spec.schedule, self.tz, seconds=self.seconds)
            except CronExpressionError as exc:
                self.logger.error(kv("schedule.invalid", job=spec.name, message=exc.one_line()))
                continue
            desired[spec.name] = (spec.schedule, spec.target, trigger)
        changes: list[str] = []
        for name in list(self._scheduled):
            if name not in desired:
                self.scheduler.remove_job(name)
                del self._scheduled[name]
                changes.append(f"-{name}")
                self.logger.info(kv("job.unscheduled", job=name))
        for name, (schedule, target, trigger) in desired.items():
            current = self._scheduled.get(name)
            if current == (schedule, target):
                continue
            if current is None:
                job = self.scheduler.add_job(
                    self._run, trigger=trigger, args=[name], id=name, name=name
                )
                changes.append(f"+{name}")
            else:
                job = self.scheduler.reschedule_job(name, trigger=trigger)
                changes.append(f"~{name}")
            self._scheduled[name] = (schedule, target)
            self.logger.info(
                kv(
                    "job.scheduled",
                    job=name,
                    schedule=schedule,
                    target=target,
                    next_run=_iso(job.next_run_time),
                )
            )
        return changes

    def _run(self, name: str) -> None:
        """Runs in the scheduler's worker thread; never lets an exception out."""
        try:
            spec = get_job(self.ws, name)
            if not spec.enabled:
                self.logger.info(kv("run.skipped", job=name, reason="disabled"))
                return
            run_job(self.ws, name, source="daemon", logger=self.logger)
        except JobBusyError as exc:
            self.logger.warning(kv("run.skipped", job=name, reason=exc.message))
        except Exception as exc:
            self.logger.error(kv("run.failed", job=name, message=f"{type(exc).__name__}: {exc}"))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def serve(
    ws: Workspace,
    *,
    once_for: float | None = None,
    reconcile_every: float = RECONCILE_EVERY_S,
    echo: Callable[[str], None] | None = None,
    seconds: str = "0",
) -> str:
    """Run the daemon until SIGTERM/SIGINT (or ``once_for`` seconds). Returns why it stopped.
    ``seconds`` is the seconds field of every schedule (cron's "0"; tests use a finer one)."""
    stop = threading.Event()
    reason = {"why": "once-for" if once_for is not None else "stopped"}

    def on_signal(signum: int, _frame: object) -> None:
        reason["why"] = signal.Signals(signum).name
        stop.set()

    with pid_lock(ws), cron_logger(ws, stderr=True) as logger:
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, on_signal)
        daemon = CronDaemon(ws, logger, seconds=seconds)
        try:
            daemon.start()
            logger.info(
                kv(
                    "daemon.start",
                    pid=os.getpid(),
                    workspace=str(ws.root),
                    jobs_file=str(jobs_path(ws)),
                    once_for=once_for,
                )
            )
            if echo:
                echo(
                    f"olav cron: serving {ws.root} (pid {os.getpid()}); log: {ws.logs / 'cron.log'}"
                )
            deadline = None if once_for is None else time.monotonic() + once_for
            while True:
                try:
                    daemon.reconcile()
                except Exception as exc:  # keep serving; the next pass retries
                    logger.error(kv("schedule.error", message=f"{type(exc).__name__}: {exc}"))
                wait = reconcile_every
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        break
                if stop.wait(wait):
                    break
        finally:
            daemon.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            logger.info(kv("daemon.stop", pid=os.getpid(), reason=reason["why"]))
    return reason["why"]


# --------------------------------------------------------------------------- install


def default_unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def _systemd_quote(arg: str) -> str:
    if arg and not re.search(r"[\s\"'\\;$%]", arg):
        return arg
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def render_systemd_unit(ws: Workspace, python: str) -> str:
    """A systemd user unit that runs the daemon for this workspace."""
    root = str(ws.root)
    exec_start = " ".join(
        _systemd_quote(a) for a in (python, "-m", "olav.cli.app", "cron", "serve")
    )
    return (
        "[Unit]\n"
        f"Description=olav cron daemon for {root.replace('%', '%%')}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"WorkingDirectory={root.replace('%', '%%')}\n"
        f"Environment={_systemd_quote('OLAV_HOME=' + root)}\n"
        "Environment=PYTHONUNBUFFERED=1\n"
        f"ExecStart={exec_start}\n"
        "Restart=on-failure\n"
        "RestartSec=10\n"
        "KillSignal=SIGTERM\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def render_crontab_line(ws: Workspace, python: str) -> str:
    """An ``@reboot`` crontab line that starts the daemon for this workspace."""
    out = ws.logs / "cron.out"
    cmd = (
        f"cd {shlex.quote(str(ws.root))} && {shlex.quote(python)} -m olav.cli.app cron serve "
        f">> {shlex.quote(str(out))} 2>&1"
    )
    return "@reboot " + cmd.replace("%", "\\%")  # % is a newline in crontab
