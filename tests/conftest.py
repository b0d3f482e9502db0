from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

if TYPE_CHECKING:  # nothing from olav is imported before pytest_configure cleans the env
    from tests.helpers import OlavCli, OlavMain, SessionFor

# benchmark knobs and where the console screenshots go (test_console_screens.py): not olav
# configuration
BENCH_VARS = ("OLAV_BENCH_", "OLAV_LOCOMO", "OLAV_SCREENSHOTS")


def pytest_configure(config: pytest.Config) -> None:
    """The one place the test environment is cleaned, before any test module is imported:
    tests never inherit the developer's OLAV_* configuration (a subprocess under test starts
    from ``tests.helpers.clean_env()``), and rich draws at a fixed width."""
    os.environ.setdefault("COLUMNS", "120")
    for var in [v for v in os.environ if v.startswith("OLAV_") and not v.startswith(BENCH_VARS)]:
        del os.environ[var]
    _build_the_cli_once()


def _build_the_cli_once() -> None:
    """Typer turns the app into a click command on every call (``olav_main``'s ``main()``)
    and every ``CliRunner.invoke``: 16-30 ms of building olav's 90 commands, which a user
    pays once per process and the suite paid on each of its thousands of in-process
    invocations. Here each app is built once per test process; parsing, the commands and
    their output are click's and olav's as ever."""
    import functools

    import typer.main
    import typer.testing

    build = functools.cache(typer.main.get_command)
    typer.main.get_command = build
    typer.testing._get_command = build  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with a ``slow`` test run first, then the rest, each group in the order
    pytest collected it. pytest-xdist hands out whole files in this order (``--dist loadfile
    --no-loadscope-reorder``: by default it sorts them by how many tests they hold, which puts
    the long files of one test, the fuzz among them, last), so the long ones start early and
    the many short ones fill the end, where a long file would leave the other core idle."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)


@pytest.fixture(scope="session")
def _hash_ws_template() -> Path:
    """``olav init`` with the hash embedder, run once per session (per xdist worker): each
    ``hash_ws`` is a copy of it, which costs a few milliseconds instead of an init. The same
    template as the helpers' (tests.helpers.workspace_template), so a process makes it once;
    the Ollama and OpenAI stub workspaces have theirs there too."""
    from tests.helpers import workspace_template

    return workspace_template("hash")


@pytest.fixture
def hash_ws(_hash_ws_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh workspace using the test-only hash embedder (a copy of one initialised once per
    session); cwd is its root."""
    root = tmp_path / "ws"
    shutil.copytree(_hash_ws_template, root)
    monkeypatch.chdir(root)
    return root


@pytest.fixture(scope="session")
def _e5_ws_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from olav.admin.setup import init_workspace

    root = tmp_path_factory.mktemp("e5tpl") / "ws"
    root.mkdir()
    (root / ".olav").mkdir()
    from olav.core.config import render_default_config

    (root / ".olav" / "olav.yaml").write_text(
        render_default_config().replace(
            'base_url: "http://localhost:11434"', 'base_url: "http://127.0.0.1:9"'
        )
    )
    init_workspace(root)
    return root


@pytest.fixture
def e5_ws(_e5_ws_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace primed with the bundled e5 embedder (initialised once per session)."""
    root = tmp_path / "ws"
    shutil.copytree(_e5_ws_template, root)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def olav(runner: CliRunner) -> Iterator[OlavCli]:
    """Invoke the CLI in-process: ``olav("memory", "stats")`` returns the click Result."""
    from olav.cli.app import app

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(app, list(args), input=input, catch_exceptions=True)

    yield invoke


@pytest.fixture
def olav_main() -> OlavMain:
    """Run the entry point ``olav.cli.app.main`` in-process, in the cwd: what `olav` prints on
    stdout and stderr and its exit status (an error as one red line, as a user sees it), for
    tests where a subprocess adds only its start-up time."""
    from tests.helpers import olav_entry

    def invoke(*args: str) -> subprocess.CompletedProcess[str]:
        return olav_entry(Path.cwd(), *args)

    return invoke


@pytest.fixture
def session_for(hash_ws: Path) -> SessionFor:
    """session_for(turns, **kw) -> (Session, ScriptedChatModel) over the hash workspace.
    Background trace learning is off unless a test asks for it (learn_from_failures=True)."""
    from olav.compose import agent_session
    from olav.llm.models import ScriptedChatModel
    from olav.runtime.runner import Session
    from tests.helpers import scripted_ws

    def make(turns: list[dict[str, Any]], **kw: Any) -> tuple[Session, ScriptedChatModel]:
        kw.setdefault("learn_from_failures", False)
        model = ScriptedChatModel(turns=turns)
        return agent_session(scripted_ws(hash_ws, turns), model=model, **kw), model

    return make


@pytest.fixture(scope="session")
def s3_server() -> Iterator[object]:
    """A moto S3 server in its own process on 127.0.0.1 (one per test session)."""
    from tests.s3server import start_server

    server = start_server()
    yield server
    server.stop()


@pytest.fixture
def s3_env(s3_server: object, monkeypatch: pytest.MonkeyPatch) -> object:
    """The test S3 server's credentials in AWS_* variables, for this test only."""
    for key, value in s3_server.env.items():  # type: ignore[attr-defined]
        monkeypatch.setenv(key, value)
    return s3_server
