from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from olav.core.errors import GuideError
from olav.memory.ingest.guides import find_guides, import_guides, load_guide
from olav.memory.store.scopes import EVERYONE
from tests.helpers import hash_store, rec

GOOD = """\
intent: {intent}
agent: {agent}
keywords: [backup, 备份, {intent}]
body: |
  {body}
"""


def write_guide(folder: Path, intent: str, agent: str = "netops", body: str = "Do it.") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{intent}.guide.yaml"
    path.write_text(GOOD.format(intent=intent, agent=agent, body=body), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("agent: a\nkeywords: [x]\nbody: b\n", "intent", "is required"),
        ("intent: i\nagent: a\nkeywords: []\nbody: b\n", "keywords", "non-empty"),
        ("intent: i\nagent: a\nkeywords: x\nbody: b\n", "keywords", "valid list"),
        ("intent: i\nagent: a\nkeywords: [x]\nbody: '  '\n", "body", "must not be empty"),
        ("intent: I J\nagent: a\nkeywords: [x]\nbody: b\n", "intent", "lowercase"),
        ("intent: i\nagent: a\nkeywords: [x]\nbody: b\nprio: 3\n", "prio", "not a guide field"),
        ("intent: i\nagent: a\nkeywords: [x]\nbody: b\nsource_tier: boss\n", "source_tier", ""),
        ("intent: i\nagent: a\nkeywords: [x]\nbody: b\npriority: 101\n", "priority", "0 and 100"),
        ("intent: i\n  agent: : a\n", "line", "not valid YAML"),
        ("- just\n- a list\n", "(file)", "mapping"),
        ("intent: " + "[" * 5000 + "]" * 5000 + "\n", "(file)", "nested too deeply"),
    ],
)
def test_bad_guide_names_file_and_field(
    tmp_path: Path, text: str, field: str, problem: str
) -> None:
    path = tmp_path / "bad.guide.yaml"
    path.write_text(text)
    with pytest.raises(GuideError) as err:
        load_guide(path)
    line = err.value.one_line()
    assert "\n" not in line
    assert str(path) in line and field in line and problem in line


def test_guide_id_scope_and_embedded_text(tmp_path: Path) -> None:
    core = load_guide(write_guide(tmp_path / "core", "save_it", agent="core"))
    net = load_guide(write_guide(tmp_path / "netops", "backup_router"))
    assert core.id == "guide_core_save_it" and core.resolved_scope == "global"
    assert net.id == "guide_netops_backup_router" and net.resolved_scope == "netops"
    text = net.embed_text()
    assert "backup_router" in text and "备份" in text and "Do it." in text


def test_import_add_unchanged_update_prune_and_errors(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    guides = tmp_path / "netops" / "guides"
    a = write_guide(guides, "backup_router", body="Call backup_device_config per device.")
    write_guide(guides, "take_snapshot", body="Snapshot when data is stale.")
    (guides / "broken.guide.yaml").write_text("intent: broken\nagent: netops\nbody: x\n")

    first = import_guides(store, find_guides(tmp_path), base=tmp_path, prune_under=tmp_path)
    assert sorted(first.added) == ["guide_netops_backup_router", "guide_netops_take_snapshot"]
    assert len(first.errors) == 1
    assert "netops/guides/broken.guide.yaml" in first.errors[0].one_line()
    assert "'keywords'" in first.errors[0].one_line()

    version = store.table.version
    again = import_guides(store, find_guides(tmp_path), base=tmp_path, prune_under=tmp_path)
    assert len(again.unchanged) == 2 and not again.added and not again.updated
    assert store.table.version == version, "an unchanged re-import must write nothing"

    write_guide(guides, "backup_router", body="Confirm the device list first.")
    store.upsert([rec("user_fact", "R1 loopback is 10.255.1.1", origin="user")])
    (guides / "take_snapshot.guide.yaml").unlink()
    third = import_guides(store, find_guides(tmp_path), base=tmp_path, prune_under=tmp_path)
    assert third.updated == ["guide_netops_backup_router"]
    assert third.pruned == ["guide_netops_take_snapshot"]
    row = store.read("guide_netops_backup_router", EVERYONE)
    assert row is not None and "Confirm the device list" in row.text
    assert store.read("user_fact", EVERYONE) is not None, "user rows are never pruned"
    assert a.exists()


def test_duplicate_intent_is_an_error_not_a_silent_overwrite(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    write_guide(tmp_path / "x", "same", body="first")
    write_guide(tmp_path / "y", "same", body="second")
    summary = import_guides(store, find_guides(tmp_path), base=tmp_path)
    assert len(summary.added) == 1 and len(summary.errors) == 1
    assert "duplicates" in summary.errors[0].one_line()


def test_format_guide_category(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    p = tmp_path / "core" / "audit_report.guide.yaml"
    p.parent.mkdir()
    p.write_text(
        "intent: audit_report\nagent: core\ncategory: format_guide\n"
        "keywords: [audit, report, 审计]\nbody: Use H2 headings and Markdown tables.\n"
    )
    import_guides(store, [p], base=tmp_path)
    row = store.read("guide_core_audit_report", EVERYONE)
    assert row is not None and row.category == "format_guide" and row.scope == "global"


def test_import_progress_moves_as_guides_are_embedded(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    guides = tmp_path / "netops" / "guides"
    for i in range(70):
        write_guide(guides, f"guide_{i:02d}", body=f"Step {i}.")
    (guides / "broken.guide.yaml").write_text("intent: broken\n")
    embedded: list[int] = []
    inner = store.embedder.embed_passages

    def counting(texts: Sequence[str]) -> np.ndarray:
        embedded.append(len(texts))
        return inner(texts)

    store.embedder.embed_passages = counting  # type: ignore[method-assign]
    seen: list[tuple[int, int]] = []  # (files reported so far, texts embedded so far)
    done = [0]

    def progress(n: int) -> None:
        done[0] += n
        seen.append((done[0], sum(embedded)))

    import_guides(store, find_guides(tmp_path), base=tmp_path, progress=progress)
    # the broken file first, then one step per embedded batch of 64, all 71 files in the end
    assert seen == [(1, 0), (65, 64), (71, 70)]
