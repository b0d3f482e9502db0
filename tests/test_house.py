"""The house rules a reviewer would otherwise hold by hand (docs/architecture.md, Layers)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    """No exception, catalogues included: a long table is data, or it is two modules."""
    too_long = [
        f"{path.relative_to(ROOT)} ({path.read_text(encoding='utf-8').count(chr(10))} lines)"
        for path in sorted([*(ROOT / "olav").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])
        if path.read_text(encoding="utf-8").count("\n") > MOST_LINES
    ]
    assert not too_long, "split these: " + ", ".join(too_long)


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
