"""Hostile and malformed guides: every malformed shape is one GuideError naming the file and the
field; through the CLI, one line, a non-zero exit, no traceback, and nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from olav.core.errors import GuideError
from olav.memory.ingest.guides import Guide, guide_record, import_guides, load_guide
from olav.memory.store.scopes import EVERYONE
from tests.helpers import hash_store, olav_entry, rec
from tests.reliability._support import (
    assert_no_crash,
    memory_path,
    memory_state,
    run_cli,
)
from tests.reliability.hostile import MARKER, as_bytes

FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _guide(intent: str = "a", agent: str = "core", **extra: str) -> str:
    text = f"intent: {intent}\nagent: {agent}\nkeywords: [x]\nbody: Do it.\n"
    return text + "".join(f"{k}: {v}\n" for k, v in extra.items())


# -- guides: every malformed shape is one GuideError naming file and field ---------------------

BAD_GUIDES = [
    ("syntax_indent", "intent: i\n  agent: : a\n", "line", "not valid YAML"),
    ("syntax_quote", 'intent: "abc\nagent: core\n', "line", "not valid YAML"),
    ("syntax_tab", "intent: a\n\tagent: core\n", "line", "not valid YAML"),
    ("syntax_flow", "keywords: [a, b\nintent: x\n", "line", "not valid YAML"),
    ("empty_file", "", "(file)", "must be a YAML mapping"),
    ("only_comment", "# nothing here\n", "(file)", "must be a YAML mapping"),
    ("top_scalar", "just some text\n", "(file)", "must be a YAML mapping"),
    ("top_list", "- intent: a\n- agent: core\n", "(file)", "must be a YAML mapping"),
    ("missing_body", "intent: a\nagent: core\nkeywords: [x]\n", "body", "is required"),
    ("missing_all", "priority: 5\n", "intent", "is required"),
    ("keywords_str", _guide().replace("[x]", "backup"), "keywords", "valid list"),
    ("keywords_empty", _guide().replace("[x]", "[]"), "keywords", "non-empty"),
    ("keywords_ints", _guide().replace("[x]", "[1, 2]"), "keywords.0", "valid string"),
    ("body_int", _guide().replace("Do it.", "5"), "body", "valid string"),
    ("body_list", _guide().replace("Do it.", "[a, b]"), "body", "valid string"),
    ("body_blank", _guide().replace("Do it.", "'   '"), "body", "must not be empty"),
    ("priority_word", _guide(priority="high"), "priority", "valid integer"),
    ("priority_range", _guide(priority="101"), "priority", "between 0 and 100"),
    ("agent_int", _guide(agent="7"), "agent", "valid string"),
    ("related_str", _guide(related="other"), "related", "valid list"),
    ("category_bad", _guide(category="fact"), "category", "usage_guide"),
    ("tier_bad", _guide(source_tier="boss"), "source_tier", "vendor"),
    ("schema_v2", _guide(schema_version="2"), "schema_version", "only schema_version 1"),
    ("unknown_field", _guide(prio="3"), "prio", "not a guide field"),
    ("int_key", "1: x\n" + _guide(), "1", "Keys should be strings"),
    ("intent_traversal", _guide(intent="../../etc/passwd"), "intent", "lowercase"),
    ("agent_traversal", _guide(agent="../core"), "agent", "lowercase"),
    ("intent_upper", _guide(intent="Backup Router"), "intent", "lowercase"),
    ("binary", bytes(range(256)) * 8, "(file)", "is not UTF-8"),
    ("latin1", _guide().replace("Do it.", "café").encode("latin-1"), "(file)", "not UTF-8"),
    ("utf16", _guide().encode("utf-16"), "(file)", "is not UTF-8"),
    ("nul_byte", "intent: a\x00b\nagent: core\n", "(file)", "not valid YAML"),
    ("control_char", "intent: a\x07\nagent: core\n", "(file)", "not valid YAML"),
    ("py_apply", f"!!python/object/apply:os.system ['touch {MARKER}']\n", "line", "YAML"),
    (
        "py_apply_field",
        _guide().replace("Do it.", f"!!python/object/apply:os.system ['touch {MARKER}']"),
        "line",
        "not valid YAML",
    ),
    (
        "py_new",
        f"!!python/object/new:subprocess.Popen [['touch', '{MARKER}']]\n",
        "line",
        "not valid YAML",
    ),
    ("py_name", _guide().replace("Do it.", "!!python/name:os.system"), "line", "YAML"),
    (
        "billion_laughs",
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "intent: a\nagent: core\nkeywords: *d\nbody: b\n",
        "keywords.0",
        "valid string",
    ),
]


@pytest.mark.parametrize(
    ("content", "field", "problem"),
    [pytest.param(c, f, p, id=i) for i, c, f, p in BAD_GUIDES],
)
def test_bad_guide_is_one_guide_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: str | bytes,
    field: str,
    problem: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.guide.yaml"
    path.write_bytes(as_bytes(content))
    with pytest.raises(GuideError) as err:
        load_guide(path)
    line = err.value.one_line()
    assert "\n" not in line
    assert line.startswith(f"{path}: field '{field}"), line
    assert problem in line, line
    assert not (tmp_path / MARKER).exists(), "a YAML tag executed code"


def test_bad_guides_through_the_cli_one_line_each_nothing_written(ro_ws: Path) -> None:
    folder = ro_ws / "hostile"
    folder.mkdir()
    for case_id, content, _, _ in BAD_GUIDES:
        (folder / f"{case_id}.guide.yaml").write_bytes(as_bytes(content))
    before = memory_state(ro_ws)
    result = olav_entry(ro_ws, "kb", "import-guides", "hostile")
    assert result.returncode == 1, result.stdout + result.stderr
    assert_no_crash(result)
    lines = result.stdout.splitlines()
    for case_id, _, field, problem in BAD_GUIDES:
        name = f"hostile/{case_id}.guide.yaml:"
        mine = [ln for ln in lines if name in ln]
        assert len(mine) == 1, (case_id, mine)
        assert f"field '{field}" in mine[0] and problem in mine[0], mine[0]
    assert f"{len(BAD_GUIDES)} errors" in result.stdout
    assert memory_state(ro_ws) == before
    assert not (ro_ws / MARKER).exists(), "a YAML tag executed code"


def test_deeply_nested_yaml_is_a_guide_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.guide.yaml"
    path.write_text("intent: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(GuideError) as err:
        load_guide(path)
    assert str(path) in err.value.one_line()


def test_boolean_priority_is_a_wrong_type(tmp_path: Path) -> None:
    path = tmp_path / "b.guide.yaml"
    path.write_text(_guide(priority="true"))
    with pytest.raises(GuideError, match="field 'priority'"):
        load_guide(path)


def test_guide_scope_must_be_global_an_agent_or_a_team(tmp_path: Path) -> None:
    path = tmp_path / "s.guide.yaml"
    path.write_text(_guide(scope="'net ops!'"))
    with pytest.raises(GuideError, match="field 'scope'"):
        load_guide(path)


def test_bom_guide_imports(tmp_path: Path) -> None:
    """A UTF-8 BOM (Windows editors add one) is not content: the guide imports as usual."""
    folder = tmp_path / "core"
    folder.mkdir()
    (folder / "bom.guide.yaml").write_bytes(b"\xef\xbb\xbf" + _guide(intent="bom_ok").encode())
    (folder / "crlf.guide.yaml").write_bytes(
        b"\xef\xbb\xbf" + _guide(intent="crlf_ok").replace("\n", "\r\n").encode()
    )
    store = hash_store(tmp_path / "m.lance")
    summary = import_guides(store, sorted(folder.iterdir()), base=tmp_path)
    assert not summary.errors, summary.to_json()
    assert sorted(summary.added) == ["guide_core_bom_ok", "guide_core_crlf_ok"]
    row = store.read("guide_core_bom_ok", EVERYONE)
    assert row is not None and row.metadata["intent"] == "bom_ok"
    assert "\ufeff" not in row.text


def test_duplicate_intents_are_an_error_not_an_overwrite(hash_ws: Path) -> None:
    for sub, body in (("a", "first body"), ("b", "second body")):
        (hash_ws / "dups" / sub).mkdir(parents=True)
        (hash_ws / "dups" / sub / "x.guide.yaml").write_text(
            _guide(intent="same_intent").replace("Do it.", body)
        )
    result = olav_entry(hash_ws, "kb", "import-guides", "dups")
    assert result.returncode == 1
    assert_no_crash(result)
    errs = [ln for ln in result.stdout.splitlines() if "dups/b/x.guide.yaml" in ln]
    assert len(errs) == 1, result.stdout
    assert "field 'intent'" in errs[0] and "duplicates dups/a/x.guide.yaml" in errs[0]
    store = hash_store(memory_path(hash_ws))
    rows = store.list_rows("id = 'guide_core_same_intent'")
    assert len(rows) == 1
    assert rows[0].metadata["source"] == "dups/a/x.guide.yaml"
    assert rows[0].metadata["body"] == "first body"


def test_a_20_mb_guide_is_refused_quickly(hash_ws: Path) -> None:
    folder = hash_ws / "huge"
    folder.mkdir()
    line = "  " + "word " * 19 + "\n"
    text = "intent: huge\nagent: core\nkeywords: [x]\nbody: |\n" + line * (20 * 2**20 // len(line))
    (folder / "huge.guide.yaml").write_text(text)
    before = memory_state(hash_ws)
    try:
        result = run_cli("kb", "import-guides", "huge", cwd=hash_ws, timeout=12)
    except subprocess.TimeoutExpired:
        pytest.fail("importing a 20 MB guide was still running after 12 s")
    assert result.returncode != 0
    assert_no_crash(result)
    mine = [ln for ln in (result.stdout + result.stderr).splitlines() if "huge.guide.yaml" in ln]
    assert len(mine) == 1, result.stdout + result.stderr
    assert memory_state(hash_ws) == before


def test_markup_in_a_guide_key_is_reported_not_a_crash(ro_ws: Path) -> None:
    folder = ro_ws / "markup"
    folder.mkdir()
    (folder / "m.guide.yaml").write_text(_guide() + "'[/x]': 1\n")
    result = olav_entry(ro_ws, "kb", "import-guides", "markup")
    assert result.returncode == 1
    assert_no_crash(result)
    assert "markup/m.guide.yaml: field '[/x]'" in result.stdout


def test_memory_text_with_markup_is_shown_verbatim(hash_ws: Path) -> None:
    store = hash_store(memory_path(hash_ws))
    store.upsert([rec("hosts_note", "Edit [/etc/hosts] then [bold]reload[/bold]")])
    result = olav_entry(hash_ws, "memory", "show", "hosts_note")
    assert result.returncode == 0, result.stderr
    assert "[/etc/hosts]" in result.stdout
    result = olav_entry(hash_ws, "memory", "list", "--limit", "500")
    assert result.returncode == 0, result.stderr
    assert "[/etc/hosts]" in result.stdout


VALID_DOC = {"intent": "backup_router", "agent": "netops", "keywords": ["backup"], "body": "Do."}
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["core", "netops", "usage_guide", "format_guide", "user", "team:x", "1"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


@st.composite
def guide_docs(draw: st.DrawFn) -> dict[str, object]:
    doc: dict[str, object] = dict(VALID_DOC)
    for key in draw(st.lists(st.sampled_from([*Guide.model_fields, "extra"]), max_size=4)):
        doc[key] = draw(values)
    for key in draw(st.lists(st.sampled_from(list(VALID_DOC)), max_size=2)):
        doc.pop(key, None)
    return doc


def _guide_or_guide_error(path: Path) -> None:
    try:
        guide = load_guide(path)
    except GuideError as err:
        line = err.one_line()
        assert "\n" not in line and line.startswith(str(path)), line
        return
    record = guide_record(guide, "fuzz.guide.yaml")  # and it can be stored
    assert record.scope and record.id.startswith("guide_")


@FUZZ
@given(doc=guide_docs())
def test_fuzzed_guide_documents(tmp_path: Path, doc: dict[str, object]) -> None:
    path = tmp_path / "fuzz.guide.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    _guide_or_guide_error(path)


@FUZZ
@given(
    raw=st.one_of(
        st.binary(max_size=300),
        st.text(alphabet="intent:agentkeywordsbody[]{}-&*!|>'\"#%@`\n\t ,?x1", max_size=200).map(
            str.encode
        ),
        st.text(max_size=200).map(lambda t: _guide().encode() + t.encode()),
    )
)
def test_fuzzed_guide_bytes(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "fuzz.guide.yaml"
    path.write_bytes(raw)
    _guide_or_guide_error(path)
