"""Documents and diagrams in memory.

A document is stored in two tracks:

- **chunks**: about 500 tokens each, category ``document``, split at Markdown headings and
  paragraphs, each one prefixed with its heading path so that it is found on its own;
- **summary**: one ``usage_guide`` row that says the document exists, what it covers (its first
  paragraph and heading outline, no LLM needed) and how to read the details.

Every row of one document shares the id prefix ``doc_<hash>_`` where the hash comes from a stable
key (the file path, or the curator's agent and intent). Re-importing replaces the rows: unchanged
chunks are not re-embedded, changed ones are updated, and chunks past the new end are deleted.

Diagrams (category ``topology``) are Mermaid, Graphviz DOT or SVG; :func:`detect_diagram_format`
tells them apart.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError
from olav.memory.schema import MemoryRecord
from olav.memory.tokens import CJK, char_counts, estimate_tokens, tokens_from_counts

CHUNK_TOKENS = 500
DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
DIAGRAM_SUFFIXES = (".mmd", ".mermaid", ".dot", ".gv", ".svg")
MAX_FILE_BYTES = 5 * 1024 * 1024
DOCUMENT_CONFIDENCE = 0.9

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_BREAKS = (
    re.compile(r"(\n)"),
    re.compile(r"((?<=[.!?;:])\s+|(?<=[。！？；：]))"),
    re.compile(r"((?<=[,，、])\s*)"),
    re.compile(r"(\s+)"),
)


# -- chunking --------------------------------------------------------------------------------


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


def _split_long(text: str, max_tokens: int, level: int = 0) -> list[str]:
    """Split one oversized block at lines, then sentences, clauses, words, then by characters.
    The pieces keep the original text (no separator is added or lost inside a piece)."""
    if estimate_tokens(text) <= max_tokens:
        return [text.strip()] if text.strip() else []
    if level >= len(_BREAKS):
        return _hard_split(text, max_tokens)
    segs = _segments(text, _BREAKS[level])
    if len(segs) < 2:
        return _split_long(text, max_tokens, level + 1)
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
    return [piece for p in packed for piece in _split_long(p, max_tokens, level + 1)]


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
        for piece in _split_long(block.text, max_tokens - reserve):
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


# -- diagrams --------------------------------------------------------------------------------

_MERMAID_START = re.compile(
    r"^(graph|flowchart)(\s+(TD|TB|BT|RL|LR)\b.*|\s*;.*|\s*)$"
    r"|^pie(\s+showData)?(\s+title\s.*)?\s*$"
    r"|^(sequenceDiagram|classDiagram(-v2)?|stateDiagram(-v2)?|erDiagram|journey|gantt|gitGraph"
    r"|mindmap|timeline|quadrantChart|requirementDiagram|C4Context|C4Container|C4Component"
    r"|C4Deployment|block-beta|architecture-beta|packet-beta|sankey-beta|xychart-beta)\s*$"
)
_DOT_START = re.compile(r'^(strict\s+)?(di)?graph(\s+("[^"]*"|[\w.]+))?\s*\{', re.I)
_EMBEDDED_FENCE = re.compile(r"^\s*```\s*(mermaid|dot|graphviz|gv|svg)\s*$", re.M | re.I)
_FENCE_LANG = re.compile(r"^\s*```\s*([\w-]*)\s*\n(.*?)\n\s*```\s*$", re.S)


def _strip_fence(text: str) -> tuple[str, str]:
    m = _FENCE_LANG.match(text.strip())
    return (m.group(1).lower(), m.group(2)) if m else ("", text)


def detect_diagram_format(text: str) -> str | None:
    """``mermaid``, ``dot``, ``svg`` or None. A Markdown code fence around the source is fine."""
    lang, body = _strip_fence(text)
    if lang == "mermaid":
        return "mermaid"
    if lang in ("dot", "graphviz", "gv"):
        return "dot"
    if lang == "svg":
        return "svg"
    src = body.strip()
    head = re.sub(r"<\?xml.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>", "", src[:4000], flags=re.S | re.I)
    if head.lstrip().lower().startswith("<svg"):
        return "svg"
    lines = [
        ln.strip()
        for ln in src.splitlines()
        if ln.strip() and not ln.strip().startswith(("%%", "//", "#", "/*"))
    ]
    if not lines:
        return None
    if lines[0].startswith("---"):  # Mermaid front matter (title: ...)
        closing = next((i for i, ln in enumerate(lines[1:], 1) if ln.startswith("---")), None)
        lines = lines[closing + 1 :] if closing is not None else lines
        if not lines:
            return None
    if _DOT_START.match(" ".join(lines[:3])):
        return "dot"
    if _MERMAID_START.match(lines[0]):
        return "mermaid"
    embedded = _EMBEDDED_FENCE.search(src)  # Markdown prose around one diagram block
    if embedded:
        lang = embedded.group(1).lower()
        return {"graphviz": "dot", "gv": "dot"}.get(lang, lang)
    return None


def diagram_labels(text: str, fmt: str, *, limit: int = 60) -> list[str]:
    """Human-readable names in a diagram (node labels, SVG text), for the embedded text."""
    if fmt == "svg":
        found = re.findall(r"<(?:title|text|tspan|desc)[^>]*>([^<]+)<", text)
    elif fmt == "dot":
        found = re.findall(r'label\s*=\s*"([^"]+)"', text)
        found += re.findall(r"^\s*\"?([\w.-]+)\"?\s*(?:->|--)", text, re.M)
    else:
        found = [a or b for a, b in re.findall(r'\["?([^"\]]+)"?\]|\("?([^")]+)"?\)', text)]
        found += re.findall(r"subgraph\s+([\w-]+)", text)
    out: list[str] = []
    for item in found:
        label = " ".join(re.sub(r"<[^>]+>", " ", str(item)).split())
        if label and label not in out:
            out.append(label)
    return out[:limit]


# -- files -----------------------------------------------------------------------------------


def read_text_file(path: Path, suffixes: Sequence[str]) -> str:
    """Read a UTF-8 document or diagram file, with a fix hint for every way it can fail."""
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Pass the path of a file")
    if path.suffix.lower() not in suffixes:
        raise OlavError(
            f"{path.name}: unsupported file type {path.suffix or '(none)'}",
            hint="Supported here: " + ", ".join(suffixes),
        )
    if path.stat().st_size > MAX_FILE_BYTES:
        raise OlavError(
            f"{path} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB",
            hint="Split it into smaller documents",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise OlavError(f"{path} is not UTF-8 text", hint="Convert it to UTF-8") from None
    if not text.strip():
        raise OlavError(f"{path} is empty", hint="Pass a file with content")
    return text


def slug(text: str, *, fallback: str = "document") -> str:
    clean = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")[:48]
    return clean or fallback


def document_key_for_file(path: Path, base: Path) -> str:
    """Stable key of a file: its path relative to the workspace, or its absolute path."""
    resolved = path.resolve()
    try:
        return "file:" + resolved.relative_to(base.resolve()).as_posix()
    except ValueError:
        return "file:" + resolved.as_posix()


def doc_id(key: str) -> str:
    return "doc_" + hashlib.sha256(key.encode()).hexdigest()[:12]


# -- writing ---------------------------------------------------------------------------------


@dataclass
class DocumentImport:
    doc_id: str
    title: str
    summary_id: str
    chunk_ids: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "title": self.title,
            "summary_id": self.summary_id,
            "chunks": len(self.chunk_ids),
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
        }


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def document_records(
    text: str,
    *,
    key: str,
    title: str,
    intent: str,
    agent: str = "core",
    scope: str = "global",
    keywords: Sequence[str] = (),
    source: str | None = None,
    chunks: Sequence[str] | None = None,
    origin: str = "document",
    max_tokens: int = CHUNK_TOKENS,
) -> tuple[list[MemoryRecord], MemoryRecord]:
    """The chunk rows and the summary guide row of one document (not written yet).

    ``chunks`` are caller-provided pieces (a curator draft); any piece over the budget is split
    further. Without them the text is chunked at headings and paragraphs.
    """
    base = doc_id(key)
    if chunks:
        pieces = [
            Chunk(0, p, "") for c in chunks if c.strip() for p in _split_long(c.strip(), max_tokens)
        ]
        parts = [Chunk(i, c.text, c.section) for i, c in enumerate(pieces)]
    else:
        parts = chunk_text(text, max_tokens=max_tokens)
    if not parts:
        raise OlavError(f"document {title!r} has no text to store", hint="Pass a non-empty file")
    words = [k for k in keywords if k.strip()]
    tags = [*words[:6], "document"]
    records = []
    for c in parts:
        label = " › ".join(x for x in (title, c.section) if x)
        records.append(
            MemoryRecord(
                id=f"{base}_{c.index:04d}",
                text=f"{label}\n{c.text}",
                category="document",
                scope=scope,
                origin=origin,
                confidence=DOCUMENT_CONFIDENCE,
                tags=tags,
                metadata={
                    "doc_id": base,
                    "intent": f"{intent} #{c.index + 1}/{len(parts)}",
                    "title": title,
                    "section": c.section,
                    "chunk": c.index,
                    "chunks": len(parts),
                    "source": source or key,
                    "body": f"{label}\n{c.text}",
                    "hash": _hash(label, c.text, scope),
                },
            )
        )
    body = summarise(
        title, text or "\n\n".join(c.text for c in parts), n_chunks=len(parts), source=source
    )
    summary_words = [*words] or [intent.replace("_", " "), title]
    summary = MemoryRecord(
        id=f"{base}_summary",
        text=f"{intent.replace('_', ' ')} ({intent})\n{', '.join(summary_words)}\n\n{body}",
        category="usage_guide",
        scope=scope,
        origin=origin,
        confidence=DOCUMENT_CONFIDENCE,
        tags=[agent, *summary_words[:6]],
        metadata={
            "doc_id": base,
            "intent": intent,
            "agent": agent,
            "title": title,
            "keywords": summary_words,
            "source": source or key,
            "chunks": len(parts),
            "body": body,
            "track": "summary",
            "hash": _hash(body, ",".join(summary_words), scope, agent),
        },
    )
    return records, summary


def write_document(
    store: Any,
    records: list[MemoryRecord],
    summary: MemoryRecord,
    *,
    progress: Callable[[int], None] | None = None,
    batch: int = 16,
) -> DocumentImport:
    """Upsert the rows of one document and delete its chunks that no longer exist.

    Rows whose content hash is unchanged are skipped (no re-embedding). ``progress(n)`` is called
    as rows are written, ``len(records) + 1`` in total.
    """
    from olav.memory.store import sql_str

    base = str(summary.metadata["doc_id"])
    prefix = base + "_"
    existing = {
        r.id: r
        for r in store.list_rows(where=f"id LIKE {sql_str(prefix + '%')}")
        if r.id.startswith(prefix)
    }
    result = DocumentImport(
        doc_id=base,
        title=str(summary.metadata.get("title", "")),
        summary_id=summary.id,
        chunk_ids=[r.id for r in records],
    )
    todo: list[MemoryRecord] = []
    for rec in [summary, *records]:
        old = existing.get(rec.id)
        if old is not None and old.metadata.get("hash") == rec.metadata.get("hash"):
            result.unchanged.append(rec.id)
        else:
            todo.append(rec)
            (result.updated if old is not None else result.added).append(rec.id)
    skipped = len(records) + 1 - len(todo)
    if progress and skipped:
        progress(skipped)
    for i in range(0, len(todo), batch):
        part = todo[i : i + batch]
        store.upsert(part)
        if progress:
            progress(len(part))
    keep = {summary.id, *result.chunk_ids}
    stale = sorted(set(existing) - keep)
    if stale:
        store.delete(ids=stale)
        result.removed = stale
    if todo or stale:
        store.maintain(force_optimize=True)  # fold the new rows into the full-text index now
    return result


def import_document_file(
    store: Any,
    path: Path,
    *,
    base: Path,
    agent: str = "core",
    scope: str | None = None,
    keywords: Sequence[str] = (),
    progress_total: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> DocumentImport:
    """Import a ``.md`` or ``.txt`` file: chunks plus a summary guide, replacing an earlier
    import of the same path. ``progress_total(n)`` announces how many rows will be written."""
    text = read_text_file(path, DOCUMENT_SUFFIXES)
    key = document_key_for_file(path, base)
    source = key.removeprefix("file:")
    title = document_title(text, path.stem)
    intent = "doc_" + slug(path.stem)
    words = list(keywords) or [title, path.stem.replace("_", " ").replace("-", " ")]
    records, summary = document_records(
        text,
        key=key,
        title=title,
        intent=intent,
        agent=agent,
        scope=scope or ("global" if agent == "core" else agent),
        keywords=words,
        source=source,
    )
    if progress_total:
        progress_total(len(records) + 1)
    return write_document(store, records, summary, progress=progress)
