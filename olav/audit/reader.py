"""The audit as one operator may read it: the one way ``olav serve`` (its console, its
routes) reads runs, their messages, recalls and health (issue 52: "a reader that cannot be
built without an operator", as memory's ``Reader`` is for rows).

An :class:`AuditReader` names its operator, and every read it offers is narrowed to the runs
recorded as theirs (with ``or_unnamed``, also those that name nobody: olav's own jobs, or runs
recorded before runs named their operator, which only the workspace's own operator sees). A
caller's :class:`~olav.audit.export.RunFilter` cannot widen it: its operator fields are
replaced. A run that is not theirs is missing, the same as one that never was.

The terminal's commands (``olav log``, ``olav memory``) read the whole audit through
``olav.audit.export`` and ``olav.audit.queries``: the workspace's owner may. The border test
(tests/test_tenant_audit.py) keeps olav/serve and olav/mcp to this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from olav.audit.db import connect
from olav.audit.export import AuditedRun, RunFilter, iter_runs, list_runs, load_run
from olav.audit.export import count_runs as _count_runs
from olav.core.errors import OlavError


class AuditReader:
    """The audit at ``path`` as ``operator`` may read it (see the module doc). Reads use a
    read-write connection: the server that reads also writes the audit (DuckDB refuses a
    second configuration of one file in one process)."""

    def __init__(self, path: Path, operator: str, *, or_unnamed: bool = False) -> None:
        if not str(operator or "").strip():
            raise ValueError("an AuditReader reads for an operator: name one")
        self.path = Path(path)
        self.operator = str(operator)
        self.or_unnamed = or_unnamed

    def sees(self, operator: str | None) -> bool:
        """Whether a run (or a draft of one) recorded as ``operator``'s is this reader's
        (None or "": a run that names nobody)."""
        if operator:
            return operator == self.operator
        return self.or_unnamed

    def narrow(self, flt: RunFilter | None = None) -> RunFilter:
        """``flt`` (any filter by default) kept to this reader's runs, whatever it said."""
        return dataclasses.replace(
            flt or RunFilter(), operator=self.operator, or_unnamed=self.or_unnamed
        )

    # -- runs ------------------------------------------------------------------------------

    def runs(self, flt: RunFilter | None = None) -> list[AuditedRun]:
        """The reader's runs that pass ``flt``, newest first, without their details."""
        return list_runs(self.path, self.narrow(flt), read_only=False)

    def count(self, flt: RunFilter | None = None) -> int:
        return _count_runs(self.path, self.narrow(flt), read_only=False)

    def details(self, runs: list[AuditedRun]) -> Iterator[AuditedRun]:
        """``runs`` (from :meth:`runs`) with their messages, recalls and events; any run that
        is not the reader's is dropped, never filled."""
        return iter_runs(self.path, [r for r in runs if self.sees(r.operator)], read_only=False)

    def run(self, run_id: str) -> AuditedRun | None:
        """One of the reader's runs with its details; None when there is none by that id, or
        it is another operator's."""
        try:
            run = load_run(self.path, run_id, read_only=False)
        except OlavError:
            return None
        return run if self.sees(run.operator) else None

    def visible(self, run_ids: Iterable[str]) -> set[str]:
        """Which of ``run_ids`` are the reader's runs (an unknown id is not one)."""
        return {rid for rid, mine in self.whose(run_ids).items() if mine}

    def whose(self, run_ids: Iterable[str]) -> dict[str, bool]:
        """For each of ``run_ids`` the audit holds, whether it is the reader's run (never
        whose it is, when not); unknown ids are left out."""
        ids = sorted({str(r) for r in run_ids if r})
        if not ids:
            return {}
        with connect(self.path) as con:
            rows = con.execute(
                "SELECT id, operator FROM runs WHERE id IN (SELECT unnest(?::VARCHAR[]))", [ids]
            ).fetchall()
        return {str(rid): self.sees(op or None) for rid, op in rows}

    # -- recalls and health ----------------------------------------------------------------

    def recalls(self, *, limit: int) -> list[tuple[str | None, str, str, str]]:
        """The newest recalls of the reader's runs, (run id, query, candidates JSON, injected
        ids JSON), newest first; a recall outside any run only with ``or_unnamed``."""
        with connect(self.path) as con:
            return con.execute(
                "SELECT r.run_id, r.query, r.candidates, r.injected FROM recalls r "
                "LEFT JOIN runs ON runs.id = r.run_id "
                "WHERE runs.operator = ? OR (? AND coalesce(runs.operator, '') = '') "
                "ORDER BY r.created_at DESC LIMIT ?",
                [self.operator, self.or_unnamed, limit],
            ).fetchall()

    def health(self, since: datetime, flt: RunFilter | None = None) -> Any:
        """The Health page's rows (olav.audit.health) of the reader's runs from ``since``."""
        from olav.audit.health import health_rows

        return health_rows(self.path, since, self.narrow(flt), unattributed=self.or_unnamed)
