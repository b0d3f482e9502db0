"""Turn 1: ``propose_draft`` writes a draft and returns the preview a person confirms.
Nothing reaches memory here."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from olav.core.errors import OlavError
from olav.learning.curator.common import (
    CATEGORIES,
    CONFIRM_PROMPT,
    DRAFT_VERSION,
    DRAFTS,
    GUIDE_CATEGORIES,
    Draft,
    clip,
    now,
    sanitise_agent,
    sanitise_intent,
    write_json,
)
from olav.memory.store.roles import Author

_SCOPE = re.compile(r"^(global|team:[\w.-]+|[a-z0-9][a-z0-9_-]*)$")
_PATHLIKE = re.compile(r"^[^\n]{1,400}\.(md|markdown|txt|mmd|mermaid|dot|gv|svg)$", re.I)


def _keywords(words: Sequence[str], intent: str) -> list[str]:
    out: list[str] = []
    for w in words:
        w = " ".join(str(w).split()).strip("\"'`“”‘’")
        if w and w not in out:
            out.append(w)
    return out[:24] or [intent.replace("_", " ")]


class _PreviewDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, so the preview reads like the text it holds."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_PreviewDumper.add_representer(str, _str_block)


def _resolve_file(root: Path, body: str, category: str) -> Path | None:
    """A document/topology body that is just a file path: the file to read, if it exists."""
    from olav.memory.ingest.diagrams import DIAGRAM_SUFFIXES
    from olav.memory.ingest.documents import DOCUMENT_SUFFIXES

    text = body.strip()
    if category not in ("document", "topology") or not _PATHLIKE.match(text):
        return None
    path = Path(text).expanduser()
    path = path if path.is_absolute() else root / path
    allowed = DOCUMENT_SUFFIXES if category == "document" else (*DIAGRAM_SUFFIXES, ".md", ".txt")
    if path.suffix.lower() not in allowed:
        return None
    if not path.is_file():
        if re.search(r"\s", text):
            return None  # a sentence that happens to end in ".md": keep it as the text
        raise OlavError(
            f"{text} does not exist",
            hint="Give a path relative to the workspace or an absolute path, or paste the text",
        )
    return path


def _check_agent(root: Path, agent: str) -> None:
    if (root / agent / "SKILL.md").is_file():
        return
    known = sorted(p.name for p in root.iterdir() if (p / "SKILL.md").is_file())
    raise OlavError(
        f"there is no agent {agent!r} in this workspace",
        hint="Use one of: " + (", ".join(known) or "core"),
    )


def prepare(root: Path, draft: dict[str, Any]) -> dict[str, Any]:
    """Details computed from a draft: the preview fields, and what commit will write."""
    from olav.memory.ingest.chunking import document_title
    from olav.memory.ingest.diagrams import detect_diagram_format
    from olav.memory.ingest.documents import DocumentSpec, document_key_for_file, document_records

    cat = draft["category"]
    info: dict[str, Any] = {}
    if draft.get("amends"):  # new keywords for a guide that exists (curator.amend)
        info["file"] = info["replaces"] = draft["amends"]["file"]
    elif cat in GUIDE_CATEGORIES:
        gpath = Path(draft["agent"]) / "guides" / f"{draft['intent']}.guide.yaml"
        info["file"] = gpath.as_posix()
        if (root / gpath).exists():
            info["replaces"] = gpath.as_posix()
    elif cat == "document":
        source = draft.get("source")
        key = (
            document_key_for_file(root / source, root)
            if source
            else f"curator:{draft['agent']}/{draft['intent']}"
        )
        title = document_title(draft["body"], draft["intent"].replace("_", " "))
        spec = DocumentSpec(
            draft["body"],
            key=key,
            title=title,
            intent=draft["intent"],
            agent=draft["agent"],
            scope=draft["scope"],
            keywords=draft["keywords"],
            source=source,
            chunks=draft.get("chunks") or None,
            origin="document",
        )
        records, summary = document_records(spec)
        info.update(title=title, records=records, summary=summary)
    elif cat == "topology":
        fmt = detect_diagram_format(draft["body"])
        if fmt is None:
            raise OlavError(
                "could not tell the topology's format",
                hint="Give it as Mermaid (graph TD ...), Graphviz DOT (digraph G { ... }) or "
                "SVG (<svg ...>), or store a prose description as category fact",
            )
        info["format"] = fmt
    return info


def preview(draft: dict[str, Any], info: dict[str, Any]) -> str:
    cat = draft["category"]
    if draft.get("amends"):
        from olav.learning.curator.amend import amendment_preview

        return _dump(amendment_preview(draft))
    shown: dict[str, Any] = {
        "intent": draft["intent"],
        "category": cat,
        "agent": draft["agent"],
        "scope": draft["scope"],
        "keywords": draft["keywords"],
    }
    if draft.get("operator"):
        shown["operator"] = draft["operator"]
    if draft.get("source"):
        shown["source"] = draft["source"]
    if cat in GUIDE_CATEGORIES:
        shown["file"] = info["file"]
        if info.get("replaces"):
            shown["replaces"] = f"the existing {info['replaces']}"
        shown["body"] = clip(draft["body"])
    elif cat == "document":
        shown["title"] = info["title"]
        shown["chunks"] = f"{len(info['records'])} (about 500 tokens each, category document)"
        shown["summary_guide"] = info["summary"].metadata["body"]
    elif cat == "topology":
        shown["format"] = info["format"]
        shown["body"] = clip(draft["body"])
    else:
        shown["body"] = clip(draft["body"])
    return _dump(shown)


def _dump(shown: dict[str, Any]) -> str:
    return yaml.dump(
        {k: _tidy(v) for k, v in shown.items()},
        Dumper=_PreviewDumper,
        allow_unicode=True,
        sort_keys=False,
        width=100,
    )


def _tidy(value: Any) -> Any:
    """Trailing spaces force PyYAML out of block style; drop them for the preview."""
    if isinstance(value, str) and "\n" in value:
        return "\n".join(ln.rstrip() for ln in value.strip("\n").splitlines())
    return value


def _check_request(
    category: str,
    body: str,
    chunks: Sequence[str] | None,
    scope: str | None,
    agent: str,
    operator: str | None = None,
) -> str:
    """Refuse a draft that could never be committed; returns its scope. A ``user:`` scope is
    only the draft's own operator's (``user:<operator>``)."""
    if category not in CATEGORIES:
        raise OlavError(
            f"unknown category {category!r} for a memory draft",
            hint="Use one of: " + ", ".join(CATEGORIES),
        )
    if not body.strip():
        raise OlavError("the draft has an empty body", hint="Say what should be remembered")
    if chunks and category != "document":
        raise OlavError("chunks only apply to category document", hint="Leave chunks empty")
    resolved = (scope or "").strip() or ("global" if agent == "core" else agent)
    if operator and resolved == f"user:{operator}":
        return resolved
    if not _SCOPE.match(resolved):
        raise OlavError(
            f"scope {resolved!r} is not valid", hint="Use global, an agent name, or team:<id>"
        )
    return resolved


def _body_and_source(root: Path, body: str, category: str) -> tuple[str, str | None]:
    """The text to store and, when the body names a file, that file relative to the root."""
    path = _resolve_file(root, body, category)
    if path is None:
        return body.strip(), None
    from olav.memory.ingest.diagrams import DIAGRAM_SUFFIXES
    from olav.memory.ingest.documents import DOCUMENT_SUFFIXES, read_text_file

    text = read_text_file(path, (*DOCUMENT_SUFFIXES, *DIAGRAM_SUFFIXES)).strip()
    try:
        return text, path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return text, str(path.resolve())


@dataclass(frozen=True)
class DraftRequest:
    """What a draft should store: its name, the words that recall it, its text, and where it
    belongs. ``chunks`` (documents only) are the author's own splits of the body.

    ``operator``: the remote operator who asked for it (``olav serve``'s store API), recorded
    in the draft; their private ``user:<operator>`` scope is then a valid scope, and the body
    is always the text itself, never a file of the server's to read."""

    intent: str
    keywords: Sequence[str]
    body: str
    category: str
    agent: str = "core"
    scope: str | None = None
    chunks: Sequence[str] | None = None
    operator: str | None = None


def propose_draft(
    root: Path, req: DraftRequest, *, run_id: str | None = None, author: Author | None = None
) -> str:
    """Turn 1: write the draft ``req`` asks for (``run_id``: the run that proposed it) and
    return the preview to quote. Stores nothing in memory. ``author``: who proposes it, with
    their role (olav.memory.store.roles): an operator's draft goes to, and may name, only
    their own ``user:`` scope, and is never a guide; None is the workspace's owner."""
    name = sanitise_intent(req.intent)
    agent_name = sanitise_agent(req.agent)
    if author is not None:
        req = dataclasses.replace(
            req,
            scope=author.default_scope(req.scope, agent_name),
            operator=req.operator or (None if author.shares else author.name),
        )
    resolved_scope = _check_request(
        req.category, req.body, req.chunks, req.scope, agent_name, req.operator
    )
    if author is not None:
        author.check(resolved_scope, req.category, f"a draft in {resolved_scope}")
    _check_agent(root, agent_name)
    if req.operator:  # a remote client's text: never a path to a file of the server's
        text, source = req.body.strip(), None
    else:
        text, source = _body_and_source(root, req.body, req.category)
    draft: dict[str, Any] = {
        "version": DRAFT_VERSION,
        "intent": name,
        "category": req.category,
        "agent": agent_name,
        "scope": resolved_scope,
        "keywords": _keywords(req.keywords, name),
        "body": text,
        "chunks": [c for c in req.chunks or [] if c.strip()] or None,
        "source": source,
        "run_id": run_id,
        "created_at": now().isoformat(),
    }
    if req.operator:
        draft["operator"] = req.operator
    if author is not None:  # whose draft it is: only they see it (Author.sees_draft)
        draft["author"], draft["role"] = author.name, author.role
    info = prepare(root, draft)  # validates before anything is written
    if "format" in info:
        draft["format"] = info["format"]
    folder = root / DRAFTS
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.draft.json"
    write_json(target, draft)
    return (
        f"Draft saved to {DRAFTS}/{target.name}; NOTHING is stored in memory yet. "
        "Quote this preview to the user and wait for their reply:\n\n"
        f"{preview(draft, info)}\n{CONFIRM_PROMPT}"
    )


def draft_preview(root: Path, draft: Draft) -> str:
    """What committing ``draft`` would store, as the YAML preview the proposal showed."""
    return preview(draft.data, prepare(root, draft.data))
