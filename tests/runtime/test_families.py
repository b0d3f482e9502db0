"""The tool-call families: one module each, all of them registered, and the markers each
declares are the ones its reader needs (olav/runtime/rescue/families)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

from olav.bench import toolcall_suite as ts
from olav.bench.toolcalls import load_cases, shipped_corpus
from olav.runtime.rescue import families
from olav.runtime.rescue.families import FAMILIES, Family
from olav.runtime.rescue.families.reading import Reading, mask

SHARED = {"reading"}


def _corpus() -> list[str]:
    every, _ = ts.fixtures("all")
    texts = [f.raw_output for f in every]
    texts += [c.raw_text for c in load_cases(shipped_corpus())]
    return texts


def test_every_family_module_declares_one_family_and_is_registered_once() -> None:
    names = [m.name for m in pkgutil.iter_modules(families.__path__) if m.name not in SHARED]
    declared = [importlib.import_module(f"{families.__name__}.{n}").FAMILY for n in names]
    assert all(isinstance(f, Family) for f in declared)
    assert sorted(f.name for f in declared) == sorted(f.name for f in FAMILIES)
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)
    # strong families read first: a weak one never takes text a strong one claims
    strengths = [f.strong for f in FAMILIES]
    assert strengths == sorted(strengths, reverse=True)


def test_no_family_module_imports_another() -> None:
    """What two families share is in reading.py; a family's module imports only that (so a
    module can be added or removed without touching another)."""
    names = {m.name for m in pkgutil.iter_modules(families.__path__)} - SHARED
    for name in names:
        tree = ast.parse(Path(families.__path__[0], f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                families.__name__
            ):
                assert node.module == f"{families.__name__}.reading", (name, node.module)


def test_a_family_finds_calls_only_in_text_that_holds_one_of_its_triggers() -> None:
    """find_calls skips a family whose triggers are not in the message: on every text of
    both corpora, read by every family with no such gate, a find comes only with one."""
    texts = _corpus()
    assert len(texts) > 500
    read = 0
    for text in texts:
        masked = mask(text)
        for finished in (True, False):
            for family in FAMILIES:
                got = list(family.read(Reading(text, finished, masked, alone=True)))
                read += bool(got)
                if got:
                    assert any(t in text for t in family.triggers), (family.name, text[:200])
    assert read > 500  # the families did read most of the corpus


def test_every_strong_family_declares_where_its_stream_stops() -> None:
    """A call in a strong family's format never streams: each declares a marker the stream
    guard stops at, and every text a strong family reads holds one of its markers."""
    for family in FAMILIES:
        if family.strong:
            assert family.stream, family.name
    for text in _corpus():
        masked = mask(text)
        for family in FAMILIES:
            if family.strong and list(family.read(Reading(text, True, masked))):
                assert any(m in text for m in family.stream), (family.name, text[:200])
