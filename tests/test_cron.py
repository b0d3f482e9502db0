"""olav cron: the jobs file, run-now and the serve daemon (expressions: test_cron_expression.py).

The job functions below are loaded by dotted path (tests.test_cron:_ok_job) from job specs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import CRON_SERVE, clean_env, olav_entry, wait_until

REPO = Path(__file__).resolve().parents[1]


def _ok_job(ws: Any) -> str:
    return f"ok job ran in {ws.root.name}"


def _failing_job(ws: Any) -> str:
    raise RuntimeError("database exploded\n  while doing things")


def _leaky_job(ws: Any) -> str:
    raise RuntimeError(
        "login failed for postgres://olav:hunter2pass@db:5432/x token=sk-live123456789abcdef"
    )


def test_a_failing_jobs_secrets_reach_neither_cron_log_nor_cron_yaml(hash_ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.cron.jobfile import enable_job, jobs_path
    from olav.cron.joblog import LOG_FILE
    from olav.cron.jobs import run_job

    ws = Workspace.open(hash_ws)
    enable_job(ws, "leaky", schedule="0 4 * * *", target="tests.test_cron:_leaky_job")
    result = run_job(ws, "leaky")
    assert not result.ok and "login failed" in result.message
    for path in (ws.logs / LOG_FILE, jobs_path(ws)):
        text = path.read_text(encoding="utf-8")
        assert "login failed" in text, path
        assert "hunter2pass" not in text and "sk-live123456789abcdef" not in text, path


def _list_json(olav: Any) -> dict[str, Any]:
    result = olav("cron", "list", "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _job(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(j for j in data["jobs"] if j["name"] == name)


# --------------------------------------------------------------------------- jobs file + CLI


def test_builtin_registry() -> None:
    from olav.cron.registry import BUILTIN_JOBS

    assert {name: job.schedule for name, job in BUILTIN_JOBS.items()} == {
        "reflect": "0 4 * * *",
        "trace-learn": "30 * * * *",
        "extract-patterns": "0 3 * * *",
        "gc": "0 5 * * 0",
    }
    assert BUILTIN_JOBS["reflect"].target == "olav.cron.builtin:run_reflector"
    assert BUILTIN_JOBS["trace-learn"].target == "olav.learning.trace_learner:run_trace_learner"
    assert BUILTIN_JOBS["extract-patterns"].target == "olav.learning.patterns:run_extract_patterns"
    assert BUILTIN_JOBS["gc"].target == "olav.cron.builtin:run_gc"


def test_enable_disable_list_round_trip(hash_ws: Path, olav: Any) -> None:
    data = _list_json(olav)
    assert [j["name"] for j in data["jobs"]] == ["reflect", "trace-learn", "extract-patterns", "gc"]
    assert not any(j["enabled"] for j in data["jobs"])
    assert data["daemon"] == {"running": False, "pid": None}

    result = olav("cron", "enable", "reflect")
    assert result.exit_code == 0, result.output
    assert "0 4 * * *" in result.output
    assert olav("cron", "enable", "gc", "--at", "0  4 * * 1-5").exit_code == 0

    data = _list_json(olav)
    reflect, gc = _job(data, "reflect"), _job(data, "gc")
    assert reflect["enabled"] is True and reflect["schedule"] == "0 4 * * *"
    assert datetime.fromisoformat(reflect["next_run"]).hour == 4
    assert gc["enabled"] is True and gc["schedule"] == "0 4 * * 1-5"
    assert datetime.fromisoformat(gc["next_run"]).weekday() < 5
    assert _job(data, "trace-learn")["enabled"] is False
    assert _job(data, "trace-learn")["next_run"] is None
    assert reflect["last_result"] is None

    assert olav("cron", "disable", "gc").exit_code == 0
    data = _list_json(olav)
    assert _job(data, "gc")["enabled"] is False
    assert _job(data, "gc")["schedule"] == "0 4 * * 1-5"  # kept for the next enable
    assert olav("cron", "enable", "gc").exit_code == 0
    assert _job(_list_json(olav), "gc")["schedule"] == "0 4 * * 1-5"

    on_disk = yaml.safe_load((hash_ws / ".olav" / "cron.yaml").read_text())
    assert on_disk["jobs"]["reflect"] == {"schedule": "0 4 * * *", "enabled": True}
    assert on_disk["jobs"]["gc"] == {"schedule": "0 4 * * 1-5", "enabled": True}
    assert not list((hash_ws / ".olav").glob("*.tmp"))

    table = olav("cron", "list")
    assert table.exit_code == 0
    assert "reflect" in table.stdout and "never run" in table.stdout


def test_invalid_expression_refused_by_the_cli(hash_ws: Path, olav: Any) -> None:
    from olav.cron import CronExpressionError

    result = olav("cron", "enable", "reflect", "--at", "0 4 * *")
    assert result.exit_code != 0
    assert isinstance(result.exception, CronExpressionError)
    assert "'0 4 * *'" in str(result.exception)
    assert not (hash_ws / ".olav" / "cron.yaml").exists()

    proc = olav_entry(hash_ws, "cron", "enable", "reflect", "--at", "0 4 * * 9")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "invalid cron expression '0 4 * * 9'" in lines[0]
    assert "Traceback" not in proc.stderr


def test_unknown_job_is_refused_with_the_known_names(hash_ws: Path, olav: Any) -> None:
    from olav.cron import UnknownJobError

    for args in (("enable", "nightly"), ("disable", "nightly"), ("run", "nightly")):
        result = olav("cron", *args)
        assert result.exit_code != 0
        assert isinstance(result.exception, UnknownJobError), args
        message = str(result.exception)
        assert "'nightly'" in message
        assert "reflect, trace-learn, extract-patterns, gc" in message


def test_builtin_target_cannot_be_replaced(hash_ws: Path, olav: Any) -> None:
    result = olav("cron", "enable", "reflect", "--target", "tests.test_cron:_ok_job")
    assert result.exit_code != 0
    assert "built-in" in str(result.exception)


def test_run_records_the_last_result(hash_ws: Path, olav: Any) -> None:
    for name, target in [
        ("good", "tests.test_cron:_ok_job"),
        ("bad", "tests.test_cron:_failing_job"),
        ("gone", "tests.no_such_module_for_cron:job"),
        ("nofn", "tests.test_cron:no_such_function"),
    ]:
        result = olav("cron", "enable", name, "--at", "0 4 * * *", "--target", target)
        assert result.exit_code == 0, result.output

    ok = olav("cron", "run", "good")
    assert ok.exit_code == 0, ok.output
    assert "ok job ran in ws" in ok.stdout
    assert olav("cron", "run", "bad").exit_code == 1
    assert olav("cron", "run", "gone").exit_code == 1
    assert olav("cron", "run", "nofn").exit_code == 1

    data = _list_json(olav)
    good = _job(data, "good")["last_result"]
    assert good["status"] == "ok" and good["message"] == "ok job ran in ws"
    assert datetime.fromisoformat(good["at"]).tzinfo is not None
    bad = _job(data, "bad")["last_result"]
    assert bad["status"] == "error"
    assert bad["message"] == "RuntimeError: database exploded while doing things"
    gone = _job(data, "gone")["last_result"]
    assert gone["status"] == "error"
    assert "tests.no_such_module_for_cron not found" in gone["message"]
    nofn = _job(data, "nofn")["last_result"]
    assert "has no function no_such_function" in nofn["message"]
    assert all("\n" not in j["last_result"]["message"] for j in data["jobs"] if j["last_result"])

    log = (hash_ws / ".olav" / "logs" / "cron.log").read_text()
    assert "event=run.finish job=good source=cli status=ok" in log
    assert "event=run.finish job=bad source=cli status=error" in log
    assert all(line.startswith("ts=") for line in log.splitlines())

    as_json = olav("cron", "run", "good", "--json")
    assert json.loads(as_json.stdout)["status"] == "ok"


def test_builtin_whose_module_is_missing_records_an_error(
    hash_ws: Path, olav: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from olav.cron import registry

    fake = registry.BuiltinJob("later", "olav.not_written_yet:run_later", "0 1 * * *", "test")
    monkeypatch.setitem(registry.BUILTIN_JOBS, "later", fake)
    result = olav("cron", "run", "later")
    assert result.exit_code == 1
    last = _job(_list_json(olav), "later")["last_result"]
    assert last["status"] == "error"
    assert "olav.not_written_yet not found" in last["message"]
    assert "\n" not in last["message"]


def test_concurrent_writers_lose_nothing(hash_ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.cron.jobfile import enable_job, list_jobs
    from olav.cron.jobs import run_job

    ws = Workspace.open(hash_ws)
    enable_job(ws, "good", schedule="* * * * *", target="tests.test_cron:_ok_job")
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            enable_job(ws, f"job{i}", schedule=f"{i} * * * *", target="tests.test_cron:_ok_job")
            if i % 3 == 0:
                run_job(ws, "good")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    busy = [e for e in errors if type(e).__name__ == "JobBusyError"]
    assert len(busy) == len(errors), errors
    names = {s.name for s in list_jobs(ws)}
    assert {f"job{i}" for i in range(12)} <= names
    spec = next(s for s in list_jobs(ws) if s.name == "good")
    assert spec.last_result is not None and spec.last_result.ok


def test_daemon_reconciles_with_the_jobs_file(hash_ws: Path) -> None:
    from olav.core.config import Workspace
    from olav.cron.jobfile import disable_job, enable_job
    from olav.cron.joblog import cron_logger
    from olav.cron.scheduler import CronDaemon

    ws = Workspace.open(hash_ws)
    with cron_logger(ws) as logger:
        daemon = CronDaemon(ws, logger, timezone=UTC)
        daemon.start()
        try:
            assert daemon.reconcile(force=True) == []
            enable_job(ws, "reflect")
            enable_job(ws, "mine", schedule="0 4 * * 0", target="tests.test_cron:_ok_job")
            assert sorted(daemon.reconcile()) == ["+mine", "+reflect"]
            nxt = daemon.scheduled()["mine"]
            assert nxt is not None and nxt.weekday() == 6 and nxt.hour == 4
            assert (nxt.minute, nxt.second) == (0, 0)  # cron's: the start of the minute
            assert daemon.reconcile() == []  # unchanged file: nothing to do
            enable_job(ws, "mine", schedule="0 4 * * 1-5")
            assert daemon.reconcile() == ["~mine"]
            nxt = daemon.scheduled()["mine"]
            assert nxt is not None and nxt.weekday() < 5
            disable_job(ws, "reflect")
            assert daemon.reconcile() == ["-reflect"]
            assert set(daemon.scheduled()) == {"mine"}
            job = daemon.scheduler.get_job("mine")
            assert job.max_instances == 1 and job.coalesce is True
        finally:
            daemon.shutdown()
    log = (hash_ws / ".olav" / "logs" / "cron.log").read_text()
    assert "event=job.scheduled job=mine" in log
    assert "event=job.unscheduled job=reflect" in log


def test_serve_once_for_stops_cleanly(hash_ws: Path, olav: Any) -> None:
    result = olav("cron", "serve", "--once-for", "0.3")
    assert result.exit_code == 0, result.output
    log = (hash_ws / ".olav" / "logs" / "cron.log").read_text()
    assert "event=daemon.start" in log
    assert "event=daemon.stop" in log and "reason=once-for" in log
    assert (hash_ws / ".olav" / "cron.pid").read_text() == ""  # released
    assert "--once-for" in olav("cron", "serve", "--help").stdout


def test_install_writes_a_user_unit(
    hash_ws: Path, olav: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit_dir = tmp_path / "units"
    result = olav("cron", "install", "--unit-dir", str(unit_dir))
    assert result.exit_code == 0, result.output
    unit = (unit_dir / "olav-cron.service").read_text()
    assert f"WorkingDirectory={hash_ws}" in unit
    assert f"ExecStart={sys.executable} -m olav.cli.app cron serve" in unit
    assert "WantedBy=default.target" in unit
    assert "systemctl --user enable --now olav-cron" in result.stdout

    other = tmp_path / "other"
    (other / ".olav").mkdir(parents=True)
    monkeypatch.chdir(other)
    refused = olav("cron", "install", "--unit-dir", str(unit_dir))
    assert refused.exit_code != 0
    assert "another workspace" in str(refused.exception)
    assert olav("cron", "install", "--unit-dir", str(unit_dir), "--force").exit_code == 0
    assert f"WorkingDirectory={other.resolve()}" in (unit_dir / "olav-cron.service").read_text()
    monkeypatch.chdir(hash_ws)

    line = olav("cron", "install", "--crontab").stdout.strip().splitlines()[-1]
    assert line.startswith("@reboot cd ")
    assert str(hash_ws) in line and "-m olav.cli.app cron serve" in line


# --------------------------------------------------------------------------- the real daemon


@pytest.mark.slow
def test_serve_daemon_runs_enabled_jobs(hash_ws: Path, olav: Any, tmp_path: Path) -> None:
    env = clean_env()
    env["PYTHONPATH"] = str(REPO)  # so the daemon can import tests.test_cron:_ok_job
    pid_file = hash_ws / ".olav" / "cron.pid"
    log_file = hash_ws / ".olav" / "logs" / "cron.log"
    with (tmp_path / "serve.err").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", CRON_SERVE, "*/2"],
            cwd=hash_ws,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            wait_until(
                lambda: (
                    proc.poll() is not None
                    or (pid_file.exists() and pid_file.read_text().strip() == str(proc.pid))
                ),
                30,
                "the daemon to take its pid lock",
            )
            assert proc.poll() is None, (tmp_path / "serve.err").read_text()
            assert _list_json(olav)["daemon"] == {"running": True, "pid": proc.pid}

            # the refused second daemon: its one line, from this process
            second = olav_entry(hash_ws, "cron", "serve", "--once-for", "5")
            assert second.returncode != 0
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1, second.stderr
            assert "already running" in lines[0] and str(proc.pid) in lines[0]

            # enabled by another process while the daemon runs
            result = olav(
                "cron", "enable", "tick", "--at", "* * * * *", "--target", "tests.test_cron:_ok_job"
            )
            assert result.exit_code == 0, result.output

            def ran() -> dict[str, Any] | None:
                last: dict[str, Any] | None = _job(_list_json(olav), "tick")["last_result"]
                return last

            last = wait_until(ran, 30, "the daemon to run the per-minute job")
            assert last["status"] == "ok" and last["message"] == "ok job ran in ws"
            wait_until(
                lambda: "event=run.finish job=tick source=daemon status=ok" in log_file.read_text(),
                10,
                "the run to be logged",
            )
            assert "event=job.scheduled job=tick" in log_file.read_text()

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    log = log_file.read_text()
    assert "event=daemon.stop" in log and "reason=SIGTERM" in log
    assert _list_json(olav)["daemon"]["running"] is False
