"""The two-turn, human-confirmed path from "remember that ..." to memory.

Turn 1 (:func:`propose_draft`) only writes ``.curator_drafts/<intent>.draft.json`` and returns a
preview for the agent to quote, ending with :data:`CONFIRM_PROMPT`. Nothing reaches memory.

Turn 2 (:func:`commit_draft`) commits the latest (or named) draft, by category:

- ``usage_guide`` / ``format_guide``: ``<agent>/guides/<intent>.guide.yaml``, primed into memory;
- ``fact`` / ``preference`` / ``decision`` / ``expert_knowledge``: one row, origin user,
  confidence 1.0;
- ``document``: ~500-token chunks (category document) plus a summary usage_guide
  (see :mod:`olav.memory.documents`);
- ``topology``: one row whose metadata names the format (mermaid, dot or svg), detected from
  the source.

Every commit appends an audit ``memory_events`` row and archives the draft under
``.curator_drafts/committed/<intent>_<ts>.json``; a rejected draft goes to
``.curator_drafts/rejected/``.

Human confirmation cannot be bypassed:

- :func:`commit_draft` needs ``confirmed_by``: ``"chat"`` (the person said yes at the chat's
  approval prompt, which showed this draft's preview), ``"cli"``
  (``olav kb drafts confirm <intent>``) or ``"mcp"`` (the person said yes in an MCP client's
  elicitation dialog that showed the preview, see :mod:`olav.mcp`). Nothing else commits;
- without a draft, a commit fails with "no draft found";
- in the chat, a draft cannot be committed in the run (user turn) that proposed it. The draft
  records the proposing run's id; a commit passing the same ``run_id`` is refused. When either
  id is unknown, the audit log decides: the draft must be older than the start of the current
  run (the given one, or else the newest running run), i.e. the user has replied since the
  preview.

Drafts never expire: one waits until a person confirms or rejects it. ``seen_at`` records when
a person was first shown it (``olav kb drafts show`` or the chat's approval prompt).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text
from olav.memory.schema import MemoryRecord

DRAFTS = ".curator_drafts"
DRAFT_VERSION = 1
CONFIRM_PROMPT = "Confirm? (yes / ok / 可以 / 确认 / 入库)"
NOT_CONFIRMED = "the user has not confirmed yet: show the preview and wait for their reply"
# who may confirm a commit: the chat's approval prompt, `olav kb drafts confirm`, or the
# person's yes in an MCP client's elicitation dialog (olav mcp)
CONFIRMERS = ("chat", "cli", "mcp")
ACTOR = "memory_curator"

GUIDE_CATEGORIES = ("usage_guide", "format_guide")
ROW_CATEGORIES = ("fact", "preference", "decision", "expert_knowledge")
CATEGORIES = (*GUIDE_CATEGORIES, *ROW_CATEGORIES, "document", "topology")
PREVIEW_CHARS = 1500
_SCOPE = re.compile(r"^(global|team:[\w.-]+|[a-z0-9][a-z0-9_-]*)$")
_PATHLIKE = re.compile(r"^[^\n]{1,400}\.(md|markdown|txt|mmd|mermaid|dot|gv|svg)$", re.I)


def sanitise_intent(intent: str) -> str:
    """A safe snake_case file stem: ``../../x`` becomes ``x``; nothing can leave the folder."""
    clean = re.sub(r"[^a-z0-9_]+", "_", intent.lower()).strip("_")[:64].strip("_")
    if not clean:
        raise OlavError(
            f"intent {intent!r} has no usable characters",
            hint="Use a snake_case name such as r1_loopback",
        )
    return clean


def sanitise_agent(agent: str) -> str:
    clean = re.sub(r"[^a-z0-9_-]+", "_", agent.strip().lower()).strip("_-")[:64]
    if not clean:
        raise OlavError(
            f"agent {agent!r} is not a name", hint="Use an agent folder name, e.g. core"
        )
    return clean


def _keywords(words: list[str], intent: str) -> list[str]:
    out: list[str] = []
    for w in words:
        w = " ".join(str(w).split()).strip("\"'`“”‘’")
        if w and w not in out:
            out.append(w)
    return out[:24] or [intent.replace("_", " ")]


def _clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n… ({len(text) - limit} more characters)"


class _PreviewDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, so the preview reads like the text it holds."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_PreviewDumper.add_representer(str, _str_block)


def _now() -> datetime:
    return datetime.now(UTC)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1))


# -- turn 1 ----------------------------------------------------------------------------------


def _resolve_file(root: Path, body: str, category: str) -> Path | None:
    """A document/topology body that is just a file path: the file to read, if it exists."""
    from olav.memory.documents import DIAGRAM_SUFFIXES, DOCUMENT_SUFFIXES

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


def _prepare(root: Path, draft: dict[str, Any]) -> dict[str, Any]:
    """Details computed from a draft: the preview fields, and what commit will write."""
    from olav.memory.documents import (
        detect_diagram_format,
        document_key_for_file,
        document_records,
        document_title,
    )

    cat = draft["category"]
    info: dict[str, Any] = {}
    if cat in GUIDE_CATEGORIES:
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
        records, summary = document_records(
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


def _preview(draft: dict[str, Any], info: dict[str, Any]) -> str:
    cat = draft["category"]
    shown: dict[str, Any] = {
        "intent": draft["intent"],
        "category": cat,
        "agent": draft["agent"],
        "scope": draft["scope"],
        "keywords": draft["keywords"],
    }
    if draft.get("source"):
        shown["source"] = draft["source"]
    if cat in GUIDE_CATEGORIES:
        shown["file"] = info["file"]
        if info.get("replaces"):
            shown["replaces"] = f"the existing {info['replaces']}"
        shown["body"] = _clip(draft["body"])
    elif cat == "document":
        shown["title"] = info["title"]
        shown["chunks"] = f"{len(info['records'])} (about 500 tokens each, category document)"
        shown["summary_guide"] = info["summary"].metadata["body"]
    elif cat == "topology":
        shown["format"] = info["format"]
        shown["body"] = _clip(draft["body"])
    else:
        shown["body"] = _clip(draft["body"])
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


def propose_draft(
    root: Path,
    *,
    intent: str,
    keywords: list[str],
    body: str,
    category: str,
    agent: str = "core",
    scope: str | None = None,
    chunks: list[str] | None = None,
    run_id: str | None = None,
) -> str:
    """Turn 1: write the draft and return the preview to quote. Stores nothing in memory."""
    name = sanitise_intent(intent)
    agent_name = sanitise_agent(agent)
    if category not in CATEGORIES:
        raise OlavError(
            f"unknown category {category!r} for a memory draft",
            hint="Use one of: " + ", ".join(CATEGORIES),
        )
    if not body.strip():
        raise OlavError("the draft has an empty body", hint="Say what should be remembered")
    if chunks and category != "document":
        raise OlavError("chunks only apply to category document", hint="Leave chunks empty")
    resolved_scope = (scope or "").strip() or ("global" if agent_name == "core" else agent_name)
    if not _SCOPE.match(resolved_scope):
        raise OlavError(
            f"scope {resolved_scope!r} is not valid",
            hint="Use global, an agent name, or team:<id>",
        )
    _check_agent(root, agent_name)
    source: str | None = None
    text = body.strip()
    path = _resolve_file(root, body, category)
    if path is not None:
        from olav.memory.documents import DIAGRAM_SUFFIXES, DOCUMENT_SUFFIXES, read_text_file

        text = read_text_file(path, (*DOCUMENT_SUFFIXES, *DIAGRAM_SUFFIXES)).strip()
        try:
            source = path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            source = str(path.resolve())
    draft: dict[str, Any] = {
        "version": DRAFT_VERSION,
        "intent": name,
        "category": category,
        "agent": agent_name,
        "scope": resolved_scope,
        "keywords": _keywords(keywords, name),
        "body": text,
        "chunks": [c for c in chunks or [] if c.strip()] or None,
        "source": source,
        "run_id": run_id,
        "created_at": _now().isoformat(),
    }
    info = _prepare(root, draft)  # validates before anything is written
    if "format" in info:
        draft["format"] = info["format"]
    folder = root / DRAFTS
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.draft.json"
    _write_json(target, draft)
    return (
        f"Draft saved to {DRAFTS}/{target.name}; NOTHING is stored in memory yet. "
        "Quote this preview to the user and wait for their reply:\n\n"
        f"{_preview(draft, info)}\n{CONFIRM_PROMPT}"
    )


# -- turn 2 ----------------------------------------------------------------------------------


@dataclass
class Draft:
    path: Path
    data: dict[str, Any]

    @property
    def intent(self) -> str:
        return str(self.data["intent"])

    @property
    def created_at(self) -> datetime:
        return datetime.fromisoformat(str(self.data["created_at"]))

    @property
    def seen(self) -> bool:
        return bool(self.data.get("seen_at"))


def _load(path: Path) -> Draft:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        draft = Draft(path, data)
        _ = draft.created_at, data["intent"], data["category"], data["body"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OlavError(
            f"draft {path.name} is unreadable ({type(exc).__name__})",
            hint="Propose it again with propose_memory_draft",
        ) from None
    return draft


def list_drafts(root: Path) -> list[Draft]:
    """Pending drafts, oldest first. Unreadable files are skipped."""
    out = []
    for path in (root / DRAFTS).glob("*.draft.json"):
        try:
            out.append(_load(path))
        except OlavError:
            continue
    return sorted(out, key=lambda d: d.created_at)


def _no_draft() -> OlavError:
    return OlavError(
        "no draft found",
        hint="Call propose_memory_draft first, show the preview to the user and wait for "
        "their confirmation",
    )


def pick_draft(root: Path, intent: str | None = None) -> Draft:
    """The named draft, or the newest one. Raises "no draft found" when there is none."""
    if intent:
        path = root / DRAFTS / f"{sanitise_intent(intent)}.draft.json"
        if not path.is_file():
            raise _no_draft()
        return _load(path)
    drafts = list_drafts(root)
    if not drafts:
        raise _no_draft()
    return drafts[-1]


def draft_preview(root: Path, draft: Draft) -> str:
    """What committing ``draft`` would store, as the YAML preview the proposal showed."""
    return _preview(draft.data, _prepare(root, draft.data))


def mark_seen(draft: Draft) -> None:
    """Record the first time a person was shown the draft (kept on later showings)."""
    if draft.seen or not draft.path.is_file():
        return
    draft.data["seen_at"] = _now().isoformat()
    _write_json(draft.path, draft.data)


def draft_for_consent(
    root: Path,
    intent: str | None,
    *,
    run_id: str | None = None,
    audit_path: Path | None = None,
) -> tuple[Draft, str]:
    """The draft a chat commit would store and its preview, for the person's y/N prompt.
    Refuses (like the commit would) a draft proposed in the current run."""
    draft = pick_draft(root, intent)
    _check_confirmed(draft, run_id, audit_path)
    return draft, draft_preview(root, draft)


def _run_start(audit_path: Path | None, run_id: str | None) -> tuple[str, float] | None:
    """(id, start as epoch seconds) of ``run_id``, or of the newest run still marked running
    when ``run_id`` is None. None when the audit log cannot tell."""
    if audit_path is None or not Path(audit_path).is_file():
        return None
    from olav.audit.db import connect

    sql = "SELECT id, epoch(started_at) FROM runs WHERE "
    with connect(Path(audit_path)) as con:
        if run_id is None:
            sql += "status = 'running' ORDER BY started_at DESC LIMIT 1"
            row = con.execute(sql).fetchone()
        else:
            row = con.execute(sql + "id = ?", [run_id]).fetchone()
    return (str(row[0]), float(row[1])) if row else None


def _check_confirmed(draft: Draft, run_id: str | None, audit_path: Path | None) -> None:
    """Refuse a draft proposed in the current run: the user has not replied to it yet.

    The draft's own run id decides when both are known. Otherwise the draft must be older than
    the start of the current run (``run_id``, or the newest running run in the audit log).
    """
    proposed_in = draft.data.get("run_id")
    if run_id is not None and proposed_in is not None:
        if proposed_in == run_id:
            raise OlavError(NOT_CONFIRMED)
        return
    current = _run_start(audit_path, run_id)
    if current is None:
        return
    if proposed_in == current[0] or draft.created_at.timestamp() >= current[1]:
        raise OlavError(NOT_CONFIRMED)


def _commit_guide(root: Path, store: Any, d: dict[str, Any]) -> tuple[str, list[str]]:
    from pydantic import ValidationError

    from olav.memory.guides import Guide, import_guides

    guide = {
        "schema_version": 1,
        "intent": d["intent"],
        "agent": d["agent"],
        "category": d["category"],
        "source_tier": "user",
        "keywords": d["keywords"],
        "body": d["body"] + "\n",
    }
    if d["scope"] != ("global" if d["agent"] == "core" else d["agent"]):
        guide["scope"] = d["scope"]
    try:
        Guide.model_validate(guide)
    except ValidationError as exc:
        raise OlavError(f"the guide is not valid: {exc.errors()[0]['msg']}") from None
    guide_dir = root / d["agent"] / "guides"
    guide_dir.mkdir(parents=True, exist_ok=True)
    gpath = guide_dir / f"{d['intent']}.guide.yaml"
    atomic_write_text(gpath, yaml.safe_dump(guide, allow_unicode=True, sort_keys=False, width=100))
    summary = import_guides(store, [gpath], base=root)
    if summary.errors:
        raise OlavError(summary.errors[0].one_line())
    mem_id = f"guide_{d['agent']}_{d['intent']}"
    return mem_id, [mem_id]


def _commit_row(store: Any, d: dict[str, Any]) -> tuple[str, list[str]]:
    """A fact/preference/decision: the intent is its subject, so a new value for the same
    subject (or a near-duplicate) supersedes the old row, which stays for history."""
    from olav.memory.conflicts import remember
    from olav.memory.lessons import DEDUP_DISTANCE

    mem_id = f"{d['category']}_{d['intent']}"
    existing = store.get(mem_id)
    if existing is not None and existing.metadata.get("body", "").strip() != d["body"].strip():
        # a new value for the same subject: a new row, so the old one stays as history
        digest = hashlib.sha256(d["body"].strip().lower().encode()).hexdigest()[:8]
        mem_id = f"{mem_id}_{digest}"
    words = d["intent"].replace("_", " ")
    rec = MemoryRecord(
        id=mem_id,
        text=f"{words}: {d['body']}\n" + ", ".join(d["keywords"]),
        category=d["category"],
        scope=d["scope"],
        origin="user",
        confidence=1.0,
        tags=d["keywords"][:8],
        metadata={
            "intent": d["intent"],
            "subject": d["intent"],
            "agent": d["agent"],
            "body": d["body"],
            "keywords": d["keywords"],
            "curator": True,
        },
    )
    result = remember(store, rec, near_distance=DEDUP_DISTANCE)
    return result.memory_id, [result.memory_id, *result.replaced]


def _commit_topology(store: Any, d: dict[str, Any], fmt: str) -> tuple[str, list[str]]:
    from olav.memory.documents import diagram_labels

    mem_id = f"topology_{d['intent']}"
    labels = diagram_labels(d["body"], fmt)
    words = d["intent"].replace("_", " ")
    head = f"{words} ({d['intent']}) {fmt} topology\n{', '.join(d['keywords'])}"
    # raw SVG markup is noise to an embedder: embed its labels; diagram sources embed as they are
    content = "\n".join(labels) if fmt == "svg" else d["body"][:8000]
    store.upsert(
        [
            MemoryRecord(
                id=mem_id,
                text=f"{head}\n{'nodes: ' + ', '.join(labels) if labels else ''}\n\n{content}",
                category="topology",
                scope=d["scope"],
                origin="user",
                confidence=1.0,
                tags=[*d["keywords"][:7], fmt],
                metadata={
                    "intent": d["intent"],
                    "agent": d["agent"],
                    "format": fmt,
                    "body": d["body"],
                    "labels": labels,
                    "keywords": d["keywords"],
                    "source": d.get("source"),
                    "curator": True,
                },
            )
        ]
    )
    return mem_id, [mem_id]


def _archive(draft: Draft, outcome: str, at: datetime, extra: dict[str, Any]) -> Path:
    """Move the draft to ``committed/`` or ``rejected/`` with what became of it."""
    folder = draft.path.parent / outcome
    folder.mkdir(parents=True, exist_ok=True)
    stamp = at.strftime("%Y%m%dT%H%M%S")
    target = folder / f"{draft.intent}_{stamp}.json"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{draft.intent}_{stamp}_{n}.json"
    _write_json(target, {**draft.data, f"{outcome}_at": at.isoformat(), **extra})
    draft.path.unlink()
    return target


def _require_confirmation(confirmed_by: str | None) -> None:
    if confirmed_by not in CONFIRMERS:
        raise OlavError(
            "a memory is committed only after a person confirms it",
            hint="Ask them to answer y at the chat's prompt, or to run "
            "`olav kb drafts confirm <intent>`",
        )


def _store_draft(root: Path, store: Any, d: dict[str, Any]) -> tuple[str, list[str], str]:
    """Write the draft where its category belongs: (memory id, all ids, what was done)."""
    info = _prepare(root, d)
    cat = d["category"]
    if cat in GUIDE_CATEGORIES:
        mem_id, ids = _commit_guide(root, store, d)
        return mem_id, ids, f"Committed guide {mem_id} ({info['file']})."
    if cat == "document":
        from olav.memory.documents import write_document

        res = write_document(store, info["records"], info["summary"])
        done = (
            f'Committed document "{res.title}": {len(res.chunk_ids)} chunk(s) '
            f"({res.chunk_ids[0]}…) and the summary guide {res.summary_id}."
        )
        return res.summary_id, [res.summary_id, *res.chunk_ids], done
    if cat == "topology":
        mem_id, ids = _commit_topology(store, d, info["format"])
        return mem_id, ids, f"Committed {info['format']} topology as {mem_id}."
    mem_id, ids = _commit_row(store, d)
    return mem_id, ids, f"Committed to memory as {mem_id}."


def _audit_commit(audit_path: Path, mem_id: str, d: dict[str, Any], detail: dict[str, Any]) -> None:
    from olav.audit.recorder import AuditRecorder

    detail = {
        "intent": d["intent"],
        "category": d["category"],
        "agent": d["agent"],
        "scope": d["scope"],
        "keywords": d["keywords"],
        "format": d.get("format"),
        "source": d.get("source"),
        "body": _clip(d["body"], 2000),
        "proposed_run_id": d.get("run_id"),
        "draft_created_at": d["created_at"],
        **detail,
    }
    AuditRecorder(audit_path).memory_event(mem_id, "commit", ACTOR, detail)


def commit_draft(
    root: Path,
    store: Any,
    *,
    intent: str | None = None,
    audit_path: Path | None = None,
    run_id: str | None = None,
    confirmed_by: str | None = None,
) -> str:
    """Turn 2: commit the latest (or named) draft a person confirmed. See the module doc."""
    _require_confirmation(confirmed_by)
    draft = pick_draft(root, intent)
    if confirmed_by == "chat":  # the CLI is the person themselves: no turn to wait for
        _check_confirmed(draft, run_id, audit_path)
    mem_id, ids, done = _store_draft(root, store, draft.data)
    archive = _archive(
        draft, "committed", _now(), {"memory_ids": ids, "confirmed_by": confirmed_by}
    )
    if audit_path is not None:
        detail = {
            "memory_ids": ids[:50],
            "run_id": run_id,
            "confirmed_by": confirmed_by,
            "archive": archive.relative_to(root).as_posix(),
        }
        _audit_commit(audit_path, mem_id, draft.data, detail)
    return done


def reject_draft(root: Path, intent: str, *, audit_path: Path | None = None) -> Path:
    """A person said no: archive the draft under ``rejected/``; nothing reaches memory."""
    draft = pick_draft(root, intent)
    archive = _archive(draft, "rejected", _now(), {"rejected_by": "cli"})
    if audit_path is not None:
        from olav.audit.recorder import AuditRecorder

        detail = {
            "id": draft.intent,
            "category": draft.data["category"],
            "archive": archive.relative_to(root).as_posix(),
        }
        AuditRecorder(audit_path).event(None, "draft_rejected", detail)
    return archive
