"""agent-chat-ui's calls, made by LangGraph's JavaScript SDK from npm (tests/js), against the real
server in this process: the UI's stream modes with onRunCreated, Cancel with the SDK's wait,
approve, edit and reject, Regenerate and Edit from a checkpoint. Node and the SDK come from
`make install` (npm ci in tests/js when node is there; .ci/run installs Debian's nodejs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.serve._inprocess import serving_here
from tests.serve.test_serve_agent_ui import ToolModel

pytestmark = pytest.mark.slow
JS = Path(__file__).resolve().parents[1] / "js"
NODE_S = 240


def test_agent_chat_ui_calls_through_the_javascript_sdk(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        pytest.fail(
            "the JavaScript conformance test needs node and tests/js/node_modules: "
            "apt-get install nodejs npm, then `npm ci` in tests/js (make install does it)"
        )
    model = ToolModel()
    with serving_here(tmp_path / "ws", model=model) as here, model.hold("hold-js") as gate:
        cancelled = threading.Event()

        def release_once_cancelled() -> None:
            # the run is held in its model call until the client has asked to cancel it: the
            # cancel then takes effect at its next step, as the UI's stop does mid-answer
            gate.wait_held()
            held = [r for r in list(here.server.runs._runs.values()) if "hold-js" in r.text]
            if held and held[0].cancel.wait(NODE_S):
                cancelled.set()
            gate.release.set()

        watcher = threading.Thread(target=release_once_cancelled, daemon=True)
        watcher.start()
        env = {"OLAV_URL": here.url, "OLAV_TOKEN": here.tokens[here.alice], "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [node, str(JS / "agent_chat_ui.mjs")],
            cwd=JS,
            env=env,
            capture_output=True,
            text=True,
            timeout=NODE_S,
        )
        watcher.join(NODE_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    checks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [c["check"] for c in checks] == [
        "stream",
        "cancel",
        "approve",
        "edit",
        "reject",
        "stale-answer",
        "regenerate",
        "edit-from-checkpoint",
    ]
    assert set(checks[0]["modes"]) == {"metadata", "values", "messages", "end"}
    assert cancelled.is_set()
