"""MemoryPolicy: one object holds every memory decision's numbers, built from the defaults,
the older memory keys and ``memory.policy.*`` of olav.yaml; the decision points read it, and
no module keeps a decision constant of its own."""

from __future__ import annotations

import ast
import importlib
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from olav.core.config import Config, Workspace
from olav.core.errors import ConfigError
from olav.memory import policy as policy_module
from olav.memory.ingest.capture import ToolEvent, capture
from olav.memory.lifecycle.decay import decay_weight
from olav.memory.policy import DEFAULTS, Floors, MemoryPolicy, policy_for
from olav.memory.recall.calibration import save_workspace_calibration
from olav.memory.recall.recaller import Recaller, RecallOptions
from olav.memory.store.scopes import EVERYONE
from tests.helpers import HASH_CONFIG, OlavCli, OlavMain, hash_store, rec, write_config

ROOT = Path(__file__).resolve().parent.parent
POLICY_DIR = ROOT / "olav" / "memory" / "policy"


def _config(tmp_path: Path, policy_yaml: str, extra: str = "") -> Config:
    path = tmp_path / "olav.yaml"
    path.write_text(f"memory:\n{extra}  policy:\n{policy_yaml}")
    return Config.load(path, environ={})


def test_defaults_are_the_numbers_recall_capture_and_lifecycle_always_used() -> None:
    assert dict(DEFAULTS.quotas) == {
        "usage_guide": 3,
        "expert_knowledge": 3,
        "query_pattern": 2,
        "format_guide": 1,
        "reflection": 1,
        "fact": 2,
        "preference": 1,
        "decision": 1,
        "operational_event": 2,
        "topology": 1,
        "document": 2,
        "episode": 1,
    }
    assert dict(DEFAULTS.tier_totals) == {"small": 3, "medium": 5, "large": 13}
    assert DEFAULTS.tier_total("unknown") == 3 and DEFAULTS.episode_cap(1000) == 250
    assert DEFAULTS.ttl["reflection"] == timedelta(days=30)
    assert [c for c, t in DEFAULTS.ttl.items() if t is not None] == ["reflection"]
    assert DEFAULTS.dedup_for("e5:multilingual-e5-small") == 0.20
    assert DEFAULTS.dedup_for("ollama:bge-m3") == 0.3
    assert DEFAULTS.default_floors("e5:multilingual-e5-small+use-m3") == Floors(
        0.03, 0.01, -0.02, 0.04, 0.04, 0.005
    )
    assert DEFAULTS.default_floors("hash:hash-64") is None
    assert DEFAULTS.is_write_tool("push_config") and not DEFAULTS.is_write_tool("list_devices")
    assert not DEFAULTS.is_write_tool("record_reflection")  # olav's own memory tools
    assert {c for c, m in DEFAULTS.conflicts.items() if m == "supersede"} == {
        "fact",
        "preference",
        "decision",
    }
    assert set(DEFAULTS.capacity.values()) == {None}  # unbounded until item 3 sets one


def test_yaml_keys_set_the_policy_and_each_value_names_its_source(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        "    quotas: {reflection: 2, usage_guide: 0}\n"
        "    ttl_days: {operational_event: 7, reflection: never}\n"
        "    half_life_days: {episode: 5}\n"
        "    conflicts: {fact: review}\n"
        "    capacity: {reflection: 500}\n"
        "    capture: {write_verbs: [backup], episode_every_turns: 4}\n",
        extra="  half_life_days: 12\n",
    )
    p = policy_for(cfg)
    assert (p.quota("reflection"), p.quota("usage_guide"), p.quota("fact")) == (2, 0, 2)
    assert p.ttl["operational_event"] == timedelta(days=7) and p.ttl["reflection"] is None
    assert (p.half_life("episode"), p.half_life("fact")) == (5.0, 12.0)
    assert p.conflict_mode("fact") == "review" and p.capacity["reflection"] == 500
    assert p.is_write_tool("backup_device_config") and not p.is_write_tool("push_config")
    assert p.episode_every_turns == 4
    where = str(tmp_path / "olav.yaml")
    assert p.source("quotas.reflection") == f"{where}: memory.policy.quotas.reflection"
    assert p.source("half_life_days") == f"{where}: memory.half_life_days"
    assert p.source("ttl.operational_event") == f"{where}: memory.policy.ttl_days.operational_event"
    assert p.source("quotas.fact") == "default" and p.source("token_budget") == "default"
    assert policy_for(cfg) is p  # built once per configuration


