"""The terminal chat and `olav serve` on the real engine: the chat under a pty streams the
model's answer and Ctrl-C hangs up on the server mid-answer (the server says it saw the client
go); LangGraph's JavaScript SDK streams the engine's answer from `olav serve` token by token,
and the thread keeps what was streamed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pexpect

from tests.engine.conftest import Engine
from tests.engine.test_engine import workspace
from tests.helpers import olav_here, spawn_olav, wait_until

JS = Path(__file__).resolve().parents[1] / "js"
HANG_UP = "Disconnected from client"  # llama-cpp-python's server, when a stream's client goes


def test_the_chat_streams_the_engines_answer_and_ctrl_c_hangs_up_on_it(
    engine_server: Engine, tmp_path: Path
) -> None:
    ws = workspace(tmp_path / "ws", engine_server.url, "  num_predict: 2000\n")
    seen = engine_server.log.read_text().count(HANG_UP)
    chat = spawn_olav(ws, "chat")
    try:
        chat.expect("core> ")
        chat.sendline("Count from one to five hundred in words, one number per line.")
        chat.expect("per line.\r\r\n")  # the echo of what was typed
        chat.expect(r"[A-Za-z]{3,}")  # the model's first word, on the screen while it talks
        chat.sendintr()
        chat.expect("cancelled")
        chat.expect("core> ")
        wait_until(
            lambda: engine_server.log.read_text().count(HANG_UP) > seen,
            60,
            "the engine to see its client hang up",
        )
        chat.sendline("Say hello.")
        chat.expect("tokens in")  # a turn of its own, answered to its end
        chat.expect("core> ")
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    listed = json.loads(olav_here(ws, "threads", "list", "--json").stdout)
    shown = json.loads(olav_here(ws, "threads", "show", listed[0]["id"], "--json").stdout)
    turns = [(m["role"], m["content"]) for m in shown["turns"]]
    assert [r for r, _ in turns] == ["user", "assistant", "user", "assistant"], turns
    assert turns[1][1].endswith("(cancelled by the user)")


def test_olav_serve_streams_the_engines_answer_to_the_javascript_sdk(
    engine: str, tmp_path: Path
) -> None:
    from olav.access.tokens import TokenStore
    from olav.core.config import Workspace
    from tests.serve._support import start_server, stop_server

    node = shutil.which("node")
    assert node and (JS / "node_modules" / "@langchain" / "langgraph-sdk").is_dir(), (
        "the JavaScript SDK needs node and tests/js/node_modules (make install)"
    )
    ws = workspace(tmp_path / "ws", engine, "  num_predict: 64\n")
    store = TokenStore.for_workspace(Workspace.open(ws), touch_interval=None)
    _, token = store.create("alice", note="engine", role="admin")
    proc, url = start_server(ws)
    try:
        env = {
            "OLAV_URL": url,
            "OLAV_TOKEN": token,
            "OLAV_ASK": "Say hello.",
            "PATH": "/usr/bin:/bin",
        }
        done = subprocess.run(
            [node, str(JS / "engine_stream.mjs")], cwd=JS, env=env, capture_output=True,
            text=True, timeout=240,
        )  # fmt: skip
        # and OpenAI's client on /v1: the engine's answer as it comes, not one delta at the end
        import openai

        with openai.OpenAI(base_url=url + "/v1", api_key=token, max_retries=0) as client:
            stream = client.chat.completions.create(
                model="core",
                messages=[{"role": "user", "content": "Write a long story about a router."}],
                stream=True,
            )
            deltas = [c.choices[0].delta.content for c in stream if c.choices]
            capped = client.chat.completions.create(
                model="core",
                messages=[{"role": "user", "content": "Write a long story about a switch."}],
                max_tokens=8,
            )  # the client's cap reaches the engine (max_tokens, which it honours)
    finally:
        err = stop_server(proc)
    assert len([d for d in deltas if d]) >= 10, deltas
    assert capped.choices[0].finish_reason == "length"
    assert len((capped.choices[0].message.content or "").split()) <= 12
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + err[-2000:]
    assert "Traceback" not in err, err[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"messages", "values"} <= set(out["kinds"])
    assert len(out["pieces"]) >= 3  # token by token, not the answer in one piece
    assert out["type"] == "ai" and out["kept"].strip()
    assert "".join(out["pieces"]).strip() == out["kept"].strip()  # what streamed is what it kept


def test_olav_engine_start_points_a_fresh_workspace_at_a_working_model(tmp_path: Path) -> None:
    """What a person with no model server runs: the engine make engine built (the same
    folder olav engine build makes), started, the workspace pointed at it, an answer."""
    import os
    import socket

    import yaml

    from tests.helpers import HASH_CONFIG, workspace_from_template

    home = str(Path(os.environ["ENGINE_PYTHON"]).parents[2])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    ws = workspace_from_template(tmp_path / "ws", "hash", HASH_CONFIG)
    started = olav_here(ws, "engine", "start", "--home", home, "--port", port, "--ctx", "4096")
    try:
        assert started.returncode == 0, started.stderr
        assert f"started at http://127.0.0.1:{port}/v1" in started.stdout
        assert "not for work" in started.stdout
        llm = yaml.safe_load((ws / ".olav" / "olav.yaml").read_text())["llm"]
        assert llm["provider"] == "openai" and llm["base_url"] == f"http://127.0.0.1:{port}/v1"
        assert llm["model"] == "smollm2" and llm["num_ctx"] == 4096
        status = json.loads(olav_here(ws, "engine", "status", "--home", home, "--json").stdout)
        assert status["running"] and status["url"] == llm["base_url"]
        again = olav_here(ws, "engine", "start", "--home", home, "--port", port)
        assert "already running" in again.stdout  # reused, not a second server
        out = json.loads(olav_here(ws, "ask", "Say hello.", "--json").stdout)
        assert out["status"] == "completed" and out["answer"].strip()
        doctor = olav_here(ws, "doctor").stdout
        assert f"http://127.0.0.1:{port}/v1 answers" in doctor
    finally:
        stopped = olav_here(ws, "engine", "stop", "--home", home)
    assert "stopped the engine" in stopped.stdout
    gone = json.loads(olav_here(ws, "engine", "status", "--home", home, "--json").stdout)
    assert gone["running"] is False


def test_a_clients_tools_and_json_schema_reach_the_real_engine(engine: str, tmp_path: Path) -> None:
    """olav as the model of a client's loop on llama-cpp-python's server: the client's tools
    are accepted by the engine, and a json_schema format (which that server answers with a
    500) is held by json_object and the schema instead, the answer valid under the schema."""
    import openai

    from olav.access.tokens import TokenStore
    from olav.core.config import Workspace
    from tests.serve._support import start_server, stop_server

    ws = workspace(tmp_path / "ws", engine, "  num_predict: 96\n")
    _, token = TokenStore.for_workspace(Workspace.open(ws), touch_interval=None).create("alice")
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
        "required": ["city", "sunny"],
    }
    weather = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}}, "required": ["city"]}},
    }  # fmt: skip
    proc, url = start_server(ws)
    try:
        with openai.OpenAI(base_url=url + "/v1", api_key=token, max_retries=0) as client:
            held = client.chat.completions.create(
                model="olav/core",
                messages=[{"role": "user", "content": "Is it sunny in Paris? Answer as JSON."}],
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "weather", "schema": schema},
                },
            )
            called = client.chat.completions.create(
                model="olav/core",
                messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                tools=[weather],  # type: ignore[list-item]
            )
    finally:
        err = stop_server(proc)
    assert "Traceback" not in err, err[-4000:]
    import jsonschema

    jsonschema.validate(json.loads(held.choices[0].message.content or ""), schema)
    message = called.choices[0].message
    for call in message.tool_calls or []:  # whatever a 135M model does, a call is a valid one
        assert call.function.name == "get_weather"  # type: ignore[union-attr]
        assert isinstance(json.loads(call.function.arguments)["city"], str)  # type: ignore[union-attr]
    assert message.tool_calls or (message.content or "").strip()
