"""`olav engine` without building anything (the build and the server run in tests/engine):
its state read from its folder, a server that died forgotten, the workspace pointed at it with
its comments kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from olav.admin.engine import Running, running, workspace_settings
from olav.admin.setup import set_settings
from tests.helpers import HASH_CONFIG, olav_here, workspace_from_template


def test_status_of_an_engine_never_built_says_how_to_get_one(tmp_path: Path) -> None:
    ws = workspace_from_template(tmp_path / "ws", "hash", HASH_CONFIG)
    home = tmp_path / "engine"
    res = olav_here(ws, "engine", "status", "--home", str(home), "--json")
    assert json.loads(res.stdout) == {
        "home": str(home), "built": False, "running": False, "url": None, "window": None,
    }  # fmt: skip
    shown = olav_here(ws, "engine", "status", "--home", str(home)).stdout
    assert "not built: `olav engine start` builds it" in shown
    stopped = olav_here(ws, "engine", "stop", "--home", str(home))
    assert stopped.returncode == 0 and "the engine was not running" in stopped.stdout


def test_a_server_that_died_is_not_taken_for_running(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "pass"])  # a pid that has ended
    assert done.returncode == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    info = {"pid": dead.pid, "url": "http://127.0.0.1:9/v1", "window": 8192, "port": 9}
    (tmp_path / "server.json").write_text(json.dumps(info))
    assert running(tmp_path) is None
    (tmp_path / "server.json").write_text("{not json")
    assert running(tmp_path) is None  # a torn file is no server either


def test_pointing_a_workspace_keeps_the_comments_of_olav_yaml(tmp_path: Path) -> None:
    config = tmp_path / "olav.yaml"
    config.write_text(
        "# my settings\nllm:\n  provider: ollama  \n  model: qwen3:8b\n  # my comment\n"
        "  num_ctx: 16384\nembedder:\n  model: e5-small\n",
        encoding="utf-8",
    )
    found = Running("http://127.0.0.1:8765/v1", 1, 8192, started=True)
    set_settings(config, "llm", workspace_settings(found))
    text = config.read_text(encoding="utf-8")
    assert "# my settings" in text and "  # my comment" in text
    assert "embedder:\n  model: e5-small" in text  # another section's "model" is left alone
    import yaml

    llm = yaml.safe_load(text)["llm"]
    assert llm == {
        "provider": "openai", "model": "smollm2", "num_ctx": 8192,
        "base_url": "http://127.0.0.1:8765/v1", "num_predict": 512,
    }  # fmt: skip
