"""The workspace's databases, logs and exports hold every operator's conversations, so no
other user of the machine may read them (olav.core.private): after `olav init`, an `olav ask`
and a request to `olav serve`, nothing under them is within another user's reach, the files
olav writes are 0600 and its folders 0700; `olav doctor` names each looser path with the
chmod that fixes it, and says nothing more when they are right."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from olav.core.config import Workspace
from tests.helpers import OlavMain, olav_here, scripted_ws, write_config

EXPORT_TURNS: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "format_and_export",
                "args": {"data": "# Report", "format": "md", "filename": "report"},
            }
        ]
    },
    {"content": "Saved exports/report.md"},
]


def readable_by_others(path: Path, top: Path) -> bool:
    """Whether the group or others can read ``path``: its read bit, and the search bit of
    every folder from ``top`` down to it (a 0700 folder shuts out whatever is inside)."""
    folders = [top, *[p for p in path.parents if p.is_relative_to(top) and p != top]]
    for read, search in ((stat.S_IRGRP, stat.S_IXGRP), (stat.S_IROTH, stat.S_IXOTH)):
        if path.stat().st_mode & read and all(f.stat().st_mode & search for f in folders):
            return True
    return False


def exposed(ws: Workspace) -> list[str]:
    """Every file and folder under the databases and logs folders another user could read."""
    out = []
    for top in (ws.databases, ws.logs):
        for path in [top, *top.rglob("*")]:
            if readable_by_others(path, top):
                out.append(f"{path} {stat.S_IMODE(path.stat().st_mode):o}")
    return out


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def doctor_private(olav_main: OlavMain) -> list[dict[str, str]]:
    res = olav_main("doctor", "--json")
    return [c for c in json.loads(res.stdout) if c["name"] == "private files"]


@pytest.fixture(autouse=True)
def _usual_umask() -> Any:
    """A umask that lets others read what is created, as most machines have: what olav must
    not rely on."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_init_makes_the_folders_0700_and_the_databases_0600(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_config(root)
    olav_here(tmp_path, "init", str(root), "--no-prime")
    ws = Workspace.open(root, tighten=False)  # as init left them
    folders = [ws.olav_dir, ws.databases, ws.logs, ws.exports, ws.memory_path]
    assert [mode(p) for p in folders] == [0o700] * 5
    assert [mode(p) for p in (ws.audit_path, ws.domain_path)] == [0o600, 0o600]
    assert exposed(ws) == []
    assert os.umask(0o022) == 0o022  # olav left the process's umask alone


def test_a_run_and_a_served_request_leave_nothing_another_user_can_read(
    hash_ws: Path,
) -> None:
    from starlette.testclient import TestClient

    from olav.access.tokens import TokenStore
    from olav.serve.app import Server, create_app
    from olav.serve.gate import guarded

    ws = scripted_ws(hash_ws, EXPORT_TURNS * 3)
    res = olav_here(hash_ws, "ask", "save the report")
    assert res.returncode == 0, res.stdout
    _, token = TokenStore.for_workspace(ws, touch_interval=None).create("alice", note="t")
    server = Server(ws)
    try:
        with TestClient(guarded(create_app(server), server)) as http:
            headers = {"Authorization": f"Bearer {token}"}
            tid = http.post("/threads", json={}, headers=headers).json()["thread_id"]
            body = {
                "assistant_id": "core",
                "input": {"messages": [{"role": "user", "content": "hi"}]},
            }
            ran = http.post(f"/threads/{tid}/runs/wait", json=body, headers=headers)
            assert ran.status_code == 200, ran.text
            # SQLite's companions while the server holds the file open: the file's mode
            threads = ws.databases / "threads.sqlite"
            assert [mode(Path(f"{threads}{end}")) for end in ("", "-wal", "-shm")] == [0o600] * 3
    finally:
        server.close()
    for path in (ws.audit_path, ws.logs / "olav.core.log"):
        assert mode(path) == 0o600, path
    assert exposed(ws) == []
    # what the agent's tool wrote for the user keeps the user's mode, in a private folder
    assert mode(ws.exports) == 0o700 and mode(ws.exports / "report.md") == 0o644


def test_doctor_names_each_loose_path_with_its_chmod_and_is_quiet_when_right(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    ws = Workspace.open(hash_ws)
    assert doctor_private(olav_main) == [
        {
            "name": "private files",
            "status": "ok",
            "detail": "databases, logs and exports are private",
            "fix": "",
        }
    ]
    os.chmod(ws.audit_path, 0o644)
    os.chmod(ws.logs, 0o755)
    warned = doctor_private(olav_main)
    assert [(c["status"], c["fix"]) for c in warned] == [
        ("warn", f"chmod 600 {ws.audit_path}"),
        ("warn", f"chmod 700 {ws.logs}"),
    ]
    assert all(str(ws.audit_path) in c["detail"] or str(ws.logs) in c["detail"] for c in warned)
    assert "(mode 644)" in " ".join(c["detail"] for c in warned)
    Workspace.open(hash_ws)  # any other command tightens them as it opens the workspace
    assert (mode(ws.audit_path), mode(ws.logs)) == (0o600, 0o700)
    assert [c["status"] for c in doctor_private(olav_main)] == ["ok"]


def test_an_older_workspace_is_private_from_its_next_command_on(hash_ws: Path) -> None:
    ws = Workspace.open(hash_ws)
    for folder in (ws.olav_dir, ws.databases, ws.logs, ws.exports, ws.memory_path):
        os.chmod(folder, 0o755)
    for path in (ws.audit_path, ws.domain_path):
        os.chmod(path, 0o644)
    ws = Workspace.open(hash_ws)
    folders = [ws.olav_dir, ws.databases, ws.logs, ws.exports, ws.memory_path]
    assert [mode(p) for p in folders] == [0o700] * 5
    assert (mode(ws.audit_path), mode(ws.domain_path)) == (0o600, 0o600)


def test_a_databases_folder_outside_the_workspace_is_left_to_its_owner(
    hash_ws: Path, tmp_path: Path, olav_main: OlavMain
) -> None:
    shared = tmp_path / "srv"
    shared.mkdir(mode=0o755)
    (shared / "theirs.txt").write_text("another program's")
    cfg = hash_ws / ".olav" / "olav.yaml"
    data = yaml.safe_load(cfg.read_text())
    data["paths"] = {"databases": str(shared)}
    cfg.write_text(yaml.safe_dump(data))
    ws = Workspace.open(hash_ws)
    from olav.audit.db import migrate

    migrate(ws.audit_path)
    assert mode(shared) == 0o755  # not olav's to change
    assert mode(shared / "theirs.txt") == 0o644
    assert mode(ws.audit_path) == 0o600  # but what olav writes there is private
    warned = doctor_private(olav_main)
    assert [(c["status"], c["fix"]) for c in warned] == [("warn", f"chmod 700 {shared}")]
