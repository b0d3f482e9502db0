"""The two-turn, human-confirmed path from "remember that ..." to memory.

Turn 1 (:func:`propose_draft`) only writes ``.curator_drafts/<intent>.draft.json`` and returns a
preview for the agent to quote, ending with :data:`CONFIRM_PROMPT`. Nothing reaches memory.

Turn 2 (:func:`commit_draft`) commits the latest (or named) draft, by category:

- ``usage_guide`` / ``format_guide``: ``<agent>/guides/<intent>.guide.yaml``, primed into memory;
- ``fact`` / ``preference`` / ``decision`` / ``expert_knowledge``: one row, origin user,
  confidence 1.0;
- ``document``: ~500-token chunks (category document) plus a summary usage_guide
  (see :mod:`olav.memory.ingest.documents`);
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

from olav.learning.curator.commit import commit_draft, draft_for_consent, reject_draft
from olav.learning.curator.common import (
    ACTOR,
    CATEGORIES,
    CONFIRM_PROMPT,
    CONFIRMERS,
    DRAFT_VERSION,
    DRAFTS,
    GUIDE_CATEGORIES,
    NOT_CONFIRMED,
    PREVIEW_CHARS,
    ROW_CATEGORIES,
    Draft,
    list_drafts,
    mark_seen,
    pick_draft,
    sanitise_agent,
    sanitise_intent,
)
from olav.learning.curator.propose import DraftRequest, draft_preview, propose_draft

__all__ = [
    "ACTOR",
    "CATEGORIES",
    "CONFIRMERS",
    "CONFIRM_PROMPT",
    "DRAFTS",
    "DRAFT_VERSION",
    "GUIDE_CATEGORIES",
    "NOT_CONFIRMED",
    "PREVIEW_CHARS",
    "ROW_CATEGORIES",
    "Draft",
    "DraftRequest",
    "commit_draft",
    "draft_for_consent",
    "draft_preview",
    "list_drafts",
    "mark_seen",
    "pick_draft",
    "propose_draft",
    "reject_draft",
    "sanitise_agent",
    "sanitise_intent",
]
