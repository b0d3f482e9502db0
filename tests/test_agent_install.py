"""``olav agent install`` refuses an agent that lists a tool olav does not have (before
anything is copied), and ``olav agent remove`` takes an agent and its guides away."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.helpers import OlavCli, OlavMain

SKILL = """---
name: {name}
description: "A test agent."
tools:
{tools}
---

# {name}
"""
GUIDE = """schema_version: 1
intent: {intent}
agent: {name}
category: usage_guide
keywords: [pelican, 鹈鹕]
body: |
  Count the pelicans before answering.
"""


def _skill(root: Path, name: str, tools: list[str]) -> Path:
    folder = root / "sources" / name
    (folder / "guides").mkdir(parents=True)
    listed = "\n".join(f"  - {t}" for t in tools)
    (folder / "SKILL.md").write_text(SKILL.format(name=name, tools=listed))
    (folder / "guides" / "pelicans.guide.yaml").write_text(
        GUIDE.format(intent="count_pelicans", name=name)
    )
    return folder


def test_install_refuses_an_unknown_tool_and_copies_nothing(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    source = _skill(hash_ws.parent, "bad4", ["db_query", "teleport"])
    res = olav_main("agent", "install", str(source))
    assert res.returncode == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert "'teleport'" in lines[0] and "olav does not have" in lines[0]
    assert "db_query" in res.stderr and "commit_to_memory" in res.stderr  # the known tools
    assert "Traceback" not in res.stderr
    assert not (hash_ws / "bad4").exists()
    listed = olav_main("agent", "list", "--json")
    assert "bad4" not in {a["name"] for a in json.loads(listed.stdout)}


def test_install_then_remove(hash_ws: Path, olav: OlavCli, olav_main: OlavMain) -> None:
    source = _skill(hash_ws.parent, "birds", ["db_query", "propose_memory_draft"])
    res = olav("agent", "install", str(source))
    assert res.exit_code == 0, res.output
    assert "installed agent birds" in res.output
    found = olav("memory", "list", "--json", "--category", "usage_guide")
    assert "guide_birds_count_pelicans" in found.output

    res = olav("agent", "remove", "birds")
    assert res.exit_code == 0, res.output
    assert "removed agent birds (1 guide retired)" in res.output
    assert not (hash_ws / "birds").exists()
    assert not list(hash_ws.glob(".birds*"))
    found = olav("memory", "list", "--json", "--category", "usage_guide")
    assert "guide_birds_count_pelicans" not in found.output
    assert "guide_netops_" in found.output  # the other agents' guides stay


def test_remove_refuses_core_and_unknown_names(hash_ws: Path, olav_main: OlavMain) -> None:
    res = olav_main("agent", "remove", "core")
    assert res.returncode == 1 and "orchestrator" in res.stderr
    assert (hash_ws / "core" / "SKILL.md").is_file()
    res = olav_main("agent", "remove", "nosuch")
    assert res.returncode == 1 and "no agent named 'nosuch'" in res.stderr
    assert "netops" in res.stderr  # the agents there are


def test_remove_refuses_an_agent_olav_yaml_configures(hash_ws: Path, olav_main: OlavMain) -> None:
    shutil.copytree(hash_ws / "netops", hash_ws / "netops2")
    skill = hash_ws / "netops2" / "SKILL.md"
    skill.write_text(skill.read_text().replace("name: netops", "name: netops2", 1))
    config = hash_ws / ".olav" / "olav.yaml"
    config.write_text(config.read_text() + "\nagents:\n  netops2:\n    model: qwen3:8b\n")
    res = olav_main("agent", "remove", "netops2")
    assert res.returncode == 1 and "agents.netops2" in res.stderr
    assert (hash_ws / "netops2" / "SKILL.md").is_file()


def test_doctor_checks_every_agent_s_tools(hash_ws: Path, olav_main: OlavMain) -> None:
    res = olav_main("doctor")
    assert "every tool known" in res.stdout
    skill = hash_ws / "netops" / "SKILL.md"
    skill.write_text(skill.read_text().replace("  - list_devices\n", "  - teleport\n", 1))
    res = olav_main("doctor")
    assert res.returncode == 1
    assert "'teleport', which olav does not have" in res.stdout
    assert "olav agent remove netops" in res.stdout
