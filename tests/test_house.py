"""The house rules a reviewer would otherwise hold by hand (docs/architecture.md, Layers)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST_LINES = 500
CATALOGUE = "One cohesive catalogue (over 500 lines on purpose)"


def test_no_module_is_over_500_lines_unless_its_docstring_says_it_is_a_catalogue() -> None:
    too_long = []
    for path in sorted([*(ROOT / "olav").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= MOST_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if CATALOGUE not in " ".join(doc.split()):
            too_long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not too_long, "split these, or say in the docstring why not: " + ", ".join(too_long)


def test_the_catalogues_are_the_ones_the_architecture_names() -> None:
    said = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "olav").rglob("*.py")
        if CATALOGUE in " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
    }
    assert said == {"olav/serve/openapi.py"}


def test_every_audit_event_kind_is_named_in_the_audit_vocabulary() -> None:
    """An ``event(run_id, kind, detail)`` call names its kind by a constant of
    olav/audit/events.py, never by a literal, so a writer and its readers cannot drift."""
    literal = []
    for path in sorted((ROOT / "olav").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr == "event" and len(node.args) > 1:
                kind = node.args[1]
                if isinstance(kind, ast.Constant | ast.JoinedStr) or any(
                    isinstance(part, ast.Constant) for part in ast.walk(kind)
                ):
                    literal.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not literal, "name the kind in olav/audit/events.py: " + ", ".join(literal)


def test_no_module_imports_a_private_name_of_another_package() -> None:
    """``from olav.memory.store.scopes import _name`` in olav.serve leans on what scopes may
    change at will: a name another package needs is public. Inside one package (olav.cli,
    olav.memory.golden…) a module may share its siblings' helpers."""
    leaning = []
    for path in sorted((ROOT / "olav").rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("olav"):
                continue
            source = str(node.module)
            home = (
                source if (ROOT / Path(*source.split("."))).is_dir() else source.rsplit(".", 1)[0]
            )
            private = [
                a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
            ]
            if private and home != package and not home.startswith(package + "."):
                leaning.append(f"{path.relative_to(ROOT)}: {source}.{', '.join(private)}")
    assert not leaning, "make these public, or move them: " + "; ".join(leaning)
