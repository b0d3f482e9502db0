"""The memory table on S3-compatible object storage (`memory.uri`), end to end through the
CLI against a real S3-protocol server on 127.0.0.1 (tests/s3server.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HASH_CONFIG
from tests.helpers import run_olav
from tests.s3server import team_config, write_workspace


def _workspace(tmp_path: Path, server: Any, name: str = "ws", uri: str = "") -> tuple[Path, str]:
    uri = uri or f"s3://{server.bucket()}/olav/netops"
    root = write_workspace(tmp_path / name, team_config(server.endpoint, uri, HASH_CONFIG))
    return root, uri


def _olav(root: Path, server: Any, *args: str) -> Any:
    return run_olav(*args, cwd=root, env=server.env)


def test_init_primes_guides_into_the_bucket_and_search_reads_them(
    tmp_path: Path, s3_env: Any
) -> None:
    root, uri = _workspace(tmp_path, s3_env)
    done = _olav(root, s3_env, "init", ".")
    assert done.returncode == 0, done.stderr
    assert not (root / ".olav" / "databases" / "memory.lance").exists()  # nothing local
    bucket, prefix = uri[5:].split("/", 1)
    keys = [o["Key"] for o in s3_env.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith(f"{prefix}/memory.lance/") for k in keys)
    found = _olav(root, s3_env, "memory", "search", "backup router config", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits and all(h["category"] for h in hits)
    again = _olav(root, s3_env, "kb", "import-guides")
    assert again.returncode == 0, again.stderr
    assert "0 added" in again.stdout
    stats = _olav(root, s3_env, "memory", "stats", "--json")
    assert json.loads(stats.stdout)["rows"] == len(hits) or json.loads(stats.stdout)["rows"] > 0
