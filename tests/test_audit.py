from __future__ import annotations

from pathlib import Path

from olav.audit.db import MIGRATIONS, connect, migrate


def test_migrations_are_numbered_recorded_and_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "audit.duckdb"
    assert migrate(db) == [v for v, _, _ in MIGRATIONS]
    assert migrate(db) == []
    with connect(db) as con:
        cols = con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs' "
            "ORDER BY ordinal_position"
        ).fetchall()
        versions = con.execute("SELECT version FROM schema_migrations").fetchall()
    assert [c[0] for c in cols] == [
        "id",
        "agent",
        "session_id",
        "status",
        "query",
        "model",
        "error",
        "started_at",
        "ended_at",
    ]
    assert [v[0] for v in versions] == [v for v, _, _ in MIGRATIONS]
