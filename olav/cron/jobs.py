"""Cron jobs: the registry of built-ins, the jobs file and running a job now.

The jobs file, ``.olav/cron.yaml``, is shared by the CLI and the daemon, which may write it at
the same time: every change is a read-modify-write under a file lock (``cron.yaml.lock``) that
ends in an atomic replace, so a reader never sees half a file.

A job is a callable ``fn(ws) -> str`` (a one-line summary) named by a ``"module:function"``
target and imported only when it runs. Built-in jobs take their target from :data:`BUILTIN_JOBS`;
a custom job stores its ``target`` in the jobs file.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

import yaml

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text
from olav.core.redact import redact_text
from olav.cron import CronError, JobBusyError, JobTargetError, UnknownJobError

JobFn = Callable[[Workspace], Any]

JOBS_FILE = "cron.yaml"
LOG_FILE = "cron.log"
LOCK_TIMEOUT_S = 30.0
MESSAGE_MAX = 300
STATUS_OK = "ok"
STATUS_ERROR = "error"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_TARGET_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_HEADER = (
    "# olav cron jobs, written by `olav cron enable/disable/run` and `olav cron serve`.\n"
    "# schedule: a cron expression (day-of-week 0 or 7 = Sunday). last_result: the latest run.\n"
    '# A custom job also names a target, "module:function", called as function(workspace).\n'
)


@dataclass(frozen=True)
class BuiltinJob:
    name: str
    target: str
    schedule: str
    description: str


BUILTIN_JOBS: dict[str, BuiltinJob] = {
    job.name: job
    for job in (
        BuiltinJob(
            "reflect",
            "olav.cron.builtin:run_reflector",
            "0 4 * * *",
            "Triage error signatures from the audit log into lessons and fix proposals.",
        ),
        BuiltinJob(
            "trace-learn",
            "olav.learning.trace_learner:run_trace_learner",
            "30 * * * *",
            "Turn failed, cancelled, narrated and tool-error runs into one-line lessons.",
        ),
        BuiltinJob(
            "extract-patterns",
            "olav.learning.patterns:run_extract_patterns",
            "0 3 * * *",
            "Distil repeated operational events into expert_knowledge patterns.",
        ),
        BuiltinJob(
            "gc",
            "olav.memory.lifecycle:run_gc",
            "0 5 * * 0",
            "Remove expired and invalidated memories.",
        ),
    )
}


@dataclass(frozen=True)
class JobResult:
    job: str
    status: str  # ok | error
    at: str  # ISO 8601 with offset: when the run started
    message: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "at": self.at,
            "message": redact_text(self.message),  # jobs.yaml is plain text on disk
            "duration_s": self.duration_s,
        }

    @classmethod
    def from_json(cls, job: str, data: Any) -> JobResult | None:
        if not isinstance(data, dict):
            return None
        try:
            duration = float(data.get("duration_s") or 0.0)
        except (TypeError, ValueError):
            duration = 0.0
        return cls(
            job=job,
            status=str(data.get("status", "")),
            at=str(data.get("at", "")),
            message=str(data.get("message", "")),
            duration_s=duration,
        )


@dataclass(frozen=True)
class JobSpec:
    name: str
    schedule: str
    enabled: bool
    target: str
    builtin: bool
    description: str = ""
    last_result: JobResult | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "builtin": self.builtin,
            "target": self.target,
            "schedule": self.schedule,
            "enabled": self.enabled,
            "description": self.description,
            "last_result": self.last_result.to_json() if self.last_result else None,
        }


# --------------------------------------------------------------------------- the jobs file


def jobs_path(ws: Workspace) -> Path:
    return ws.olav_dir / JOBS_FILE


def read_jobs_file(ws: Workspace) -> dict[str, dict[str, Any]]:
    """The raw ``jobs:`` mapping (empty when the file does not exist yet)."""
    path = jobs_path(ws)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    fix = "Fix it, or delete it to reset every job to its default (disabled)"
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise CronError(f"{path}{where} is not valid YAML", hint=fix) from None
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(jobs, dict | None):
        raise CronError(f"{path} must hold a mapping 'jobs: {{name: {{...}}}}'", hint=fix)
    out: dict[str, dict[str, Any]] = {}
    for name, entry in (jobs or {}).items():
        if not isinstance(entry, dict):
            raise CronError(f"{path}: job '{name}' must be a mapping", hint=fix)
        out[str(name)] = dict(entry)
    return out


def _write_atomic(path: Path, jobs: dict[str, dict[str, Any]]) -> None:
    text = _HEADER + yaml.safe_dump(
        {"jobs": jobs}, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000
    )
    atomic_write_text(path, text)


@contextmanager
def edit_jobs(ws: Workspace) -> Iterator[dict[str, dict[str, Any]]]:
    """Yield the jobs mapping under the file lock; write it back atomically on success."""
    from filelock import FileLock, Timeout

    path = jobs_path(ws)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise CronError(
            f"{path} stayed locked by another process for {LOCK_TIMEOUT_S:.0f} s",
            hint=f"Retry; if nothing else is running, delete {path}.lock",
        ) from None
    try:
        jobs = read_jobs_file(ws)
        yield jobs
        _write_atomic(path, jobs)
    finally:
        lock.release()


# --------------------------------------------------------------------------- registry


def _spec(name: str, entry: dict[str, Any]) -> JobSpec:
    builtin = BUILTIN_JOBS.get(name)
    if builtin is not None:
        target, default, description = builtin.target, builtin.schedule, builtin.description
    else:
        target, default = str(entry.get("target") or ""), ""
        description = str(entry.get("description") or "")
    return JobSpec(
        name=name,
        schedule=str(entry.get("schedule") or default),
        enabled=bool(entry.get("enabled", False)),
        target=target,
        builtin=builtin is not None,
        description=description,
        last_result=JobResult.from_json(name, entry.get("last_result")),
    )


def _specs(jobs: dict[str, dict[str, Any]]) -> list[JobSpec]:
    specs = [_spec(name, jobs.get(name, {})) for name in BUILTIN_JOBS]
    specs += [_spec(name, e) for name, e in jobs.items() if name not in BUILTIN_JOBS]
    return specs


def known_names(jobs: dict[str, dict[str, Any]]) -> list[str]:
    return [s.name for s in _specs(jobs) if s.builtin or s.target]


def list_jobs(ws: Workspace) -> list[JobSpec]:
    """Built-in jobs first (configured or not), then custom jobs from the jobs file."""
    return [s for s in _specs(read_jobs_file(ws)) if s.builtin or s.target]


def get_job(ws: Workspace, name: str) -> JobSpec:
    jobs = read_jobs_file(ws)
    spec = _spec(name, jobs.get(name, {}))
    if not (spec.builtin or (name in jobs and spec.target)):
        raise UnknownJobError(name, known_names(jobs))
    return spec


def validate_target(target: str) -> str:
    target = target.strip()
    if not _TARGET_RE.match(target):
        raise CronError(
            f"job target '{target}' is not 'module:function'",
            hint="Name an importable function, e.g. mypkg.jobs:nightly",
        )
    return target


def enable_job(
    ws: Workspace, name: str, *, schedule: str | None = None, target: str | None = None
) -> JobSpec:
    """Enable ``name`` (optionally with a new schedule; a custom job also needs a target)."""
    from olav.cron.expression import validate_expression

    if schedule is not None:
        schedule = validate_expression(schedule)
    if target is not None:
        target = validate_target(target)
    with edit_jobs(ws) as jobs:
        entry = jobs.get(name, {})
        builtin = BUILTIN_JOBS.get(name)
        if builtin is not None:
            if target is not None and target != builtin.target:
                raise CronError(
                    f"'{name}' is a built-in job; its target cannot be changed",
                    hint="Give your job another name",
                )
            entry.pop("target", None)
        else:
            if target is None and not entry.get("target"):
                raise UnknownJobError(name, known_names(jobs))
            if not _NAME_RE.match(name):
                raise CronError(
                    f"job name '{name}' is not allowed",
                    hint="Use lowercase letters, digits, '-', '_' and '.' (64 at most)",
                )
            if target is not None:
                entry["target"] = target
        chosen = schedule or entry.get("schedule") or (builtin.schedule if builtin else None)
        if not chosen:
            raise CronError(f"custom job '{name}' has no schedule", hint='Pass --at "0 4 * * *"')
        if schedule is None:
            chosen = validate_expression(str(chosen))  # a hand-edited file may hold anything
        entry["schedule"] = chosen
        entry["enabled"] = True
        jobs[name] = _ordered(entry)
        return _spec(name, jobs[name])


def disable_job(ws: Workspace, name: str) -> JobSpec:
    with edit_jobs(ws) as jobs:
        if name not in BUILTIN_JOBS and not (jobs.get(name) or {}).get("target"):
            raise UnknownJobError(name, known_names(jobs))
        entry = jobs.get(name, {})
        entry.setdefault("schedule", BUILTIN_JOBS[name].schedule if name in BUILTIN_JOBS else "")
        entry["enabled"] = False
        jobs[name] = _ordered(entry)
        return _spec(name, jobs[name])


def _ordered(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("schedule", "enabled", "target", "description", "last_result")
    out = {k: entry[k] for k in keys if k in entry}
    out.update({k: v for k, v in entry.items() if k not in out})
    return out


def record_result(ws: Workspace, result: JobResult) -> None:
    """Store ``result`` as the job's last result (creating a disabled entry if needed)."""
    with edit_jobs(ws) as jobs:
        entry = jobs.get(result.job, {})
        if result.job in BUILTIN_JOBS:
            entry.setdefault("schedule", BUILTIN_JOBS[result.job].schedule)
            entry.setdefault("enabled", False)
        elif result.job not in jobs:
            return  # the custom job was removed while it ran
        entry["last_result"] = result.to_json()
        jobs[result.job] = _ordered(entry)


