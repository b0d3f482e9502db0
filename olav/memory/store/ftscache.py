"""Full-text rankings from the in-process snapshot: LanceDB's BM25, computed in numpy.

LanceDB answers a full-text query with a fixed cost of 4-7 ms; the same ranking over a
snapshot of 20k rows costs well under a millisecond. What makes it the same ranking:

- tokens come from LanceDB's own tokenizer (``lancedb.tokenize`` with the options of the
  index: ICU word breaking with identifier splitting, lower case, ASCII folding, English stop
  words and stemming, tokens over 40 characters dropped);
- the score is LanceDB's BM25 (k1 = 1.2, b = 0.75), in float32: for every query token, each
  occurrence counted, ``idf * (k1 + 1) * tf / (tf + k1 * (1 - b + b * len / avglen))`` with
  ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))``, where N counts the documents with at least
  one token and ``len`` is a document's token count after stop words;
- the statistics cover every row of the table, whatever the pre-filters select.

Two differences remain, both measured in docs/benchmark-notes.md. Equal scores come back in
row order here, while LanceDB's order within a tie is an accident of its WAND walk. And
until ``optimize()`` LanceDB scores indexed rows with its index's statistics, which still
count deleted and replaced rows, and rows added since with statistics of the pre-filtered new
rows; here the statistics are always those of the table as it is, which is what LanceDB
returns once the index is up to date.

Tokenizing costs: ``lancedb.tokenize`` with stemming and stop words builds its filters on
every call (about 0.5 ms); without them it costs microseconds. So a query is split without
them (and without ASCII folding, which comes after them), and each word is mapped to its
final token (stemmed, or dropped as a stop word) through a table learned from the documents
and earlier queries; a query with a word never seen is tokenized in full, which teaches the
table its words.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

# ICU word breaking (Chinese and Japanese work) that also splits snake_case and camelCase
# identifiers, so "snapshot" finds take_snapshot_when_db_stale and register finds
# register_service. The index is built with this tokenizer and LanceDB's other defaults.
FTS_TOKENIZER = "icu/split"
K1 = np.float32(1.2)
B = np.float32(0.75)
# joins documents so one tokenizer call handles thousands of them; a document that contains
# it only costs a slower path (see Analyzer.documents)
SEPARATOR = "olavftsboundaryq"
MAX_LEARNED = 500_000  # words in the raw -> final table before it starts over
_UNKNOWN = "\x00unknown"  # not a token: tokens hold no NUL


class Analyzer:
    """LanceDB's tokenizer for one index configuration, with the word table above."""

    def __init__(self, base_tokenizer: str = FTS_TOKENIZER) -> None:
        self.base_tokenizer = base_tokenizer
        self._final: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def _call(self, text: str, *, full: bool) -> list[Any]:
        # the words as split and lower-cased, before stop words, stemming and folding
        # (folding comes last: "résumé" and "resume" stem differently)
        return list(
            native_tokenize()(
                text,
                base_tokenizer=self.base_tokenizer,
                language="English",
                max_token_length=40,
                lower_case=True,
                stem=full,
                remove_stop_words=full,
                custom_stop_words=None,
                ascii_folding=full,
                ngram_min_length=3,
                ngram_max_length=3,
                prefix_only=False,
            )
        )

    def words(self) -> dict[str, str | None]:
        """The learned table: word -> final token (None: a stop word)."""
        return dict(self._final)

    def teach(self, words: dict[str, str | None]) -> None:
        """Add words learned elsewhere (the snapshot on disk keeps them)."""
        with self._lock:
            for raw, final in words.items():
                self._final.setdefault(raw, final)

    def _learn(self, raw: Sequence[Any], full: Sequence[Any]) -> None:
        """Pair each word with its final token by position. Positions agree between the two
        passes only from the first kept token on, so every text starts with SEPARATOR."""
        final = {t.position: t.text for t in full}
        with self._lock:
            if len(self._final) > MAX_LEARNED:
                self._final.clear()
            for t in raw:
                self._final.setdefault(t.text, final.get(t.position))

    def _tokens(self, texts: Sequence[str]) -> list[list[str]] | None:
        """The final tokens of each text, from one call (None if a text holds SEPARATOR)."""
        joined = SEPARATOR + "\n" + f"\n{SEPARATOR}\n".join(texts)
        full = self._call(joined, full=True)
        self._learn(self._call(joined, full=False), full)
        docs: list[list[str]] = []
        for t in full:
            if t.text == SEPARATOR:
                docs.append([])
            elif docs:
                docs[-1].append(t.text)
            else:
                return None
        return docs if len(docs) == len(texts) else None

    def full(self, text: str) -> list[str]:
        """The tokens LanceDB indexes and searches for ``text`` (and learn its words)."""
        found = self._tokens([text])
        if found is None:
            return [t.text for t in self._call(text, full=True)]
        return found[0]

    def query(self, text: str) -> list[str]:
        """The tokens of a query: from the word table when every word is known."""
        raw = self._call(text, full=False)
        table = self._final
        out = []
        for t in raw:
            final = table.get(t.text, _UNKNOWN)
            if final is _UNKNOWN:
                return self.full(text)
            if final is not None:
                out.append(final)
        return out

    def documents(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens of many documents, from one tokenizer call per few thousand."""
        out: list[list[str]] = []
        step = 2000
        for i in range(0, len(texts), step):
            chunk = texts[i : i + step]
            docs = self._tokens(chunk)
            if docs is None:  # a document holds the separator: one at a time
                docs = [self.full(text) for text in chunk]
            out.extend(docs)
        return out


def native_tokenize() -> Any:
    """``tokenize`` of lancedb's native extension. When lancedb itself is not imported yet,
    the extension is loaded alone, under its own name (``import lancedb`` later finds it
    there): a cold command that answers from the snapshot on disk skips the 0.5 s that the
    lancedb package costs to import."""
    import sys

    native = sys.modules.get("lancedb._lancedb")
    if native is None:
        import importlib.machinery
        import importlib.util

        spec = importlib.util.find_spec("lancedb")
        folders = list(spec.submodule_search_locations or []) if spec else []
        found = [
            Path(folder) / f"_lancedb{suffix}"
            for folder in folders
            for suffix in importlib.machinery.EXTENSION_SUFFIXES
            if (Path(folder) / f"_lancedb{suffix}").is_file()
        ]
        if not found:  # not a layout we know: the package's own import
            from lancedb import tokenize

            return tokenize
        ext = importlib.util.spec_from_file_location("lancedb._lancedb", found[0])
        assert ext is not None and ext.loader is not None
        native = importlib.util.module_from_spec(ext)
        sys.modules["lancedb._lancedb"] = native
        try:
            ext.loader.exec_module(native)
        except BaseException:
            del sys.modules["lancedb._lancedb"]
            raise
    return native.tokenize


_ANALYZERS: dict[str, Analyzer] = {}


def analyzer(base_tokenizer: str = FTS_TOKENIZER) -> Analyzer:
    """The shared analyzer of a tokenizer configuration (its word table lives on)."""
    found = _ANALYZERS.get(base_tokenizer)
    if found is None:
        found = _ANALYZERS.setdefault(base_tokenizer, Analyzer(base_tokenizer))
    return found


def idf(docs_with_token: int, num_docs: int) -> np.float32:
    n, total = np.float32(docs_with_token), np.float32(num_docs)
    return np.float32(np.log(np.float32((total - n + np.float32(0.5)) / (n + np.float32(0.5)) + 1)))


@dataclass
class Postings:
    """The inverted lists of one text column of a snapshot."""

    vocab: dict[str, int]  # token -> term id
    offsets: np.ndarray  # int64, term id -> start in docs/weights (len = terms + 1)
    docs: np.ndarray  # int32 row positions, ascending within a term
    weights: np.ndarray  # float32 (k1 + 1) * tf / (tf + k1 * (1 - b + b * len / avglen))
    num_docs: int  # rows with at least one token

    @classmethod
    def build(cls, column: pa.ChunkedArray, cache: dict[str, str], analyze: Analyzer) -> Postings:
        """Postings of ``column``; ``cache`` maps a text to its tokens (joined by NUL: one
        string a row, not one a token) and is reused by the next version's snapshot, so a
        refresh tokenizes only the rows that changed."""
        texts = column.to_pylist()
        todo = list({t for t in texts if t is not None and t not in cache})
        for text, tokens in zip(todo, analyze.documents(todo), strict=True):
            cache[text] = "\x00".join(tokens)
        flat: list[str] = []
        lengths = np.zeros(len(texts), dtype=np.int64)
        for row, text in enumerate(texts):
            if text is not None and cache[text]:
                tokens = cache[text].split("\x00")
                lengths[row] = len(tokens)
                flat.extend(tokens)
        if not flat:
            empty = np.zeros(0, dtype=np.int32)
            return cls({}, np.zeros(1, np.int64), empty, np.zeros(0, np.float32), 0)
        encoded = pa.array(flat, pa.string()).dictionary_encode()
        vocab = {tok: i for i, tok in enumerate(encoded.dictionary.to_pylist())}
        terms = encoded.indices.to_numpy().astype(np.int64)
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
        keys, tf = np.unique(terms * len(texts) + rows, return_counts=True)
        term_of, docs = np.divmod(keys, len(texts))
        offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_of, minlength=len(vocab)), out=offsets[1:])
        num_docs = int((lengths > 0).sum())
        avg = np.float32(np.float32(lengths.sum()) / np.float32(num_docs))
        length = lengths[docs].astype(np.float32)
        norm = K1 * (np.float32(1.0) - B + B * length / avg)
        freq = tf.astype(np.float32)
        weights = (K1 + np.float32(1.0)) * freq / (freq + norm)
        return cls(vocab, offsets, docs.astype(np.int32), weights.astype(np.float32), num_docs)

    def scores(self, tokens: Sequence[str], rows: int) -> np.ndarray:
        """BM25 of every row for the query ``tokens`` (0 where none matches)."""
        out = np.zeros(rows, dtype=np.float32)
        for tok in tokens:
            term = self.vocab.get(tok)
            if term is None:
                continue
            lo, hi = self.offsets[term], self.offsets[term + 1]
            docs = self.docs[lo:hi]
            out[docs] += idf(int(hi - lo), self.num_docs) * self.weights[lo:hi]
        return out


def top_scored(scores: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    """Row positions of the ``n`` best matching rows within ``mask``: score descending,
    then row order."""
    found = np.flatnonzero(mask & (scores > 0))
    if len(found) > n:
        cut = np.argpartition(-scores[found], n - 1)[:n]
        kth = scores[found[cut]].min()
        found = found[scores[found] >= kth]  # the whole tie band at the cut, in row order
    order = np.argsort(-scores[found], kind="stable")
    return found[order][:n]
