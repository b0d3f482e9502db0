"""Hostile and malformed input besides guides (those: test_hostile_guides.py): curator drafts,
cron expressions, olav.yaml and JSONL imports. Every refusal is one line naming the
file/field/value, a non-zero exit, no traceback, and nothing written. The cases go through
olav's entry point in this process (tests.helpers.olav_entry); the refusal as a shell sees it,
from a process of its own, is tests/test_cli.py's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from olav.core.errors import OlavError
from olav.cron import CronExpressionError
from olav.cron.expression import validate_expression
from olav.learning.curator import CATEGORIES as DRAFT_CATEGORIES
from olav.learning.curator import DRAFTS, DraftRequest, propose_draft, sanitise_intent
from olav.memory.ingest.transfer import FORMAT, export_jsonl, import_jsonl
from tests.helpers import HASH_CONFIG, hash_store, olav_entry
from tests.reliability._support import (
    assert_one_line_error,
    make_workspace,
    memory_path,
    memory_state,
)
from tests.reliability.hostile import MARKER, as_bytes

# -- curator drafts ---------------------------------------------------------------------------

SAFE_STEM = re.compile(r"^[a-z0-9_]{1,64}$")


@settings(max_examples=300, deadline=None, database=None)
@given(intent=st.text(max_size=120))
def test_sanitise_intent_is_a_safe_stem_or_an_error(intent: str) -> None:
    try:
        stem = sanitise_intent(intent)
    except OlavError as err:
        assert "\n" not in err.one_line()
        return
    assert SAFE_STEM.match(stem), stem
    assert sanitise_intent(stem) == stem


@pytest.fixture
def curator_root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "core").mkdir(parents=True)
    (root / "core" / "SKILL.md").write_text("# core\n")
    return root


def _all_files(base: Path) -> set[Path]:
    return {p for p in base.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "intent",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "..\\..\\windows\\system32",
        "a/../../b",
        "core/guides/evil",
        "....//....//x",
        "intent\nwith newline",
        "nul\x00byte",
        "~root/.ssh/authorized_keys",
        "x" * 500,
        "CON",
    ],
)
def test_curator_intent_cannot_leave_the_drafts_folder(
    curator_root: Path, tmp_path: Path, intent: str
) -> None:
    before = _all_files(tmp_path)
    propose_draft(curator_root, DraftRequest(intent, ["k"], body="remember", category="fact"))
    created = _all_files(tmp_path) - before
    assert len(created) == 1, created
    (draft,) = created
    assert draft.parent == curator_root / DRAFTS
    assert SAFE_STEM.match(draft.name.removesuffix(".draft.json")), draft.name


@pytest.mark.parametrize("intent", ["../..", "///", "备份路由器", "   ", ""])
def test_curator_intent_without_usable_characters_is_refused(
    curator_root: Path, tmp_path: Path, intent: str
) -> None:
    before = _all_files(tmp_path)
    with pytest.raises(OlavError, match="no usable characters") as err:
        propose_draft(curator_root, DraftRequest(intent, ["k"], body="x", category="fact"))
    assert "\n" not in err.value.one_line()
    assert _all_files(tmp_path) == before


@pytest.mark.parametrize(
    "category", ["facts", "../fact", "fact' OR '1'='1", "", "FACT", "reflection", "audit"]
)
def test_curator_unknown_category_is_refused(
    curator_root: Path, tmp_path: Path, category: str
) -> None:
    assert category not in DRAFT_CATEGORIES
    before = _all_files(tmp_path)
    with pytest.raises(OlavError, match="unknown category") as err:
        propose_draft(curator_root, DraftRequest("ok", ["k"], body="x", category=category))
    assert repr(category) in err.value.one_line()
    assert _all_files(tmp_path) == before


@pytest.mark.parametrize(
    ("agent", "scope", "needle"),
    [
        ("../..", None, "is not a name"),
        ("../../etc", None, "no agent 'etc'"),
        ("core", "x' OR '1'='1", "is not valid"),
        ("core", "team:", "is not valid"),
        ("ghost", None, "no agent 'ghost'"),
    ],
)
def test_curator_hostile_agent_or_scope_is_refused(
    curator_root: Path, tmp_path: Path, agent: str, scope: str | None, needle: str
) -> None:
    before = _all_files(tmp_path)
    with pytest.raises(OlavError, match=re.escape(needle)):
        request = DraftRequest("ok", ["k"], "x", "fact", agent=agent, scope=scope)
        propose_draft(curator_root, request)
    assert _all_files(tmp_path) == before


# -- cron expressions -------------------------------------------------------------------------


def test_invalid_cron_expressions_are_refused_by_the_cli(ro_ws: Path) -> None:
    ok = olav_entry(ro_ws, "cron", "enable", "reflect", "--at", "0 4 * * *")
    assert ok.returncode == 0, ok.stderr
    jobs = ro_ws / ".olav" / "cron.yaml"
    before = jobs.read_bytes()
    for expr in ("61 * * * *", "* * * *", "0 4 31 2 *", "0 4 * * 8", "*/0 * * * *"):
        result = olav_entry(ro_ws, "cron", "enable", "reflect", "--at", expr)
        assert_one_line_error(result, f"invalid cron expression '{expr}'")
        assert jobs.read_bytes() == before, expr


@settings(max_examples=300, deadline=None, database=None)
@given(
    expr=st.one_of(
        st.text(alphabet="0123456789*/,- ?LW#JANFEBMONSUNTUEabc", max_size=30),
        st.lists(
            st.text(alphabet="0123456789*/,-", min_size=1, max_size=6), min_size=5, max_size=5
        ).map(" ".join),
    )
)
def test_cron_expression_is_valid_or_one_cron_error(expr: str) -> None:
    try:
        validate_expression(expr)
    except CronExpressionError as err:
        assert "\n" not in err.one_line()


# -- olav.yaml --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cfg_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = make_workspace(tmp_path_factory.mktemp("cfg") / "ws", prime=False)
    yield root


BAD_CONFIGS = [
    ("syntax", "llm:\n  model: [unclosed\n", "is not valid YAML"),
    ("top_list", "- llm\n- memory\n", "must hold a mapping"),
    ("unknown_key", "memory:\n  rrf_kk: 3\n", "unknown key 'memory.rrf_kk'"),
    ("float_list", "llm:\n  temperature: [1]\n", "llm.temperature must be float, got [1]"),
    ("int_word", "llm:\n  num_ctx: 16k\n", "llm.num_ctx must be int, got '16k'"),
    ("int_bool", "llm:\n  num_ctx: true\n", "llm.num_ctx must be int, got True"),
    ("bool_word", "llm:\n  thinking: maybe\n", "llm.thinking must be bool, got 'maybe'"),
    ("choice", "embedder:\n  provider: word2vec\n", "embedder.provider is 'word2vec'"),
    ("agents_list", "agents: [netops, core]\n", "'agents' must be a mapping"),
    ("py_tag", f"llm:\n  model: !!python/object/apply:os.system ['touch {MARKER}']\n", "YAML"),
]


@pytest.mark.parametrize(("text", "needle"), [pytest.param(t, n, id=i) for i, t, n in BAD_CONFIGS])
def test_bad_config_is_one_line_naming_the_key(cfg_ws: Path, text: str, needle: str) -> None:
    (cfg_ws / ".olav" / "olav.yaml").write_text(text)
    result = olav_entry(cfg_ws, "config")
    assert_one_line_error(result, needle)
    assert not (cfg_ws / MARKER).exists()


XFAIL_CONFIGS = [
    (
        "unknown_agent",
        "agents:\n  nosuch:\n    model: qwen3:8b\n",
        "nosuch",
        "Config.load/Workspace.open accept an agents: entry for an agent that does not exist",
    ),
    (
        "unknown_agent_key",
        "agents:\n  netops:\n    modle: qwen3:8b\n",
        "modle",
        "per-agent overrides are not validated: the typo 'modle' is silently ignored",
    ),
    (
        "rrf_k_negative",
        "memory:\n  rrf_k: -1\n",
        "memory.rrf_k",
        "memory.rrf_k: -1 is accepted; memory search then dies with ZeroDivisionError",
    ),
    (
        "rrf_k_fraction",
        "memory:\n  rrf_k: 1.5\n",
        "memory.rrf_k",
        "int settings truncate floats: memory.rrf_k: 1.5 silently becomes 1",
    ),
    (
        "token_budget_negative",
        "memory:\n  token_budget: -10\n",
        "memory.token_budget",
        "memory.token_budget: -10 is accepted (no range check on int settings)",
    ),
    (
        "cache_size_negative",
        "embedder:\n  cache_size: -5\n",
        "embedder.cache_size",
        "embedder.cache_size: -5 is accepted (no range check on int settings)",
    ),
    (
        "null_path",
        "paths:\n  databases: null\n",
        "paths.databases",
        "paths.databases: null becomes the string 'None': memory goes to <root>/None/",
    ),
    (
        "not_utf8",
        b"llm:\n  model: caf\xe9\n",
        "olav.yaml",
        "Config.load lets UnicodeDecodeError escape for a non-UTF-8 olav.yaml (internal error)",
    ),
]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param(t, n, id=i)  # each was a bug (reason r), fixed
        for i, t, n, r in XFAIL_CONFIGS
    ],
)
def test_invalid_config_value_is_refused(cfg_ws: Path, text: str | bytes, needle: str) -> None:
    (cfg_ws / ".olav" / "olav.yaml").write_bytes(as_bytes(text))
    result = olav_entry(cfg_ws, "config")
    assert_one_line_error(result, needle)


def test_null_database_path_writes_nothing(hash_ws: Path) -> None:
    (hash_ws / ".olav" / "olav.yaml").write_text(HASH_CONFIG + "paths:\n  databases: null\n")
    result = olav_entry(hash_ws, "memory", "stats")
    assert not (hash_ws / "None").exists()
    assert_one_line_error(result, "paths.databases")


# -- JSONL import -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def export_lines(ro_ws: Path) -> list[str]:
    """A real export of ro_ws, with ids renamed so that a successful import would add rows."""
    path = ro_ws / "exports" / "base.jsonl"
    export_jsonl(hash_store(memory_path(ro_ws)), path)
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        row = json.loads(line)
        row["id"] = "imported_" + row["id"]
        out.append(json.dumps(row, ensure_ascii=False))
    assert len(out) > 5
    return out


def _truncated(lines: list[str]) -> str:
    text = "\n".join(lines)
    return text[: len(text) - len(lines[-1]) // 2]


def _with_row(lines: list[str], **changes: object) -> str:
    row = json.loads(lines[3])
    row.update(changes)
    return "\n".join([*lines[:3], json.dumps(row), *lines[4:]]) + "\n"


@pytest.mark.parametrize(
    ("make", "needles"),
    [
        pytest.param(_truncated, ["line", "is not a memory row", "nothing was imported"], id="cut"),
        pytest.param(
            lambda ls: _with_row(ls, vector=[0.5] * 10), ["10-d vector", "64-d"], id="veclen"
        ),
    ],
)
def test_bad_jsonl_imports_nothing(
    ro_ws: Path, export_lines: list[str], make: object, needles: list[str]
) -> None:
    path = ro_ws / "exports" / "bad.jsonl"
    path.write_text(make(export_lines), encoding="utf-8")  # type: ignore[operator]
    before = memory_state(ro_ws)
    result = olav_entry(ro_ws, "kb", "import", str(path))
    assert_one_line_error(result, *needles)
    assert memory_state(ro_ws) == before


HEADER = json.dumps({"format": FORMAT, "version": 1, "embedder": "hash:hash-64", "dim": 64})
ROW = {"id": "row_x1", "text": "a row", "category": "fact", "scope": "global"}

GOOD_JSONL_ERRORS = [
    ("extra_field", {**ROW, "evil": 1}),
    ("missing_text", {k: v for k, v in ROW.items() if k != "text"}),
    ("bad_date", {**ROW, "created_at": "yesterday"}),
    ("date_int", {**ROW, "created_at": 5}),
    ("row_list", [1, 2]),
    ("empty_scope", {**ROW, "scope": ""}),
    ("bad_category", {**ROW, "category": "facts"}),
    ("confidence_range", {**ROW, "confidence": 7}),
]
XFAIL_JSONL = [
    ("confidence_str", {**ROW, "confidence": "high"}, "TypeError escapes"),
    ("id_int", {**ROW, "id": 5}, "AttributeError escapes"),
    ("tags_str", {**ROW, "tags": "abc"}, "imported as tags ['a', 'b', 'c']"),
    ("metadata_str", {**ROW, "metadata": "abc"}, "imported; metadata.get() then fails"),
    ("vector_strs", {**ROW, "vector": ["a"] * 64}, "pyarrow ArrowInvalid escapes"),
    ("access_count_str", {**ROW, "access_count": "x"}, "pyarrow ArrowInvalid escapes"),
    ("text_null", {**ROW, "text": None}, "AttributeError escapes (None is embedded)"),
    ("vector_nan", {**ROW, "vector": [float("nan")] * 64}, "lance RuntimeError escapes"),
]


def _import_one(tmp_path: Path, body: bytes, names: tuple[str, ...] = ("line 2", "row_x1")) -> None:
    store = hash_store(tmp_path / "m.lance")
    version = store.table.version
    path = tmp_path / "in.jsonl"
    path.write_bytes(body)
    with pytest.raises(OlavError) as err:
        import_jsonl(store, path)
    line = err.value.one_line()
    assert "\n" not in line
    assert any(n in line for n in names), line
    assert store.size() == 0 and store.table.version == version


@pytest.mark.parametrize(
    "row",
    [pytest.param(r, id=i) for i, r in GOOD_JSONL_ERRORS]
    + [
        pytest.param(r, id=i)  # each was a bug (why), fixed
        for i, r, why in XFAIL_JSONL
    ],
)
def test_wrongly_typed_jsonl_row_is_one_error(tmp_path: Path, row: object) -> None:
    _import_one(tmp_path, (HEADER + "\n" + json.dumps(row) + "\n").encode())


def test_non_utf8_jsonl_is_one_error(tmp_path: Path) -> None:
    row = json.dumps({**ROW, "text": "café"}, ensure_ascii=False)
    _import_one(tmp_path, (HEADER + "\n" + row + "\n").encode("latin-1"), ("in.jsonl",))
