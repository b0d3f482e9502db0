"""Two operators, one team table: alice's private lesson never reaches bob's recall or
search; once she promotes it and a person confirms the draft, the whole team recalls it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import HASH_CONFIG, olav_entry, olav_here
from tests.reliability._support import assert_one_line_error
from tests.s3server import team_config, write_workspace

LESSON = "before upgrading zorblax firmware drain the bgp sessions"


def _operator(tmp_path: Path, server: Any, uri: str, user: str) -> Path:
    text = team_config(server.endpoint, uri, HASH_CONFIG) + f"  user: {user}\n  team: netops\n"
    return write_workspace(tmp_path / user, text)


def _recalled(root: Path, server: Any) -> list[str]:
    out = olav_here(root, "memory", "why", LESSON, "--json")
    assert out.returncode == 0, out.stderr
    return [c["id"] for c in json.loads(out.stdout)["candidates"]]


def test_a_private_lesson_reaches_the_team_only_when_confirmed(tmp_path: Path, s3_env: Any) -> None:
    from olav.core.config import Workspace
    from olav.core.errors import NotFoundError
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.scopes import private_scope
    from olav.memory.store.table import MemoryStore

    uri = f"s3://{s3_env.bucket()}/olav/netops"
    alice = _operator(tmp_path, s3_env, uri, "alice")
    bob = _operator(tmp_path, s3_env, uri, "bob")
    assert olav_here(alice, "init", ".").returncode == 0
    assert olav_here(bob, "init", ".", "--no-prime").returncode == 0
    ws = Workspace.open(alice)
    added, rid = add_reflection(
        MemoryStore.for_workspace(ws), LESSON, dedup_distance=0.0, scope=private_scope(ws.config)
    )
    assert added and private_scope(ws.config) == "user:alice"

    assert rid in _recalled(alice, s3_env)
    assert rid not in _recalled(bob, s3_env)
    found = olav_here(bob, "memory", "search", LESSON, "--json", "-k", "50")
    assert all(h["scope"] != "user:alice" for h in json.loads(found.stdout))
    # knowing the id does not help: show and promote answer as for a missing row
    peek = olav_entry(bob, "memory", "show", rid)  # what bob sees
    assert_one_line_error(peek, f"no memory with id {rid!r}")
    assert LESSON not in peek.stdout + peek.stderr
    with pytest.raises(NotFoundError, match=f"no memory with id {rid!r}"):
        olav_here(bob, "memory", "promote", rid)
    mine = olav_here(alice, "memory", "show", rid, "--json")
    assert json.loads(mine.stdout)["scope"] == "user:alice"
    # an export holds what its operator may read: alice's private lesson, not bob's copy
    for who, has in ((alice, True), (bob, False)):
        dump = tmp_path / f"{who.name}.jsonl"
        assert olav_here(who, "kb", "export", str(dump)).returncode == 0
        ids = {json.loads(line)["id"] for line in dump.read_text().splitlines()[1:]}
        assert (rid in ids) is has

    asked = olav_here(alice, "memory", "promote", rid)
    assert asked.returncode == 0, asked.stderr
    assert not [i for i in _recalled(bob, s3_env) if i != rid and "team" in i]  # a draft only
    draft = f"team_{rid}"
    done = olav_here(alice, "kb", "drafts", "confirm", draft)
    assert done.returncode == 0, done.stderr
    shared = [
        h
        for h in json.loads(olav_here(bob, "memory", "search", LESSON, "--json").stdout)
        if h["scope"] == "team:netops"
    ]
    assert shared and LESSON in shared[0]["text"]
    assert shared[0]["id"] in _recalled(bob, s3_env)
    assert rid not in _recalled(bob, s3_env)  # the private row itself stays private
