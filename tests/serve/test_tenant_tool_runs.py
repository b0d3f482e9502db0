"""Issue 52's one property in bob's real runs: each tool of each template agent, called by a
compliant scripted model with arguments hypothesis draws (its approval given when it asks).
alice's canaries (tests/serve/_tenants.py) never appear in what bob gets back, or in any
message his runs send the model: its prompt, the recalled block, the tools' results."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.serve._tenants import World, _do, _text, _value, planted

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py)


@pytest.fixture(scope="module")
def world(_hash_ws_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with planted(_hash_ws_template, tmp_path_factory.mktemp("tenant-runs") / "ws") as w:
        yield w


RUNS_PER_TOOL = 2


def test_every_tool_of_every_agent_in_bobs_runs_leaks_nothing(world: World) -> None:
    """Each tool of each template agent, called by the scripted model in bob's real runs
    (its approval given when it asks), with arguments hypothesis draws: nothing of alice's in
    what bob gets back, or in the messages his runs send the model."""
    every = [(a, n) for a, tools in world.tools.items() for n, _ in tools]
    for agent, name in every:
        _runs_of(world, agent, name)()
    assert set(every) - world.called == set(), "tools no run called"


def _runs_of(world: World, agent: str, name: str) -> Any:
    """A hypothesis test of bob's runs that call ``agent``'s tool ``name``."""

    @settings(
        max_examples=RUNS_PER_TOOL,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def runs(data: st.DataObject) -> None:
        model = dict(world.tools[agent])[name]
        fields = list(model.model_fields)
        args = {f: data.draw(_value(world)) for f in fields if data.draw(st.booleans())}
        _do(world, "run", (agent, name, args, data.draw(_text(world))))

    return runs
