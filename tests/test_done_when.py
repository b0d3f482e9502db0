"""The issue's acceptance path, with the bundled embedder and no network (``olav`` in this
process)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import olav_here


def test_chinese_query_finds_the_backup_guide_offline(e5_ws: Path) -> None:
    res = olav_here(e5_ws, "kb", "import-guides", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["added"] == 0  # init already primed everything
    res = olav_here(e5_ws, "memory", "search", "备份路由器配置", "--json", "-k", "3")
    assert res.returncode == 0, res.stderr
    ids = [h["id"] for h in json.loads(res.stdout)]
    assert ids[0] == "guide_netops_backup_device_configs"


def test_english_query_finds_the_export_guide(e5_ws: Path) -> None:
    res = olav_here(
        e5_ws, "memory", "search", "please save this report to a file", "--json", "-k", "3"
    )
    ids = [h["id"] for h in json.loads(res.stdout)]
    assert "guide_core_export_when_asked_to_save" in ids
