"""Where each setting's value comes from, as `olav config` and `olav memory policy` tell it,
and the one name each value has: the olav.yaml key that sets it (issue 38)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from olav.core.config import Config, Workspace, render_default_config
from olav.memory.policy import DEFAULTS, POLICY_KEY, Floors, display_rows, policy_for, policy_rows
from olav.memory.recall.calibration import save_workspace_calibration
from tests.helpers import HASH_CONFIG, OlavCli, write_config


def _template(**changes: str) -> str:
    """The olav.yaml `olav init` writes, the hash embedder's, with ``changes`` applied as
    text replacements (old -> new)."""
    text = render_default_config()
    text = text.replace('provider: "e5"', 'provider: "hash"').replace(
        'model: "multilingual-e5-small"', 'model: "hash-64"'
    )
    for old, new in changes.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_olav_config_names_the_true_source_of_each_value(
    hash_ws: Path, olav: OlavCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = 'base_url: "http://localhost:11434"'
    write_config(hash_ws, _template(**{base: 'base_url: "http://10.0.0.5:11434"'}))
    monkeypatch.setenv("OLAV_LLM_NUM_CTX", "8192")
    res = olav("config", "--json")
    assert res.exit_code == 0, res.output
    rows = {r["key"]: r for r in json.loads(res.output)}
    assert rows["llm.base_url"]["source"] == "olav.yaml"  # changed from the template
    assert rows["embedder.provider"]["source"] == "olav.yaml"  # hash, not the default e5
    # olav init wrote these with their defaults: nobody set them
    assert rows["llm.model"]["source"] == "default"
    assert rows["memory.token_budget"]["source"] == "default"
    assert rows["llm.num_ctx"] == {
        "key": "llm.num_ctx",
        "value": 8192,
        "env": "OLAV_LLM_NUM_CTX",
        "source": "OLAV_LLM_NUM_CTX",
    }
    assert {r["source"] for r in rows.values()} == {"default", "olav.yaml", "OLAV_LLM_NUM_CTX"}
    text = olav("config").output
    line = next(x for x in text.splitlines() if x.startswith("llm.base_url "))
    assert "http://10.0.0.5:11434" in line and " olav.yaml " in line and "/default" not in line
    line = next(x for x in text.splitlines() if x.startswith("llm.model "))
    assert " default " in line


def test_a_key_set_back_to_its_default_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "olav.yaml"
    path.write_text("llm:\n  model: qwen3:8b\n  num_ctx: 4096\n")
    cfg = Config.load(path, environ={})
    assert cfg.source("llm.model") == "default" and cfg.source("llm.num_ctx") == "olav.yaml"
    cfg = Config.load(path, environ={"OLAV_LLM_MODEL": "qwen3:8b"})
    assert cfg.source("llm.model") == "OLAV_LLM_MODEL"  # the variable says so, whatever it holds


def test_a_bare_off_in_olav_yaml_is_the_word_off(tmp_path: Path) -> None:
    """YAML reads an unquoted off as false: a word setting takes it as the word it was."""
    path = tmp_path / "olav.yaml"
    path.write_text("memory:\n  relevance: off\n  second_opinion: off\n")
    cfg = Config.load(path, environ={})
    assert cfg["memory.relevance"] == "off" and cfg["memory.second_opinion"] == "off"
    policy = policy_for(cfg)
    assert policy.relevance == "off" and policy.floors is None


def test_olav_config_shows_calibration_for_calibrated_relevance(
    hash_ws: Path, olav: OlavCli
) -> None:
    ws = Workspace.open(hash_ws)
    before = {r["key"]: r for r in json.loads(olav("config", "--json").output)}
    assert before["memory.relevance"]["source"] == "default"
    key = json.loads(olav("memory", "policy", "--json").output)["relevance"]["floors_key"]
    save_workspace_calibration(ws.databases, key, Floors(0.1, 0.05, 0.0, 0.1, 0.1, 0.01), {})
    after = {r["key"]: r for r in json.loads(olav("config", "--json").output)}
    assert after["memory.relevance"]["source"] == "calibration"


def test_memory_policy_on_a_fresh_workspace_says_nobody_set_anything(
    hash_ws: Path, olav: OlavCli
) -> None:
    write_config(hash_ws, _template())
    res = olav("memory", "policy", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert {r["source"] for r in data["values"]} == {"default"}  # memory.token_budget too
    assert data["relevance"]["source"] == "default"
    assert data["lesson_dedup"]["source"] == "default"


def test_memory_policy_names_each_value_by_its_yaml_key(
    hash_ws: Path, olav: OlavCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLAV_MEMORY_TOKEN_BUDGET", "800")
    write_config(
        hash_ws,
        HASH_CONFIG + "memory:\n  policy:\n    ttl_days: {reflection: 9}\n"
        "    quotas: {fact: 2, reflection: 3}\n",
    )
    data = json.loads(olav("memory", "policy", "--json").output)
    rows = {r["key"]: r for r in data["values"]}
    assert rows["memory.policy.ttl_days.reflection"] == {
        "key": "memory.policy.ttl_days.reflection",
        "value": 9.0,
        "source": "olav.yaml",
    }
    assert rows["memory.policy.quotas.reflection"]["source"] == "olav.yaml"
    assert rows["memory.policy.quotas.fact"]["source"] == "default"  # written, but the default
    assert rows["memory.policy.capture.write_verbs"]["source"] == "default"
    assert rows["memory.token_budget"] == {
        "key": "memory.token_budget",
        "value": 800,
        "source": "OLAV_MEMORY_TOKEN_BUDGET",
    }
    assert not [k for k in rows if not k.startswith("memory.")]
    text = olav("memory", "policy").output
    assert "memory.policy.ttl_days.reflection " in text
    assert "ttl.reflection" not in text.replace("ttl_days.reflection", "")
    assert "memory.policy.capture.write_verbs " in text


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *heads, last = key.split(".")
        node = out
        for head in heads:
            node = node.setdefault(head, {})
        node[last] = value
    return out


def test_every_name_shown_is_a_key_olav_yaml_takes(tmp_path: Path) -> None:
    """Each value `olav memory policy` shows, written back into olav.yaml under the name it
    is shown with, is read by the parser as that same key with that same value: the names
    and the parser cannot drift apart."""
    shown, built_in = display_rows(DEFAULTS)
    assert shown and built_in
    flat = {}
    for key, value, _ in shown:
        if value is None and ".capacity." in key:
            value = "unbounded"
        flat[key] = value
    path = tmp_path / "olav.yaml"
    path.write_text(yaml.safe_dump(_nested(flat)))
    policy = policy_for(Config.load(path, environ={}))
    again = {k: (v, s) for k, v, s in display_rows(policy)[0]}
    assert {k: v for k, (v, _) in again.items()} == {k: v for k, v, _ in shown}
    # the parser names the key it read in the value's source: the very name shown
    internal = {k: s for k, _, s in policy_rows(policy)}
    for key, _, _ in shown:
        if key.startswith(POLICY_KEY + "."):
            assert key in {s.split(": ", 1)[-1] for s in internal.values()}, key
    assert {s for _, s in again.values()} == {"default"}  # every value written was the default
