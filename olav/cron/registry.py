"""The built-in jobs and what a job is: its spec (from the jobs file) and its last result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from olav.core.redact import redact_text

STATUS_OK = "ok"
STATUS_ERROR = "error"


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
            "olav.cron.builtin:run_gc",
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
