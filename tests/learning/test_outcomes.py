"""Memories earn their place (issue 53, item 3), in real sessions: a precedent injected into
runs that went wrong is weakened, then suppressed, and one injected into an answer the person
corrected is suppressed at once. Being injected is no evidence of being useful.

The scripted sequence the issue asks for: a precedent confirmed by two completed runs is
injected; the run fails; it is re-injected at most once more; after a second failure it is
never injected again. After a correction, never again at once."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from olav.compose import agent_session
from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.llm.models import ScriptedChatModel
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from tests.helpers import audit_rows, scripted_ws
from tests.learning.test_loop import _register, run_scripts, services_agent  # noqa: F401

pytestmark = pytest.mark.slow

ASK = "register the influx_metrics service for the metrics team"


def _precedent(root: Path) -> str:
    """A capture of register_service confirmed by a second completed run: its id."""
    runs = [("register influx_metrics", _register("influx_metrics", "influxdb", 8086, "done"))]
    run_scripts(root, "services", runs * 2)
    store = MemoryStore.for_workspace(Workspace.open(root))
    (row,) = store.list_rows("category = 'operational_event'")
    assert not row.pending and row.invalidated_at is None, row.superseded_by
    return row.id


def _asks(root: Path, turns: list[dict[str, Any]], texts: list[str]) -> list[list[str]]:
    """Each text asked in one session on the scripted ``turns``: what each run injected."""
    ws = scripted_ws(root, turns)
    session = agent_session(
        ws, agent="services", model=ScriptedChatModel(turns=turns), learn_from_failures=False
    )
    injected = []
    for text in texts:
        before = len(session.run.recalls)
        with contextlib.suppress(OlavError):  # a scripted failure: its memories answer for it
            session.ask(text)
        injected.append([i for r in session.run.recalls[before:] for i in r.injected_ids])
        session.wait_background()
    session.release()
    return injected


def test_a_precedent_in_failing_runs_is_injected_at_most_once_after_the_first(
    services_agent: Path,  # noqa: F811
) -> None:
    pid = _precedent(services_agent)
    fail = {"error": "the catalogue refused the registration"}
    seen = _asks(services_agent, [fail] * 4, [ASK] * 4)
    assert pid in seen[0]  # injected, then its run failed
    assert pid in seen[1]  # re-injected once, weakened
    assert pid not in seen[2] and pid not in seen[3]  # suppressed after the second failure
    row = MemoryStore.for_workspace(Workspace.open(services_agent)).read(pid, EVERYONE)
    assert row is not None and row.superseded_by == "suppressed:outcomes"
    assert row.metadata["bad_runs"] == 2
    actions = audit_rows(
        services_agent,
        f"SELECT action FROM memory_decisions WHERE memory_id = '{pid}' AND kind = 'lifecycle' "
        "ORDER BY created_at",
    )
    assert [a for (a,) in actions] == ["weakened", "suppressed"]


def test_a_precedent_in_a_corrected_answer_is_never_injected_again(
    services_agent: Path,  # noqa: F811
) -> None:
    pid = _precedent(services_agent)
    turns = [{"content": "registered it"}, {"content": "sorry"}, {"content": "ok"}]
    seen = _asks(services_agent, turns, [ASK, "wrong, that is not the catalogue we use", ASK])
    assert pid in seen[0]
    assert pid not in seen[2]
    row = MemoryStore.for_workspace(Workspace.open(services_agent)).read(pid, EVERYONE)
    assert row is not None and row.superseded_by == "suppressed:correction"
