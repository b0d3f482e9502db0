"""A second look at recall's candidates, past what the bundled encoders can tell: a cross-encoder
reranker on the user's own server, and the chat model as the judge of close calls.

Both are off by default, and both only ever overrule the floors' decision
(:func:`olav.memory.relevance.decide`) where they are sure:

- **The reranker** scores every candidate in one request (:mod:`olav.memory.rerank`). A score of
  at least ``accept`` makes a memory relevant whatever its margin; a score below ``reject``
  leaves it out whatever its margin; in between, the margin decides as before. The two floors
  are calibrated on the golden suite with the workspace's own reranker (``olav memory
  calibrate``); a reranker that helps nothing is calibrated to ``accept = inf, reject = -inf``,
  which changes nothing.
- **The judge** (:mod:`olav.memory.judge`) is asked once per request about the candidates the
  reranker left undecided whose margin lies within ``band`` of their floor, at most
  :data:`MAX_CLOSE` of them. Its verdict decides those.

A reranker or judge that fails leaves every decision as the floors made it; the caller shows one
line why (:attr:`olav.memory.recall.RecallResult.notes`).

:func:`overrule` is pure, so the benchmarks replay other floors on recorded scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from olav.memory.relevance import Signals

MAX_CLOSE = 6  # close calls one judge call decides (the nearest to their floors first)
DEFAULT_BAND = 0.01  # in the margin's unit: e5's margins span about 0.06 from p10 to p90


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


# until `olav memory calibrate` measures a reranker: only scores it is very sure of decide
UNCALIBRATED = RerankFloors(0.9, 0.02)


def parse_rerank_floors(raw: str) -> RerankFloors | None:
    """``reranker.floors``: ``auto`` (None: calibrated, else :data:`UNCALIBRATED`), ``off``
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


def close_calls(cands: Sequence[Any], floors: RerankFloors, band: float) -> list[Any]:
    """The candidates whose margin lies within ``band`` of their floor and that the reranker
    did not decide, nearest first, at most :data:`MAX_CLOSE`."""
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
    return [c for _, c in close[:MAX_CLOSE]]
