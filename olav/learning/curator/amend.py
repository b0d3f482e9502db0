"""A guide draft that adds keywords to a guide that exists: the gap a near-miss request shows
("a guide came close, but the request did not name it"), closed by a person's yes.

:func:`propose_keywords` (turn 1) writes an ordinary guide draft, ``<intent>.draft.json``,
that also names the guide it amends (``amends``: the guide's id, its file, the keywords to add
and the request that asked for them). Nothing changes until a person confirms it: then
:func:`commit_amendment` (called by the curator's commit) adds the keywords to the guide's
``keywords:`` in its own YAML file, where the guide lives, leaving every other line as it is,
and imports that file. The guide keeps its priority, related guides and comments.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text
from olav.learning.curator.common import (
    DRAFT_VERSION,
    DRAFTS,
    GUIDE_CATEGORIES,
    load_draft,
    now,
    write_json,
)

MAX_KEYWORD = 80  # characters of one proposed keyword


def clean_keyword(word: str) -> str:
    """One keyword as a guide keeps it (one line, spaces folded); a bad one is refused."""
    flat = " ".join(str(word).split()).strip("\"'`")
    if not flat:
        raise OlavError("the keyword is empty", hint="Type the words the request used")
    if len(flat) > MAX_KEYWORD:
        raise OlavError(
            f"the keyword has {len(flat)} characters; at most {MAX_KEYWORD}",
            hint="Keep the few words that name the task",
        )
    return flat


def _known(words: Sequence[str], word: str) -> bool:
    return word.casefold() in {w.casefold() for w in words}


def guide_file(root: Path, rec: Any) -> Path:
    """The YAML file a guide row was imported from, inside the workspace; else a one-line
    error (a document's summary guide has no file)."""
    source = str(rec.metadata.get("source") or "")
    path = (root / source).resolve() if source else None
    if (
        rec.category not in GUIDE_CATEGORIES
        or rec.origin != "directive"
        or path is None
        or not source.endswith(".guide.yaml")
        or not path.is_relative_to(root.resolve())
        or not path.is_file()
    ):
        raise OlavError(
            f"{rec.id} is not a guide imported from a file of this workspace",
            hint="Keywords are proposed for the guides of <agent>/guides/*.guide.yaml",
        )
    return path


def propose_keywords(
    root: Path,
    rec: Any,
    words: Sequence[str],
    *,
    request: str = "",
    proposed_by: str | None = None,
) -> str:
    """Turn 1: a guide draft adding ``words`` to the guide of memory row ``rec`` (``request``:
    the near-miss request that asked for them; ``proposed_by``: who). Returns the draft's id.
    A pending draft that amends the same guide takes the new words too; any other pending
    draft of that name is refused rather than overwritten."""
    path = guide_file(root, rec)
    keywords = [str(k) for k in rec.metadata.get("keywords") or []]
    adding: list[str] = []
    for word in (clean_keyword(w) for w in words):
        if not _known(keywords + adding, word):
            adding.append(word)
    if not adding:
        raise OlavError(
            f"{', '.join(words)!s} is a keyword of {rec.id} already",
            hint="Propose words the guide does not have",
        )
    intent = str(rec.metadata["intent"])
    target = root / DRAFTS / f"{intent}.draft.json"
    if target.is_file():
        pending = load_draft(target).data
        amends = pending.get("amends") or {}
        if amends.get("guide") != rec.id:
            raise OlavError(
                f"a draft named {intent} is already waiting for a decision",
                hint="Confirm or reject it on the drafts page first",
            )
        adding = [
            *amends["add_keywords"],
            *(w for w in adding if not _known(amends["add_keywords"], w)),
        ]
    draft = {
        "version": DRAFT_VERSION,
        "intent": intent,
        "category": rec.category,
        "agent": str(rec.metadata.get("agent") or "core"),
        "scope": rec.scope,
        "keywords": [*keywords, *adding],
        "body": str(rec.metadata.get("body") or rec.text),
        "chunks": None,
        "source": None,
        "run_id": None,
        "created_at": now().isoformat(),
        "amends": {
            "guide": rec.id,
            "file": path.relative_to(root.resolve()).as_posix(),
            "add_keywords": adding,
            "request": request.strip()[:500],
        },
    }
    if proposed_by:
        draft["proposed_by"] = proposed_by
    target.parent.mkdir(parents=True, exist_ok=True)
    write_json(target, draft)
    return intent


def amendment_preview(draft: dict[str, Any]) -> dict[str, Any]:
    """What the preview shows of an amendment (the body is left as it is)."""
    amends = draft["amends"]
    shown: dict[str, Any] = {
        "intent": draft["intent"],
        "category": draft["category"],
        "agent": draft["agent"],
        "scope": draft["scope"],
        "guide": amends["guide"],
        "file": amends["file"],
        "adds_keywords": ", ".join(amends["add_keywords"]),
        "keywords_after": ", ".join(draft["keywords"]),
        "changes": "the keywords line of the file only; the body and every other field stay",
    }
    if amends.get("request"):
        shown["asked_by_request"] = amends["request"]
    if draft.get("proposed_by"):
        shown["proposed_by"] = draft["proposed_by"]
    return shown


def commit_amendment(root: Path, store: Any, draft: dict[str, Any]) -> tuple[str, list[str], str]:
    """Turn 2, after a person's yes: add the keywords to the guide's file and import it.
    Returns (memory id, ids, what was done)."""
    from olav.memory.ingest.guides import import_guides, load_guide

    amends = draft["amends"]
    path = (root / str(amends["file"])).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        raise OlavError(
            f"the guide file {amends['file']} is gone", hint="Reject this draft; nothing changed"
        )
    guide = load_guide(path)
    if guide.id != amends["guide"]:
        raise OlavError(
            f"{amends['file']} holds {guide.id} now, not {amends['guide']}",
            hint="Reject this draft and propose the keyword again",
        )
    added = [w for w in amends["add_keywords"] if not _known(guide.keywords, w)]
    if added:
        text = path.read_text(encoding="utf-8-sig")
        atomic_write_text(path, with_keywords(text, [*guide.keywords, *added]))
        changed = load_guide(path)
        if (
            changed.model_dump()
            != guide.model_copy(update={"keywords": [*guide.keywords, *added]}).model_dump()
        ):
            atomic_write_text(path, text)  # never leave a guide changed in any other way
            raise OlavError(f"could not add the keywords to {amends['file']} safely")
    summary = import_guides(store, [path], base=root)
    if summary.errors:
        raise OlavError(summary.errors[0].one_line())
    what = ", ".join(added) if added else "nothing (it had them already)"
    return guide.id, [guide.id], f"Added keyword(s) {what} to guide {guide.id} ({amends['file']})."


def with_keywords(text: str, keywords: Sequence[str]) -> str:
    """The guide's YAML ``text`` with its ``keywords:`` value replaced by ``keywords`` (a
    flow list where the old value was); every other character stays."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        raise OlavError("the guide file is not a YAML mapping")
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "keywords":
            flow = yaml.safe_dump(
                list(keywords), default_flow_style=True, allow_unicode=True, width=10**6
            ).strip()
            start, end = value.start_mark.index, value.end_mark.index
            tail = text[end:]
            if isinstance(value, yaml.SequenceNode) and not value.flow_style:
                tail = "\n" + tail.lstrip("\n")  # a block list ends after its last line break
            return text[:start] + flow + tail
    raise OlavError("the guide file has no keywords: field")