# --------------------------------------------------------------------------- running


def resolve_target(target: str, *, job: str, builtin: bool) -> JobFn:
    """Import ``module:function`` lazily; a missing module is a one-line JobTargetError."""
    module_name, _, attr = target.partition(":")
    if builtin:
        fix = "This job's implementation is not installed; update olav"
    else:
        fix = f"Fix it with `olav cron enable {job} --target module:function`"
    if not module_name or not attr:
        raise JobTargetError(f"job '{job}': target '{target}' is not 'module:function'", hint=fix)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise JobTargetError(
                f"job '{job}': module {module_name} not found (target {target})", hint=fix
            ) from None
        raise  # the module exists but one of its own imports is missing
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise JobTargetError(
            f"job '{job}': {module_name} has no function {attr} (target {target})", hint=fix
        )
    result: JobFn = fn
    return result


def one_line(text: str, limit: int = MESSAGE_MAX) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OlavError):
        return one_line(exc.one_line())
    if isinstance(exc, SystemExit):
        return one_line(f"the job exited (code {exc.code})")
    return one_line(f"{type(exc).__name__}: {exc}")


def run_lock_path(ws: Workspace, name: str) -> Path:
    return ws.olav_dir / "locks" / f"cron-{name}.lock"


def run_job(
    ws: Workspace, name: str, *, source: str = "cli", logger: logging.Logger | None = None
) -> JobResult:
    """Run job ``name`` now, in this thread; log it and record its last result.

    Failures of the job itself (its module missing included) come back as a result with
    status ``error``; only an unknown name or a job already running elsewhere raises.
    """
    from filelock import FileLock, Timeout

    if logger is None:
        get_job(ws, name)  # an unknown name is refused before anything is logged
        with cron_logger(ws) as log:
            return run_job(ws, name, source=source, logger=log)
    spec = get_job(ws, name)
    lock_path = run_lock_path(ws, name)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise JobBusyError(
            f"job '{name}' is already running in another process",
            hint="Wait for it to finish; `olav cron list` shows its last result",
        ) from None
    try:
        started = datetime.now().astimezone()
        logger.info(kv("run.start", job=name, source=source, target=spec.target))
        t0 = time.monotonic()
        try:
            fn = resolve_target(spec.target, job=name, builtin=spec.builtin)
            summary = fn(ws)
            status = STATUS_OK
            message = one_line(summary if summary is not None else "") or "done"
        except (Exception, SystemExit) as exc:
            status, message = STATUS_ERROR, describe_error(exc)
        result = JobResult(
            job=name,
            status=status,
            at=started.isoformat(timespec="seconds"),
            message=message,
            duration_s=round(time.monotonic() - t0, 3),
        )
        logger.log(
            logging.INFO if result.ok else logging.ERROR,
            kv(
                "run.finish",
                job=name,
                source=source,
                status=result.status,
                duration_s=result.duration_s,
                message=result.message,
            ),
        )
        try:
            record_result(ws, result)
        except OlavError as exc:
            logger.error(kv("run.unrecorded", job=name, message=exc.one_line()))
            raise
        return result
    finally:
        lock.release()


