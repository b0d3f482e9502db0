"""The jobs file, ``.olav/cron.yaml``, shared by the CLI and the daemon, which may write it at
the same time: every change is a read-modify-write under a file lock (``cron.yaml.lock``) that
ends in an atomic replace, so a reader never sees half a file. A built-in job takes its target
from :data:`~olav.cron.registry.BUILTIN_JOBS`; a custom job stores its ``target`` here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from olav.core import yamltext
from olav.core.config import Workspace
from olav.core.fsutil import atomic_write_text
from olav.cron import CronError, UnknownJobError
from olav.cron.registry import BUILTIN_JOBS, JobResult, JobSpec

JOBS_FILE = "cron.yaml"
LOCK_TIMEOUT_S = 30.0
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_TARGET_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_HEADER = (
    "# olav cron jobs, written by `olav cron enable/disable/run` and `olav cron serve`.\n"
    "# schedule: a cron expression (day-of-week 0 or 7 = Sunday). last_result: the latest run.\n"
    '# A custom job also names a target, "module:function", called as function(workspace).\n'
)


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
        data = yamltext.safe_load(text) or {}
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
