from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

import olav
from olav.core.config import Config, find_root, render_default_config
from olav.core.errors import ConfigError, WorkspaceNotFoundError
from olav.core.settings import PROCESS_VARS, SETTINGS


def test_default_config_is_valid_yaml_with_every_key(tmp_path: Path) -> None:
    text = render_default_config()
    data = yaml.safe_load(text)
    for s in SETTINGS:
        head, name = s.key.split(".", 1)
        assert data[head][name] == s.default
        assert s.env in text  # every key documents its variable
    path = tmp_path / "olav.yaml"
    path.write_text(text)
    assert Config.load(path, environ={}).values == {s.key: s.default for s in SETTINGS}


def test_env_overrides_yaml_and_is_typed(tmp_path: Path) -> None:
    path = tmp_path / "olav.yaml"
    path.write_text("llm:\n  model: qwen3:8b\n  thinking: true\n")
    cfg = Config.load(
        path,
        environ={
            "OLAV_LLM_MODEL": "qwen3:30b",
            "OLAV_LLM_THINKING": "0",
            "OLAV_LLM_NUM_CTX": "32768",
        },
    )
    assert cfg["llm.model"] == "qwen3:30b"
    assert cfg["llm.thinking"] is False
    assert cfg["llm.num_ctx"] == 32768


@pytest.mark.parametrize(
    ("yaml_text", "env", "needle"),
    [
        ("llm:\n  modle: x\n", {}, "unknown key 'llm.modle'"),
        ("llm:\n  num_ctx: big\n", {}, "llm.num_ctx must be int"),
        ("embedder:\n  provider: magic\n", {}, "Use one of: e5, ollama, openai, hash"),
        ("", {"OLAV_LLM_THINKING": "maybe"}, "OLAV_LLM_THINKING: llm.thinking must be bool"),
        ("llm: [1, 2\n", {}, "is not valid YAML"),
    ],
)
def test_bad_config_gives_one_line_naming_the_key(
    tmp_path: Path, yaml_text: str, env: dict[str, str], needle: str
) -> None:
    path = tmp_path / "olav.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as err:
        Config.load(path, environ=env)
    assert needle in err.value.one_line() and "\n" not in err.value.one_line()


def test_workspace_root_is_nearest_parent_or_olav_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws" / ".olav").mkdir(parents=True)
    deep = tmp_path / "ws" / "a" / "b"
    deep.mkdir(parents=True)
    assert find_root(deep) == (tmp_path / "ws").resolve()
    with pytest.raises(WorkspaceNotFoundError):
        find_root(tmp_path)
    monkeypatch.setenv("OLAV_HOME", str(tmp_path / "ws"))
    assert find_root(tmp_path) == (tmp_path / "ws").resolve()
    monkeypatch.setenv("OLAV_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="not an olav workspace"):
        find_root(tmp_path)


def test_every_olav_variable_in_the_code_is_declared() -> None:
    declared = {s.env for s in SETTINGS} | set(PROCESS_VARS)
    pkg = Path(olav.__file__).parent
    stray = []
    for path in pkg.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in re.findall(r"\bOLAV_[A-Z0-9_]+\b", node.value):
                    if name not in declared and name != "OLAV_":
                        stray.append(f"{path.name}: {name}")
    assert not stray
