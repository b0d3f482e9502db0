"""The relevance corpus (issue 53): guides and labelled requests of agents olav does not ship,
written apart from recall's code, from which the relevance decision is learned and on which it
is reported leave-one-agent-out and leave-one-language-out.

Layout (benchmarks/data/relevance/README.md): ``<agent>/guides/*.guide.yaml`` and
``<agent>/requests.yaml``; an agent of olav's own templates names its guides with
``guides_from`` instead of a folder. Each request says its language, its kind and the intents
of the agent's guides that answer it. A (request, guide, relevant) pair is a request with each
guide its agent would recall from; loading checks every reference and says in one line what
is wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from olav.core.errors import OlavError
from olav.memory.ingest.guides import Guide, load_guide

DATA = Path(__file__).parent / "data" / "relevance"
REPO = Path(__file__).resolve().parents[1]
LANGS = ("en", "zh", "mixed")
KINDS = ("direct", "paraphrase", "typo", "near_miss", "other_agent", "small_talk", "nomatch")
EMPTY_KINDS = ("other_agent", "small_talk", "nomatch")  # expect nothing of this agent


@dataclass(frozen=True)
class Request:
    id: str
    agent: str
    text: str
    lang: str
    kind: str
    expect: tuple[str, ...] = ()
    other: str | None = None  # for other_agent: <agent>/<intent> it belongs to


@dataclass(frozen=True)
class Pair:
    request: Request
    guide: Guide
    relevant: bool


@dataclass
class Corpus:
    guides: dict[str, list[Guide]]  # agent -> its guides
    requests: list[Request]
    files: dict[str, list[Path]]  # agent -> its guides' files

    @property
    def agents(self) -> list[str]:
        return sorted(self.guides)

    def pairs(self, requests: list[Request] | None = None) -> list[Pair]:
        """Each request with each guide of its agent, labelled by its ``expect``."""
        out = []
        for req in self.requests if requests is None else requests:
            for guide in self.guides[req.agent]:
                out.append(Pair(req, guide, guide.intent in req.expect))
        return out

    def by_agent(self) -> Iterator[tuple[str, list[Request], list[Request]]]:
        """Leave-one-agent-out: (agent, the other agents' requests, this agent's)."""
        for agent in self.agents:
            yield (
                agent,
                [r for r in self.requests if r.agent != agent],
                [r for r in self.requests if r.agent == agent],
            )

    def by_language(self) -> Iterator[tuple[str, list[Request], list[Request]]]:
        """Leave-one-language-out: (language, the other languages' requests, this one's)."""
        for lang in LANGS:
            yield (
                lang,
                [r for r in self.requests if r.lang != lang],
                [r for r in self.requests if r.lang == lang],
            )

    def counts(self) -> dict[str, Any]:
        return {
            "agents": len(self.guides),
            "guides": sum(len(g) for g in self.guides.values()),
            "requests": len(self.requests),
            "pairs": len(self.pairs()),
            "relevant pairs": sum(p.relevant for p in self.pairs()),
            "kinds": dict(Counter(r.kind for r in self.requests)),
            "languages": dict(Counter(r.lang for r in self.requests)),
        }


def _bad(where: Path, what: str) -> OlavError:
    return OlavError(f"{where}: {what}", hint="Fix the corpus file (benchmarks/data/relevance)")


def _guide_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.guide.yaml"))


def _guides(folder: Path, agent: str, where: Path) -> list[Guide]:
    paths = _guide_files(folder)
    if not paths:
        raise _bad(where, f"agent {agent} has no guides in {folder}")
    guides = [load_guide(p) for p in paths]
    for g, p in zip(guides, paths, strict=True):
        if g.agent != agent and folder.is_relative_to(DATA):
            raise _bad(p, f"agent: {g.agent!r}, but the guide is in {agent}'s folder")
    intents = Counter(g.intent for g in guides)
    twice = [i for i, n in intents.items() if n > 1]
    if twice:
        raise _bad(where, f"intents named twice: {', '.join(twice)}")
    return guides


def _request(raw: Any, agent: str, intents: set[str], where: Path) -> Request:
    if not isinstance(raw, dict):
        raise _bad(where, f"a request must be a mapping, not {raw!r}")
    rid = str(raw.get("id") or "")
    text = str(raw.get("q") or "").strip()
    lang, kind = raw.get("lang"), raw.get("kind")
    expect = tuple(str(i) for i in raw.get("expect") or ())
    if not rid or not text:
        raise _bad(where, f"request {rid or raw!r}: id and q are required")
    if lang not in LANGS:
        raise _bad(where, f"request {rid}: lang {lang!r} is not one of {', '.join(LANGS)}")
    if kind not in KINDS:
        raise _bad(where, f"request {rid}: kind {kind!r} is not one of {', '.join(KINDS)}")
    unknown = [i for i in expect if i not in intents]
    if unknown:
        raise _bad(where, f"request {rid}: expect names no guide of {agent}: {unknown}")
    if kind in EMPTY_KINDS and expect:
        raise _bad(where, f"request {rid}: a {kind} request expects no guide of {agent}")
    if kind not in EMPTY_KINDS and not expect:
        raise _bad(where, f"request {rid}: a {kind} request names the guide that answers it")
    other = raw.get("other")
    return Request(rid, agent, text, str(lang), str(kind), expect, str(other) if other else None)


def load_corpus(root: Path = DATA) -> Corpus:
    """Every agent under ``root``: its guides and its requests, checked."""
    guides: dict[str, list[Guide]] = {}
    files: dict[str, list[Path]] = {}
    requests: list[Request] = []
    for where in sorted(root.glob("*/requests.yaml")):
        data = yaml.safe_load(where.read_text(encoding="utf-8")) or {}
        agent = str(data.get("agent") or where.parent.name)
        if agent != where.parent.name:
            raise _bad(where, f"agent: {agent!r} in the folder {where.parent.name}")
        source = data.get("guides_from")
        folder = REPO / str(source) if source else where.parent / "guides"
        guides[agent] = _guides(folder, agent, where)
        files[agent] = _guide_files(folder)
        intents = {g.intent for g in guides[agent]}
        requests += [_request(r, agent, intents, where) for r in data.get("requests") or []]
    ids = Counter(r.id for r in requests)
    twice = sorted(i for i, n in ids.items() if n > 1)
    if twice:
        raise OlavError(f"request ids used twice: {', '.join(twice[:10])}")
    return Corpus(guides, requests, files)
