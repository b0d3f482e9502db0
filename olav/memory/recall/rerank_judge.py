"""A second look at recall's candidates, past what the bundled encoders can tell: a cross-encoder
reranker on the user's own server, and the chat model as the judge of close calls.

Both are off by default, and both only ever overrule the floors' decision
(:func:`olav.memory.recall.relevance.decide`) where they are sure:

- **The reranker** scores every candidate in one request (:mod:`olav.memory.recall.rerank`). A score
  of at least ``accept`` makes a memory relevant whatever its margin; a score below ``reject``
  leaves it out whatever its margin; in between, the margin decides as before. The two floors are
  calibrated on the golden suite with the workspace's own reranker (``olav memory calibrate``); a
  reranker that helps nothing is calibrated to ``accept = inf, reject = -inf``, which changes
  nothing.
- **The judge** (:mod:`olav.memory.recall.judge`) is asked once per request about the candidates the
  reranker left undecided whose margin lies within ``band`` of their floor, at most
  ``close_calls`` of them. Its verdict decides those.

The band, the close calls per judge call and the reranker's floors before calibration are the
policy's (:class:`olav.memory.policy.MemoryPolicy`: ``judge_band``, ``judge_close_calls``,
``rerank_uncalibrated``).

A reranker or judge that fails leaves every decision as the floors made it; the caller shows one
line why (:attr:`olav.memory.recall.recaller.RecallResult.notes`).

:func:`overrule` is pure, so the benchmarks replay other floors on recorded scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.recall.relevance import Signals


@dataclass(frozen=True)
class RerankFloors:
    accept: float  # a score at least this: relevant whatever the margin
    reject: float  # a score below this: left out whatever the margin

    @classmethod
    def off(cls) -> RerankFloors:
        """Scores shown, never deciding."""
        return cls(math.inf, -math.inf)

    def to_json(self) -> dict[str, float | None]:
        return {
            "accept": None if math.isinf(self.accept) else self.accept,
            "reject": None if math.isinf(self.reject) else self.reject,
        }

    @classmethod
    def from_json(cls, data: Any) -> RerankFloors:
        accept, reject = data.get("accept"), data.get("reject")
        return cls(
            math.inf if accept is None else float(accept),
            -math.inf if reject is None else float(reject),
        )


def uncalibrated(policy: MemoryPolicy = DEFAULTS) -> RerankFloors:
    """The floors of a reranker `olav memory calibrate` has not measured: only scores it is
    very sure of decide."""
    return RerankFloors(*policy.rerank_uncalibrated)


def parse_rerank_floors(raw: str) -> RerankFloors | None:
    """``reranker.floors``: ``auto`` (None: calibrated, else :func:`uncalibrated`), ``off``
    (scores shown, never deciding), or two numbers ``ACCEPT REJECT``."""
    from olav.core.errors import ConfigError

    text = raw.strip().lower()
    if text == "auto":
        return None
    if text == "off":
        return RerankFloors.off()
    parts = text.replace(",", " ").split()
    try:
        accept, reject = (float(p) for p in parts)
    except ValueError:
        raise ConfigError(
            f"reranker.floors is {raw!r}",
            hint="Use auto, off, or two numbers: ACCEPT REJECT (e.g. 0.8 0.05)",
        ) from None
    if not reject <= accept:
        raise ConfigError(
            f"reranker.floors is {raw!r}: ACCEPT must not be below REJECT",
            hint="e.g. 0.8 0.05: at least 0.8 injects, below 0.05 leaves out",
        )
    return RerankFloors(accept, reject)


def overrule(signals: Signals, floors: RerankFloors) -> Signals:
    """Let the reranker's score, or else the judge's verdict, overrule the floors' decision
    where it is sure (``signals`` was just decided by the floors)."""
    signals.vouched = False
    score = signals.rerank
    if score is not None:
        if score >= floors.accept:
            if not signals.relevant:
                signals.reason += f"; relevant by the reranker ({score:.3f} >= {floors.accept:g})"
            signals.relevant = signals.vouched = True
            return signals
        if score < floors.reject:
            if signals.relevant:
                signals.reason += f"; left out by the reranker ({score:.3f} < {floors.reject:g})"
            signals.relevant = False
            return signals
    if signals.judged is not None:
        if signals.judged != signals.relevant:
            word = "applies" if signals.judged else "does not apply"
            signals.reason += f"; the judge says it {word}"
        signals.relevant = signals.vouched = signals.judged
    return signals


def undecided(signals: Signals, floors: RerankFloors) -> bool:
    """Whether the reranker left this candidate to the margin."""
    s = signals.rerank
    return s is None or floors.reject <= s < floors.accept


def close_calls(cands: Sequence[Any], floors: RerankFloors, band: float, most: int) -> list[Any]:
    """The candidates whose margin lies within ``band`` of their floor and that the reranker
    did not decide, nearest first, at most ``most``."""
    close = []
    for c in cands:
        sig = c.signals
        if c.hit.record.category == "episode" or sig.margin is None or sig.floor is None:
            continue
        if math.isinf(sig.floor) or not undecided(sig, floors):
            continue
        gap = abs(sig.margin - sig.floor)
        if gap <= band:
            close.append((gap, c))
    close.sort(key=lambda pair: pair[0])
    return [c for _, c in close[:most]]


@dataclass
class Look:
    """What one second look did: the round trips, the judge's verdict, and any failure as
    the one line the person is shown (the floors' decision stood)."""

    rerank_ms: float | None = None
    judge_ms: float | None = None
    judged: list[tuple[str, bool]] | None = None  # (memory id, applies) of the close calls
    notes: list[str] | None = None
    failed: str | None = None  # the first stage that failed: rerank or judge
    # what looked: the reranker, its floors, the judge and its band (SecondLook.setup_json)
    setup: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "rerank_ms": None if self.rerank_ms is None else round(self.rerank_ms, 1),
            "judge_ms": None if self.judge_ms is None else round(self.judge_ms, 1),
            "judged": [{"id": i, "applies": a} for i, a in self.judged or []],
            "notes": list(self.notes or []),
        }


