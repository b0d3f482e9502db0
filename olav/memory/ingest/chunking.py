"""Splitting a Markdown or plain-text document into chunks of about ``CHUNK_TOKENS`` tokens
at headings, paragraphs and sentences (each chunk knows its heading path), and the summary of a
document that needs no model: its first paragraph and its heading outline."""

from __future__ import annotations

import re
from dataclasses import dataclass

from olav.memory.store.token_counts import CJK, char_counts, estimate_tokens, tokens_from_counts

CHUNK_TOKENS = 500
# The shortest title that leaves only blanks and #s after it. It never ends inside a run of
# #s or of blanks (the run's start would have done), so those offsets are skipped at once
# instead of each reading the rest of the run: a line of many #s cost its square.
_HEADING = re.compile(
    r"^(#{1,6})\s++(.(?=\s*+#*+\s*+$)|.+?(?:(?<!#)|(?!#))(?:(?<!\s)|(?!\s)))\s*+#*+\s*+$"
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_BREAKS = (
    re.compile(r"(\n)"),
    re.compile(r"((?<=[.!?;:])\s+|(?<=[。！？；：]))"),
    re.compile(r"((?<=[,，、])\s*)"),
    re.compile(r"(\s+)"),
)


@dataclass
class Chunk:
    index: int
    text: str
    section: str = ""

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


@dataclass
class _Block:
    text: str
    path: tuple[str, ...]
    heading: bool = False


def _blocks(text: str) -> list[_Block]:
    """Paragraphs, fenced code blocks and headings, each with its heading path."""
    blocks: list[_Block] = []
    path: list[tuple[int, str]] = []
    para: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if para and "".join(para).strip():
            blocks.append(_Block("\n".join(para).strip("\n"), tuple(t for _, t in path)))
        para.clear()

    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            para.append(line)
            if m and m.group(1) == fence:
                fence = None
                flush()
            continue
        if m:
            flush()
            fence = m.group(1)
            para.append(line)
            continue
        h = _HEADING.match(line)
        if h:
            flush()
            level = len(h.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, h.group(2).strip()))
            blocks.append(_Block(line.strip(), tuple(t for _, t in path), heading=True))
            continue
        if not line.strip():
            flush()
            continue
        para.append(line)
    flush()
    return blocks


def _segments(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Split at ``pattern`` (one capture group) and keep each separator with its segment."""
    parts = pattern.split(text)
    segs = []
    for i in range(0, len(parts), 2):
        seg = parts[i] + (parts[i + 1] if i + 1 < len(parts) else "")
        if seg:
            segs.append(seg)
    return segs


def _hard_split(text: str, max_tokens: int) -> list[str]:
    """Cut text without any break so that every piece stays within the budget."""
    pieces: list[str] = []
    start = cjk = other = 0
    for i, ch in enumerate(text):
        is_cjk = bool(CJK.match(ch))
        c2, o2 = cjk + is_cjk, other + (not is_cjk)
        if i > start and tokens_from_counts(c2, o2) > max_tokens:
            pieces.append(text[start:i])
            start, c2, o2 = i, int(is_cjk), int(not is_cjk)
        cjk, other = c2, o2
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]


def split_long(text: str, max_tokens: int, level: int = 0) -> list[str]:
    """Split one oversized block at lines, then sentences, clauses, words, then by characters.
    The pieces keep the original text (no separator is added or lost inside a piece)."""
    if estimate_tokens(text) <= max_tokens:
        return [text.strip()] if text.strip() else []
    if level >= len(_BREAKS):
        return _hard_split(text, max_tokens)
    segs = _segments(text, _BREAKS[level])
    if len(segs) < 2:
        return split_long(text, max_tokens, level + 1)
    packed: list[str] = []
    cur: list[str] = []
    cjk = other = 0
    for seg in segs:
        c, o = char_counts(seg)
        if cur and tokens_from_counts(cjk + c, other + o) > max_tokens:
            packed.append("".join(cur))
            cur, cjk, other = [], 0, 0
        cur.append(seg)
        cjk, other = cjk + c, other + o
    if cur:
        packed.append("".join(cur))
    return [piece for p in packed for piece in split_long(p, max_tokens, level + 1)]


def chunk_text(text: str, *, max_tokens: int = CHUNK_TOKENS) -> list[Chunk]:
    """Split a Markdown or plain-text document into chunks of about ``max_tokens``.

    Chunks break at headings when the running chunk is already a useful size (a quarter of the
    budget), otherwise small sections are packed together. A heading always travels with the
    text that follows it. Each chunk records the heading path of its first block as ``section``.
    """
    chunks: list[Chunk] = []
    cur: list[_Block] = []
    size = [0, 0]  # CJK and other characters in cur, separators included

    def emit() -> None:
        held: list[_Block] = []
        while cur and cur[-1].heading:  # never end a chunk on a heading
            held.insert(0, cur.pop())
        body = "\n\n".join(b.text for b in cur).strip()
        if body:
            chunks.append(Chunk(len(chunks), body, " › ".join(cur[0].path)))
        cur[:] = held
        size[0] = sum(char_counts(b.text)[0] for b in held)
        size[1] = sum(char_counts(b.text)[1] + 2 for b in held)

    reserve = min(48, max_tokens // 8)  # room for headings carried into the next chunk
    for block in _blocks(text):
        if block.heading and cur and tokens_from_counts(*size) >= max_tokens // 4:
            emit()
        for piece in split_long(block.text, max_tokens - reserve):
            cjk, other = char_counts(piece)
            if cur and tokens_from_counts(size[0] + cjk, size[1] + other + 2) > max_tokens:
                emit()
            cur.append(_Block(piece, block.path, block.heading))
            size[0] += cjk
            size[1] += other + 2
    while cur:
        before = len(cur)
        emit()
        if len(cur) == before:  # only headings are left: they form the last chunk
            body = "\n\n".join(b.text for b in cur).strip()
            chunks.append(Chunk(len(chunks), body, " › ".join(cur[0].path)))
            break
    return chunks


def outline(text: str, *, limit: int = 12) -> list[str]:
    """The Markdown headings, indented by level (at most ``limit``)."""
    out = []
    for block in _blocks(text):
        if block.heading:
            m = _HEADING.match(block.text)
            if m:
                out.append("  " * (len(m.group(1)) - 1) + m.group(2).strip())
    return out[:limit]


def first_paragraph(text: str, *, max_chars: int = 400) -> str:
    """The first paragraph that is not a heading or code block, shortened to ``max_chars``."""
    for block in _blocks(text):
        if block.heading or _FENCE.match(block.text):
            continue
        para = " ".join(block.text.split())
        return para if len(para) <= max_chars else para[: max_chars - 1].rstrip() + "…"
    return ""


def document_title(text: str, fallback: str) -> str:
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            return m.group(2).strip()
    return fallback


def summarise(title: str, text: str, *, n_chunks: int, source: str | None = None) -> str:
    """The body of the summary guide: what the document is, what it covers, how to read it."""
    where = f" ({source})" if source else ""
    lines = [f'Document "{title}"{where} is stored in memory as {n_chunks} chunk(s).']
    intro = first_paragraph(text)
    if intro:
        lines.append(f"It covers: {intro}")
    heads = outline(text)
    if heads:
        lines.append("Outline:")
        lines.extend(" " * (len(h) - len(h.lstrip())) + "- " + h.strip() for h in heads)
    lines.append(
        f'For details call recall_memory(query="<your question> {title}", category="document").'
    )
    return "\n".join(lines)