# --------------------------------------------------------------------------- logging


def _value(value: Any) -> str:
    text = "null" if value is None else str(value)
    if text and not re.search(r'[\s"=\\]', text):
        return text
    return json.dumps(text, ensure_ascii=False)


def kv(event: str, **fields: Any) -> str:
    """A one-line ``event=... key=value`` record (values with spaces are JSON-quoted)."""
    return " ".join([f"event={event}", *(f"{k}={_value(v)}" for k, v in fields.items())])


class _LineFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(datefmt="%Y-%m-%dT%H:%M:%S%z")

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if not message.startswith("event="):
            message = f"event=log logger={record.name} message={_value(message)}"
        line = f"ts={self.formatTime(record, self.datefmt)} level={record.levelname} {message}"
        if record.exc_info:
            line += " traceback=" + _value(self.formatException(record.exc_info))
        return redact_text(line)  # a job's error may quote a token or a connection string


@contextmanager
def cron_logger(ws: Workspace, *, stderr: bool = False) -> Iterator[logging.Logger]:
    """The ``olav.cron`` logger writing one-line records to ``<logs>/cron.log`` (rotated)."""
    ws.logs.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("olav.cron")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    formatter = _LineFormatter()
    handlers: list[logging.Handler] = [
        RotatingFileHandler(ws.logs / LOG_FILE, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    ]
    if stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    aps = logging.getLogger("apscheduler")
    for handler in handlers:
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        if stderr:  # the daemon: APScheduler's own warnings (missed runs...) go there too
            aps.addHandler(handler)
    if stderr:
        aps.setLevel(logging.WARNING)
    try:
        yield logger
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
            aps.removeHandler(handler)
            handler.close()
