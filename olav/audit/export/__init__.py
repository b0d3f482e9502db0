"""Audited runs as datasets (``olav log``): read runs from audit.duckdb, turn them into OpenAI
chat fine-tuning lines, ShareGPT lines (the LLaMA-Factory convention with tools) or
evaluation trajectories, check every line before it is written, and split train/test by
thread. One module per part:

- :mod:`~olav.audit.export.runs`: what is read (:class:`RunFilter`, :class:`AuditedRun`,
  :class:`Step`); :mod:`~olav.audit.export.read`: reading runs and their details;
- :mod:`~olav.audit.export.tools`: the tools a run called, as function specs;
- :mod:`~olav.audit.export.common`: the options and what every format shares (redacting
  again, the memories block);
- one module per format, each writer beside its validator:
  :mod:`~olav.audit.export.openai`, :mod:`~olav.audit.export.sharegpt`,
  :mod:`~olav.audit.export.trajectory`;
- :mod:`~olav.audit.export.split` (train/test by thread) and
  :mod:`~olav.audit.export.sinks` (the files written, and the summary);
- here: a run's line in its format (:func:`run_line`) and the export (:func:`export_runs`).

Secrets are redacted again on the way out, with the audit's own rules
(:mod:`olav.core.redact`): rows written by an older olav were redacted by older rules.

No terminal here (the CLI is :mod:`olav.cli.log`), and no import of the engine: the tools'
schemas come in as a catalog (:func:`tool_catalog`) that the caller builds from the registry.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from olav.audit.events import RUN_OUTCOMES
from olav.audit.export.common import MEMORY_BLOCK, ExportOptions, Skip, redact_again
from olav.audit.export.openai import openai_line, validate_openai
from olav.audit.export.read import (
    BATCH,
    count_runs,
    ensure_audit,
    iter_runs,
    list_runs,
    load_run,
    reasoning_paired,
    resolve_run,
    runs_sql,
)
from olav.audit.export.runs import AuditedRun, RunFilter, Step
from olav.audit.export.sharegpt import sharegpt_line, validate_sharegpt
from olav.audit.export.sinks import ExportSummary, JsonlSink
from olav.audit.export.split import split_groups, split_test_path
from olav.audit.export.tools import TOOL_PARAMETERS, tool_catalog
from olav.audit.export.trajectory import trajectory_line
from olav.core.errors import OlavError

__all__ = [
    "BATCH",
    "FORMATS",
    "MEMORY_BLOCK",
    "RUN_OUTCOMES",
    "TOOL_PARAMETERS",
    "AuditedRun",
    "ExportOptions",
    "ExportSummary",
    "JsonlSink",
    "RunFilter",
    "Step",
    "count_runs",
    "ensure_audit",
    "export_runs",
    "iter_runs",
    "list_runs",
    "load_run",
    "openai_line",
    "reasoning_paired",
    "redact_again",
    "resolve_run",
    "run_line",
    "runs_sql",
    "sharegpt_line",
    "split_groups",
    "split_test_path",
    "tool_catalog",
    "trajectory_line",
    "validate_openai",
    "validate_sharegpt",
]

FORMATS = ("openai", "sharegpt", "trajectory")
_LINES = {"openai": openai_line, "sharegpt": sharegpt_line, "trajectory": trajectory_line}
_VALIDATORS = {"openai": validate_openai, "sharegpt": validate_sharegpt}


def run_line(
    run: AuditedRun, catalog: Mapping[str, Any], opts: ExportOptions
) -> tuple[dict[str, Any] | None, str | None]:
    """(line, None) for a run the format takes, (None, reason) for one it does not."""
    if not run.steps:
        return None, "no_messages"
    try:
        line = _LINES[opts.format](run, catalog, opts)
    except Skip as skip:
        return None, str(skip)
    validate = _VALIDATORS.get(opts.format)
    reason = validate(line) if validate else None
    return (None, reason) if reason else (line, None)


def export_runs(
    path: Path,
    target: Path | IO[str],
    *,
    flt: RunFilter = RunFilter(),
    opts: ExportOptions = ExportOptions(),
    catalog: Mapping[str, Any] | None = None,
) -> ExportSummary:
    """Write the runs that pass ``flt`` to ``target`` (a file, written atomically, or a
    stream), one JSON line each, oldest first. A run its format's validator rejects is
    skipped and counted by reason, never written. With ``opts.split`` a second file
    (:func:`split_test_path`) gets the runs of that share of the threads."""
    if opts.format not in FORMATS:
        raise OlavError(f"unknown format {opts.format!r}", hint="Use " + ", ".join(FORMATS))
    if not 0 <= opts.split < 1:
        raise OlavError(f"--split {opts.split} is not a share", hint="Use a number in [0, 1)")
    if opts.split and not isinstance(target, Path):
        raise OlavError("--split writes two files", hint="Pass -o FILE, not stdout")
    started = time.perf_counter()
    summary = ExportSummary(opts.format)
    runs = list_runs(path, flt, newest_first=False)
    test_groups = split_groups((r.group for r in runs), opts.split, opts.seed)
    sinks = [JsonlSink(target, "train" if opts.split else "")]
    try:
        if opts.split:
            assert isinstance(target, Path)
            sinks.append(JsonlSink(split_test_path(target), "test"))
        for run in iter_runs(path, runs):
            line, reason = run_line(run, catalog or {}, opts)
            if line is None:
                summary.skipped[reason or "invalid"] += 1
                continue
            sink = sinks[1] if run.group in test_groups and len(sinks) > 1 else sinks[0]
            sink.write(line, run.group)
            summary.exported += 1
            if opts.reasoning and opts.format != "trajectory" and not reasoning_paired(run):
                summary.reasoning_unpaired += 1
            run.steps = []  # a long export keeps only the run it is writing
    except BaseException:
        for sink in sinks:
            sink.abort()
        raise
    for sink in sinks:
        sink.commit()
    summary.files = [s.describe() for s in sinks]
    summary.seconds = time.perf_counter() - started
    return summary
