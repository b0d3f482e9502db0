"""The issue's acceptance path, with the bundled embedder and no network."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_olav


def test_chinese_query_finds_the_backup_guide_offline(e5_ws: Path) -> None:
    res = run_olav("kb", "import-guides", "--json", cwd=e5_ws)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["added"] == 0  # init already primed everything
    res = run_olav("memory", "search", "备份路由器配置", "--json", "-k", "3", cwd=e5_ws)
    assert res.returncode == 0, res.stderr
    ids = [h["id"] for h in json.loads(res.stdout)]
    assert ids[0] == "guide_netops_backup_device_configs"


def test_english_query_finds_the_export_guide(e5_ws: Path) -> None:
    res = run_olav(
        "memory", "search", "please save this report to a file", "--json", "-k", "3", cwd=e5_ws
    )
    ids = [h["id"] for h in json.loads(res.stdout)]
    assert "guide_core_export_when_asked_to_save" in ids