def test_an_environment_variable_is_the_source_it_names(tmp_path: Path) -> None:
    (tmp_path / "olav.yaml").write_text("memory:\n  token_budget: 800\n")
    cfg = Config.load(tmp_path / "olav.yaml", environ={"OLAV_MEMORY_HALF_LIFE_DAYS": "3"})
    p = policy_for(cfg)
    assert (p.half_life_days, p.source("half_life_days")) == (3.0, "OLAV_MEMORY_HALF_LIFE_DAYS")
    assert p.token_budget == 800 and p.source("token_budget").endswith(": memory.token_budget")


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            '    quotas: {reflection: "x"}\n',
            'memory.policy.quotas.reflection must be an integer ≥ 0, got "x"',
        ),
        ("    quotas: {lesson: 1}\n", "unknown key 'memory.policy.quotas.lesson'"),
        ("    quotas: {reflection: -1}\n", "memory.policy.quotas.reflection must be an integer"),
        ("    candidates: .nan\n", "memory.policy.candidates must be an integer ≥ 1, got nan"),
        ("    tier_totals: {huge: 9}\n", "unknown key 'memory.policy.tier_totals.huge'"),
        ("    episode_share: 2\n", "memory.policy.episode_share must be a number > 0 and ≤ 1"),
        ("    ttl_days: {fact: -3}\n", "memory.policy.ttl_days.fact must be a number > 0"),
        ("    conflicts: {fact: overwrite}\n", "memory.policy.conflicts.fact must be one of"),
        ("    capacity: {fact: 0}\n", "memory.policy.capacity.fact must be an integer ≥ 1"),
        ("    capture: {write_verbs: push}\n", "memory.policy.capture.write_verbs must be a list"),
        ("    no_decay_origins: [robot]\n", "memory.policy.no_decay_origins must be a list of"),
        ("    quota: {fact: 1}\n", "unknown key 'memory.policy.quota'"),
        ("    7\n", "memory.policy must be a mapping"),
        (
            "    second_look: {close_calls: 0}\n",
            "memory.policy.second_look.close_calls must be an integer ≥ 1, got 0",
        ),
        (
            "    second_look: {uncalibrated: [0.1, 0.9]}\n",
            "memory.policy.second_look.uncalibrated must be two numbers [ACCEPT, REJECT]",
        ),
        (
            "    second_look: {uncalibrated: 0.9}\n",
            "memory.policy.second_look.uncalibrated must be two numbers",
        ),
        ("    second_look: {band: 0.1}\n", "unknown key 'memory.policy.second_look.band'"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(
    tmp_path: Path, yaml_text: str, message: str
) -> None:
    cfg = _config(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as info:
        policy_for(cfg)
    assert message in info.value.message
    assert info.value.message.startswith(str(tmp_path / "olav.yaml"))
    assert "\n" not in info.value.message + (info.value.hint or "")


def test_the_cli_reports_a_bad_policy_as_one_red_line(hash_ws: Path, olav_main: OlavMain) -> None:
    write_config(hash_ws, HASH_CONFIG + "memory:\n  policy:\n    quotas: {fact: many}\n")
    res = olav_main("memory", "policy")
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert (
        len(lines) == 1
        and 'memory.policy.quotas.fact must be an integer ≥ 0, got "many"' in (lines[0])
    )


def test_recall_takes_its_ceilings_and_total_from_the_policy(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    store.upsert(
        [
            rec(f"g{i}", f"backup the router configs step {i}", category="usage_guide")
            for i in range(3)
        ]
        + [rec(f"f{i}", f"backup the router configs fact {i}", category="fact") for i in range(3)]
    )
    query = "backup the router configs"

    def injected(policy: MemoryPolicy) -> list[str]:
        options = RecallOptions(tier="large", bump_access=False, policy=policy)
        return Recaller(store, agent="global", options=options).recall(query).injected_ids

    default = injected(DEFAULTS)
    assert (
        sum(i.startswith("g") for i in default) == 3
        and sum(i.startswith("f") for i in default) == 2
    )
    no_guides = MemoryPolicy(quotas={**DEFAULTS.quotas, "usage_guide": 0, "fact": 3})
    assert sorted(injected(no_guides)) == ["f0", "f1", "f2"]
    one = MemoryPolicy(tier_totals={"small": 1, "medium": 1, "large": 1})
    assert len(injected(one)) == 1


def test_capture_ttl_and_decay_read_the_policy(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    policy = MemoryPolicy(
        write_verbs=frozenset({"backup"}),
        ttl={**DEFAULTS.ttl, "operational_event": timedelta(days=7)},
        category_half_life={"operational_event": 1.0},
    )
    ev = ToolEvent("netops", "backup_device_config", {"device": "r1"}, "saved", "success")
    assert capture(store, [ev], question="back up r1", run_id="r1") == []  # default rule
    (rid,) = capture(store, [ev], question="back up r1", run_id="r1", policy=policy)
    row = store.read(rid, EVERYONE)
    assert row is not None and row.expires_at is not None
    assert abs(row.expires_at - (datetime.now(UTC) + timedelta(days=7))) < timedelta(minutes=5)
    old = rec(
        "o", "x", category="operational_event", updated_at=datetime.now(UTC) - timedelta(days=2)
    )
    assert abs(decay_weight(old, policy=policy) - 0.25) < 1e-3  # two one-day half-lives
    assert decay_weight(old) > 0.95  # the default 30 days


def test_the_second_look_takes_its_band_close_calls_and_first_floors_from_the_policy(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from olav.memory.recall.rerank_judge import RerankFloors, close_calls, for_config

    cfg = _config(
        tmp_path,
        "    second_look: {close_calls: 2, uncalibrated: [0.75, 0.1]}\n",
        extra="  judge_band: 0.05\n",
    )
    p = policy_for(cfg)
    assert (p.judge_band, p.judge_close_calls, p.rerank_uncalibrated) == (0.05, 2, (0.75, 0.1))
    assert p.source("judge_band").endswith(": memory.judge_band")
    assert p.source("rerank_uncalibrated").endswith(": memory.policy.second_look.uncalibrated")
    assert for_config(cfg, tmp_path) is None  # neither a reranker nor a judge configured

    # a reranker no calibration has measured decides with the policy's floors
    reranked = Config.load(
        tmp_path / "olav.yaml",
        environ={
            "OLAV_RERANKER_PROVIDER": "rerank",
            "OLAV_RERANKER_BASE_URL": "http://127.0.0.1:9",
        },
    )
    look = for_config(reranked, tmp_path)
    assert look is not None
    assert (look.floors, look.floors_source) == (RerankFloors(0.75, 0.1), "uncalibrated")
    assert (look.band, look.close_most) == (0.05, 2)

    # the judge is asked about the nearest close calls, no more than the policy allows
    def cand(margin: float) -> SimpleNamespace:
        sig = SimpleNamespace(margin=margin, floor=0.0, rerank=None)
        return SimpleNamespace(signals=sig, hit=SimpleNamespace(record=rec("m", "fact")))

    cands = [cand(m) for m in (0.04, -0.01, 0.2, 0.02, -0.03)]
    picked = close_calls(cands, RerankFloors.off(), look.band, look.close_most)
    assert [c.signals.margin for c in picked] == [-0.01, 0.02]
    assert len(close_calls(cands, RerankFloors.off(), 0.05, 6)) == 4


def test_olav_memory_policy_prints_every_value_with_its_source(
    hash_ws: Path, olav: OlavCli
) -> None:
    write_config(
        hash_ws, HASH_CONFIG + "memory:\n  half_life_days: 9\n  policy:\n    quotas: {fact: 4}\n"
    )
    ws = Workspace.open(hash_ws)
    res = olav("memory", "policy", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    rows = {r["key"]: r for r in data["values"]}
    assert rows["memory.policy.quotas.fact"]["value"] == 4
    assert rows["memory.policy.quotas.fact"]["source"] == "olav.yaml"
    assert rows["memory.half_life_days"] == {
        "key": "memory.half_life_days",
        "value": 9.0,
        "source": "olav.yaml",
    }
    assert rows["memory.policy.quotas.usage_guide"]["source"] == "default"
    assert rows["memory.policy.capacity.reflection"]["value"] is None
    # the hash embedder has no floors of olav's: none, until this workspace calibrates some
    assert data["relevance"]["floors"] is None
    floors = Floors(0.1, 0.05, 0.0, 0.1, 0.1, 0.01)
    key = data["relevance"]["floors_key"]  # the embedder's, with the second opinion's
    assert key.startswith("hash:hash-64")
    save_workspace_calibration(ws.databases, key, floors, {})
    data = json.loads(olav("memory", "policy", "--json").output)
    assert data["relevance"]["floors"]["directive"] == 0.1
    assert data["relevance"]["source"] == "calibration"
    assert data["relevance"]["file"] == str(ws.databases / "calibration.json")
    text = olav("memory", "policy").output
    assert "memory.policy.quotas.fact" in text
    assert "calibration.json" in text and "unbounded" in text


# -- no memory-decision constant outside MemoryPolicy -------------------------------------------

# names a decision constant takes (module or class level), and parameters whose literal default
# would be a second copy of a policy value
CONSTANT_NAMES = (
    "QUOTAS",
    "TIER_TOTAL",
    "EPISODE_SHARE",
    "CATEGORY_TTL",
    "WRITE_VERBS",
    "SELF_WRITING",
    "SUPERSEDING",
    "NO_DECAY_ORIGINS",
    "ORIGIN_RANK",
    "EVERY_N_TURNS",
    "UPSTREAM_DEDUP",
    "CALIBRATED_FLOORS",
    "DOCUMENT_CONFIDENCE",
    "MAX_CLOSE",
    "UNCALIBRATED",
)
CONSTANT_PARTS = ("_FLOOR", "_DISTANCE", "HALF_LIFE", "_TTL", "DEDUP", "QUOTA", "_BAND")
PARAMETER_PARTS = ("distance", "half_life", "quota", "ttl", "floor")
# not decisions: the golden benchmark's sweep grid and margin (it measures the dedup distance),
# the runner's access-count write batching, and how long a team table's write leases live
ALLOWED = {
    ("olav/memory/golden/suite.py", "DEDUP_GRID"),
    ("olav/memory/golden/suite.py", "DEDUP_MARGIN"),
    ("olav/runtime/runner.py", "BUMP_EVERY_N_TURNS"),
    ("olav/memory/store/remote.py", "WRITE_TTL"),
    ("olav/memory/store/remote.py", "MAINTENANCE_TTL"),
}


def _number(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    )


def _is_constant(name: str, value: ast.AST | None) -> bool:
    """A listed name whatever it holds; a name with a decision's word in it when it holds a
    number (``LESSON_FLOOR = 0.04``, ``DEDUP = {"e5": 0.2}``), not names of fields."""
    if name in CONSTANT_NAMES:
        return True
    worded = name.isupper() and any(part in name for part in CONSTANT_PARTS)
    return worded and value is not None and any(_number(n) for n in ast.walk(value))


def decision_constants(source: str, where: str) -> list[str]:
    """``where:line name`` of every assignment of a decision-constant name at module or class
    level, and every parameter named for a decision value with a number as its default."""
    found = []
    tree = ast.parse(source)
    scopes = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in scopes:
        for node in body:
            targets: list[ast.Name] = []
            value: ast.AST | None = None
            if isinstance(node, ast.Assign):
                targets = [t for t in node.targets if isinstance(t, ast.Name)]
                value = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets, value = [node.target], node.value
            for t in targets:
                if _is_constant(t.id, value) and (where, t.id) not in ALLOWED:
                    found.append(f"{where}:{node.lineno} {t.id}")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults))
            defaults += list(node.args.defaults) + list(node.args.kw_defaults)
            for arg, default in zip(args, defaults, strict=True):
                if _number(default) and any(p in arg.arg.lower() for p in PARAMETER_PARTS):
                    found.append(f"{where}:{node.lineno} {node.name}({arg.arg}=...)")
    return found


def test_the_scan_finds_a_decision_constant_where_one_is_planted() -> None:
    planted = (
        "QUOTAS = {'fact': 2}\n"
        "LESSON_FLOOR: float = 0.04\n"
        "class Tuning:\n    DEDUP_DISTANCE = 0.2\n"
        "def add(store, *, dedup_distance: float = 0.20, limit: int = 2, floors=True): ...\n"
        "DEDUP_GRID = (0.1, 0.2)\n"
        "LESSON_FLOORS = ('lesson', 'lesson_words')\n"
        "SELF_WRITING = frozenset({'record_reflection'})\n"
    )
    assert decision_constants(planted, "olav/x.py") == [
        "olav/x.py:1 QUOTAS",
        "olav/x.py:2 LESSON_FLOOR",
        "olav/x.py:6 DEDUP_GRID",
        "olav/x.py:8 SELF_WRITING",
        "olav/x.py:4 DEDUP_DISTANCE",
        "olav/x.py:5 add(dedup_distance=...)",
    ]


def test_no_memory_decision_constant_lives_outside_the_policy() -> None:
    found = []
    for path in sorted((ROOT / "olav").rglob("*.py")):
        if path.parent == POLICY_DIR:
            continue
        where = path.relative_to(ROOT).as_posix()
        found += decision_constants(path.read_text(encoding="utf-8"), where)
    assert found == [], "decision constants outside olav/memory/policy/: " + ", ".join(found)
    for module, names in {
        "olav.memory.recall.recaller": ("QUOTAS", "TIER_TOTAL", "EPISODE_SHARE"),
        "olav.memory.store.schema": ("CATEGORY_TTL", "expiry_for"),
        "olav.memory.recall.calibration": (
            "CALIBRATED_FLOORS",
            "DEDUP",
            "UPSTREAM_DEDUP",
            "REFERENCE",
        ),
        "olav.memory.ingest.capture": ("WRITE_VERBS", "SELF_WRITING"),
        "olav.memory.recall.lessons": ("DEDUP_DISTANCE",),
        "olav.memory.lifecycle.conflicts": ("SUPERSEDING",),
        "olav.memory.lifecycle.decay": (
            "NO_DECAY_ORIGINS",
            "ORIGIN_RANK",
            "DEFAULT_HALF_LIFE_DAYS",
        ),
        "olav.memory.recall.episodes": ("EVERY_N_TURNS",),
        "olav.memory.recall.rerank_judge": ("MAX_CLOSE", "DEFAULT_BAND", "UNCALIBRATED"),
    }.items():
        mod = importlib.import_module(module)
        assert [n for n in names if hasattr(mod, n)] == [], module


def test_olav_serve_sessions_keep_the_workspace_s_policy(tmp_path: Path) -> None:
    """An operator's session on `olav serve` is the workspace's configuration with their own
    memory.user: the policy and where its values came from are the same."""
    from olav.serve.pool import operator_workspace

    write_config(tmp_path, HASH_CONFIG + "memory:\n  policy:\n    quotas:\n      fact: 5\n")
    ws = Workspace.open(tmp_path)
    bob = operator_workspace(ws, "bob")
    assert bob.config["memory.user"] == "bob"
    assert policy_for(bob.config).quotas["fact"] == 5
    assert policy_for(bob.config) == policy_for(ws.config)
    assert bob.config.origins == ws.config.origins


def _nested(path: str, value: object) -> dict:  # type: ignore[type-arg]
    """``memory.policy.a.b`` = value as the mapping under ``memory.policy``."""
    parts = path.split(".")[2:]
    out: object = value
    for part in reversed(parts):
        out = {part: out}
    assert isinstance(out, dict)
    return out


@pytest.mark.parametrize(
    "row",
    [r for r in policy_module.POLICY_TABLE if r.read is not None],
    ids=lambda r: r.path,
)
def test_every_key_of_the_table_is_read_and_a_bad_value_names_it(row: Any) -> None:
    """The table is the parser: each memory.policy key it lists is read (a good value lands
    in its field), and a bad one is a one-line error naming the key."""
    entry = (row.entries or row.each)[0] if row.each else ""
    path = f"{row.path}.{entry}" if entry else row.path
    with pytest.raises(ConfigError, match=re.escape(path)):
        policy_module.build_policy({"memory.policy": _nested(path, "bogus")})
    good = {
        "quotas": 2, "tier_totals": 2, "episode_share": 0.5, "candidates": 7,
        "recent_episodes": 3, "tool_lessons": 3, "judge_close_calls": 4,
        "rerank_uncalibrated": [0.8, 0.1], "write_verbs": ["ship"], "never_capture": ["x"],
        "confidence": 0.4, "episode_every_turns": 4, "supersede_distance": 0.1,
        "conflicts": "review", "ttl": 3, "category_half_life": 5.0,
        "no_decay_origins": ["user"], "capacity": 9, "suppress_after_bad_runs": 3,
        "bad_run_weight": 0.25,
    }[row.field]  # fmt: skip
    built = policy_module.build_policy({"memory.policy": _nested(path, good)})
    value = getattr(built, row.field)
    got = value[entry] if entry else value
    assert got != getattr(policy_module.DEFAULTS, row.field) or row.each
    assert built.sources.get(f"{row.field}.{entry}" if entry else row.field, "").endswith(path)


# for each field of the table, a valid value other than the default, as olav.yaml writes it
# at the row's key (a mapping row: at its first entry)
_NOT_THE_DEFAULT: dict[str, object] = {
    "quotas": 4, "tier_totals": 4, "token_budget": 700, "episode_share": 0.5, "candidates": 7,
    "recent_episodes": 3, "tool_lessons": 3, "relevance": "0.1,0,0,0.1,0.1,0.01",
    "floors": "0.1,0,0,0.1,0.1,0.01", "second_opinion": "off", "judge_band": 0.05,
    "judge_close_calls": 4, "rerank_uncalibrated": [0.8, 0.1], "write_verbs": ["ship"],
    "never_capture": ["x"], "confidence": 0.4, "episode_every_turns": 4,
    "lesson_dedup": "0.25", "supersede_distance": 0.1, "conflicts": "review", "ttl": 3,
    "half_life_days": 9, "category_half_life": 5.0, "no_decay_origins": ["user"],
    "capacity": 9, "suppress_after_bad_runs": 3, "bad_run_weight": 0.25,
}  # fmt: skip


@pytest.mark.parametrize("row", policy_module.POLICY_TABLE, ids=lambda r: r.field)
def test_every_row_of_the_table_round_trips_from_olav_yaml(
    tmp_path: Path, row: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row, an older memory.* setting or a memory.policy key, is read by the table:
    its key set in olav.yaml changes its own field and no other (memory.relevance sets the
    mode and the floors, two rows of one key), the value's source names that key, and the
    value is what the row's reader returns."""
    import dataclasses

    import yaml

    from olav.memory.policy import table

    entry = (row.entries or row.each)[0] if row.each else ""
    key = f"{row.path}.{entry}" if entry else row.path
    assert policy_module.yaml_key(row.field, entry or None) == key
    tree: dict[str, Any] = {}
    node = tree
    *heads, last = key.split(".")
    for head in heads:
        node = node.setdefault(head, {})
    node[last] = _NOT_THE_DEFAULT[row.field]
    (tmp_path / "olav.yaml").write_text(yaml.safe_dump(tree))
    cfg = Config.load(tmp_path / "olav.yaml", environ={})
    built = table.build_policy(cfg)
    changed = {f for f in DEFAULTS.to_json() if getattr(built, f) != getattr(DEFAULTS, f)}
    assert changed == {r.field for r in table.POLICY_TABLE if r.path == row.path}
    name = f"{row.field}.{entry}" if entry else row.field
    if row.own_source:
        assert built.source(name) == f"{tmp_path / 'olav.yaml'}: {key}"
    else:
        assert name not in built.sources
    # the row's own reader made the value: swap it for one that returns a marker
    marker = object()
    if row.read is not None:
        swapped = dataclasses.replace(row, read=lambda b, k, v: marker)
    else:
        swapped = dataclasses.replace(row, from_setting=lambda k, v: marker)
    rows = tuple(swapped if r is row else r for r in table.POLICY_TABLE)
    monkeypatch.setattr(table, "POLICY_TABLE", rows)
    got = getattr(table.build_policy(cfg), row.field)
    assert (got[entry] if entry else got) is marker
