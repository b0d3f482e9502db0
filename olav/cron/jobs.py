"""Running a job now: import its ``module:function`` target, call it with the workspace
under the job's run lock, log the run and record its last result in the jobs file.

A job is a callable ``fn(ws) -> str`` (a one-line summary), imported only when it runs.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.cron import JobBusyError, JobTargetError
from olav.cron.jobfile import get_job, record_result
from olav.cron.joblog import cron_logger, kv
from olav.cron.registry import STATUS_ERROR, STATUS_OK, JobResult, JobSpec

JobFn = Callable[[Workspace], Any]
MESSAGE_MAX = 300


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
        result = _call(ws, spec, source, logger)
        try:
            record_result(ws, result)
        except OlavError as exc:
            logger.error(kv("run.unrecorded", job=name, message=exc.one_line()))
            raise
        return result
    finally:
        lock.release()


def _call(ws: Workspace, spec: JobSpec, source: str, logger: logging.Logger) -> JobResult:
    """Call the job's function and log its start and finish; its failure becomes the result."""
    name = spec.name
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
    return result
