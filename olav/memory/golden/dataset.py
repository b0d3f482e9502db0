"""The golden set (``olav/memory/golden/data``): guides, lessons, precedents and requests in
English, Chinese and both mixed, each request with the memories acceptable in its block, and a
hash of its id that puts it in the calibration or the test half. Loading checks every reference
and says in one line what is wrong. What is measured on it: :mod:`olav.memory.golden.suite`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from olav.core import yamltext
from olav.core.errors import OlavError
from olav.memory.recall.relevance import language  # one rule for the product and the suite

DATA = Path(__file__).parent / "data"
PRECEDENTS = ("operational_event", "query_pattern")


@dataclass(frozen=True)
class GoldenQuery:
    text: str
    expect: tuple[str, ...] = ()
    lesson: str | None = None
    negative: bool = False
    id: str = ""
    accept: tuple[str, ...] = ()  # also acceptable in the block (beyond expect and lesson)
    nomatch: bool = False  # in-domain, but no stored memory is needed

    @property
    def lang(self) -> str:
        return language(self.text)

    @property
    def split(self) -> str:
        """``cal`` or ``test``: fixed by the id, so adding queries never moves old ones."""
        return split_of(self.id or self.text)

    @property
    def acceptable(self) -> frozenset[str]:
        """Every memory that may appear in this query's block."""
        return frozenset((*self.expect, *self.accept, *([self.lesson] if self.lesson else [])))


def split_of(key: str) -> str:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return "cal" if digest[0] % 2 == 0 else "test"


@dataclass(frozen=True)
class GoldenSet:
    root: Path
    guide_files: list[Path]
    reflections: dict[str, str]
    precedents: dict[str, tuple[str, str]]  # id -> (category, text)
    queries: list[GoldenQuery]
    duplicates: list[tuple[str, str]]
    distinct: list[tuple[str, str]]


def _yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Point --data at a golden set folder")
    try:
        data = yamltext.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        raise OlavError(f"{path} is not valid YAML", hint="Check its indentation") from None
    if not isinstance(data, dict):
        raise OlavError(
            f"{path} must be a YAML mapping", hint="See the files in olav/memory/golden/data"
        )
    return data


def _pairs(data: dict[str, Any], key: str, path: Path) -> list[tuple[str, str]]:
    out = []
    for item in data.get(key) or []:
        ok = isinstance(item, list) and len(item) == 2
        if not (ok and all(isinstance(s, str) for s in item)):
            raise OlavError(f"{path}: every entry of {key} must be two lessons", hint=repr(item))
        out.append((item[0], item[1]))
    return out


def _query(q: dict[str, Any], reflections: dict[str, str]) -> GoldenQuery:
    query = GoldenQuery(
        text=str(q["q"]),
        expect=tuple(q.get("expect") or ()),
        lesson=q.get("lesson"),
        negative=bool(q.get("negative")),
        id=str(q.get("id") or ""),
        accept=tuple(q.get("accept") or ()),
        nomatch=bool(q.get("nomatch")),
    )
    kinds = [bool(query.expect or query.lesson), query.negative, query.nomatch]
    if sum(kinds) != 1 or (query.negative and query.accept):
        raise OlavError(
            f"query {query.text!r} must be exactly one of: expects a memory, negative, nomatch",
            hint="Give it expect/lesson, or negative: true (no accept), or nomatch: true",
        )
    if query.lesson is not None and query.lesson not in reflections:
        raise OlavError(f"query {query.text!r} names an unknown lesson {query.lesson!r}")
    return query


def load_golden(root: Path = DATA) -> GoldenSet:
    """Read and cross-check a golden set; a broken reference is an :class:`OlavError`."""
    root = Path(root)
    guides = sorted((root / "guides").glob("*.guide.yaml"))
    mem = _yaml(root / "memories.yaml")
    reflections = {str(r["id"]): str(r["text"]).strip() for r in mem.get("reflections") or []}
    precedents: dict[str, tuple[str, str]] = {}
    for p in mem.get("precedents") or []:
        if p.get("category") not in PRECEDENTS:
            raise OlavError(
                f"precedent {p.get('id')!r} has category {p.get('category')!r}",
                hint="Use " + " or ".join(PRECEDENTS),
            )
        precedents[str(p["id"])] = (str(p["category"]), str(p["text"]).strip())
    queries = [_query(q, reflections) for q in _yaml(root / "queries.yaml").get("queries") or []]
    ids = [q.id for q in queries if q.id]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise OlavError(f"query id {dup!r} is used twice", hint="Give every query its own id")
    dedup = _yaml(root / "dedup_pairs.yaml")
    gs = GoldenSet(
        root=root,
        guide_files=guides,
        reflections=reflections,
        precedents=precedents,
        queries=queries,
        duplicates=_pairs(dedup, "duplicates", root / "dedup_pairs.yaml"),
        distinct=_pairs(dedup, "distinct", root / "dedup_pairs.yaml"),
    )
    parts = {
        "guides": gs.guide_files,
        "reflections": gs.reflections,
        "queries with a lesson": [q for q in queries if q.lesson],
        "negative queries": [q for q in queries if q.negative],
        "duplicate pairs": gs.duplicates,
        "distinct pairs": gs.distinct,
    }
    for name, items in parts.items():
        if not items:
            raise OlavError(f"the golden set under {root} has no {name}")
    return gs