@dataclass
class SecondLook:
    """The workspace's reranker and judge, with the reranker's floors, the judge's band and
    how many close calls one judge call decides (the policy's, by default)."""

    reranker: Any = None  # olav.memory.recall.rerank.Reranker
    floors: RerankFloors = field(default_factory=uncalibrated)
    judge: Any = None  # olav.memory.recall.judge.Judge
    band: float = DEFAULTS.judge_band
    floors_source: str = "uncalibrated"  # calibrated | reranker.floors | uncalibrated
    close_most: int = DEFAULTS.judge_close_calls

    def setup_json(self) -> dict[str, Any]:
        """Who looks, with what: the reranker's address, its floors and where they come from,
        whether a judge is asked and its band."""
        return {
            "reranker": None if self.reranker is None else self.reranker.where,
            "rerank_floors": self.floors.to_json(),
            "rerank_floors_from": self.floors_source,
            "judge": self.judge is not None,
            "judge_band": self.band,
        }

    def look(self, query: str, cands: Sequence[Any]) -> Look:
        """Score the candidates and ask about the close calls, overruling the floors'
        decisions in place (``cands`` were just decided by them)."""
        from olav.memory.recall.block import memory_body

        notes: list[str] = []
        out = Look(notes=notes, setup=self.setup_json())
        if self.reranker is not None:
            pool = [c for c in cands if c.hit.record.category != "episode"]
            got = self.reranker.score(query, [memory_body(c.hit) for c in pool])
            out.rerank_ms = got.ms
            if got.scores is None:
                notes.append(got.failure.line(self.reranker.where))
                out.failed = "rerank"
            else:
                for c, score in zip(pool, got.scores, strict=True):
                    c.signals.rerank = score
                    overrule(c.signals, self.floors)
        if self.judge is not None:
            close = close_calls(cands, self.floors, self.band, self.close_most)
            if close:
                verdict = self.judge.decide(query, [memory_body(c.hit) for c in close])
                out.judge_ms = verdict.ms
                if verdict.applies is None:
                    out.failed = out.failed or "judge"
                    notes.append(
                        f"the judge (the chat model) gave no verdict ({verdict.failure}); "
                        "the floors' decision stands"
                    )
                else:
                    out.judged = []
                    for c, applies in zip(close, verdict.applies, strict=True):
                        c.signals.judged = applies
                        overrule(c.signals, self.floors)
                        out.judged.append((c.hit.record.id, applies))
        return out


RERANK_CALIBRATION = "rerank-floors.json"
# what makes one reranker client differ from another (the process keeps one per set)
RERANKER_KEYS = tuple(
    f"reranker.{k}"
    for k in ("base_url", "model", "api", "path", "api_key_env", "timeout_ms", "scores")
)


class _Settings:
    """Settings given in part (benchmarks, tests) read as whole ones: the rest default."""

    def __init__(self, given: Any) -> None:
        self.given = given

    def __getitem__(self, key: str) -> Any:
        from olav.memory.policy import setting

        return setting(self.given, key)


_rerankers: dict[tuple[Any, ...], Any] = {}


def _close_rerankers() -> None:
    for reranker in _rerankers.values():
        if reranker is not None:
            reranker.close()
    _rerankers.clear()


def reranker_key(config: Any) -> str:
    """What a reranker's calibrated floors are saved under: its address and model."""
    return f"{config['reranker.base_url']}|{config['reranker.api']}|{config['reranker.model']}"


def read_rerank_floors(directory: Any, key: str) -> RerankFloors | None:
    import json
    from pathlib import Path

    path = Path(directory) / RERANK_CALIBRATION
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = data.get(key) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        return None
    try:
        return RerankFloors.from_json(entry)
    except (TypeError, ValueError):
        return None


def save_rerank_floors(
    directory: Any, key: str, floors: RerankFloors, measured: dict[str, Any]
) -> Any:
    import json
    from pathlib import Path

    from olav.core.fsutil import atomic_write_bytes

    path = Path(directory) / RERANK_CALIBRATION
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[key] = {**floors.to_json(), "measured": measured}
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())
    return path


def for_config(config: Any, directory: Any, judge_model: Any = None) -> SecondLook | None:
    """The second look the workspace's settings ask for (None: neither a reranker nor a
    judge). ``judge_model``: the chat model for verdicts, built by the layer above memory
    (:func:`olav.llm.models.verdict_model`); without it there is no judge."""
    from olav.memory.policy import policy_for
    from olav.memory.recall.judge import Judge
    from olav.memory.recall.rerank import Reranker

    policy = policy_for(config)
    config = _Settings(config)
    reranker = None
    if str(config["reranker.provider"]) != "none":
        key = tuple(config[k] for k in RERANKER_KEYS)
        reranker = _rerankers.get(key)
        if reranker is None:  # one client (and its connections) per process
            if not _rerankers:
                import atexit

                atexit.register(_close_rerankers)
            reranker = _rerankers[key] = Reranker.from_config(config)
    judge = Judge.from_config(config, judge_model)
    if reranker is None and judge is None:
        return None
    floors, source = parse_rerank_floors(str(config["reranker.floors"])), "reranker.floors"
    if floors is None:
        saved = read_rerank_floors(directory, reranker_key(config))
        floors, source = (saved, "calibrated") if saved else (uncalibrated(policy), "uncalibrated")
    return SecondLook(reranker, floors, judge, policy.judge_band, source, policy.judge_close_calls)
