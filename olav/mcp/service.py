"""What ``olav mcp`` serves, as plain methods over one workspace and one agent.

No MCP types here: :mod:`olav.mcp.server` wraps these methods as tools, resources and a prompt,
and tests call them directly. The scopes are the agent's own and ``global``, never another
agent's. A call the tool schemas let through but that still makes no sense (another agent, an
unknown id, an outcome that contradicts its tool calls) raises :class:`McpArgumentError`, whose
message says how to fix the call.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from olav.audit.events import APPROVAL_EVENT, DENIAL_EVENT
from olav.audit.events import FINAL_OUTCOMES as OUTCOMES
from olav.audit.queries import NARRATED_EVENT
from olav.audit.recorder import AuditRecorder, ToolCallEntry
from olav.core.config import Workspace
from olav.core.errors import NotFoundError, OlavError
from olav.learning.curator import (
    DraftRequest,
    commit_draft,
    draft_preview,
    pick_draft,
    propose_draft,
    sanitise_intent,
)
from olav.memory.ingest.capture import ToolEvent, capture
from olav.memory.recall.episodes import recent_episodes
from olav.memory.recall.recaller import Recaller, memory_body
from olav.memory.store.filters import BY_ID, SearchFilter
from olav.memory.store.roles import OWNER, Author
from olav.memory.store.schema import PENDING_EXTERNAL, MemoryRecord
from olav.memory.store.scopes import Reader, private_scope
from olav.memory.store.table import VECTOR_COLUMNS, MemoryStore

# what a client may ask to remember; documents and diagrams go through `olav kb import`, since
# their curator path reads files from disk, which a remote client must not be able to trigger
REMEMBER_CATEGORIES = (
    "fact",
    "preference",
    "decision",
    "expert_knowledge",
    "usage_guide",
    "format_guide",
)
_STATUS_OF = {
    "completed": "completed",
    "narrated": "completed",
    "tool_error": "completed",
    "failed": "error",
    "cancelled": "cancelled",
}
DELEGATION = "task"  # handing work to a sub-agent is not acting (see olav.runtime.outcome)
MAX_BODY = 1500  # characters of a memory's text in search results
MAX_ARGS_JSON = 20000
_FILLER = frozenset({"a", "an", "the", "that", "this", "is", "are", "to", "of", "remember"})
_WORD = re.compile(r"[a-z0-9]+")


class McpArgumentError(OlavError):
    """A tool call whose arguments are well-formed but cannot be served as given."""


@dataclass
class ToolCall:
    """One tool call an external agent made, as ``record_outcome`` reports it."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    result: str = ""
    status: str = "success"  # success | error


def draft_intent(text: str) -> str:
    """A draft id from the text: its first words and a short hash, so two different
    memories never overwrite each other's draft and the same text maps to the same draft."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _FILLER][:5]
    digest = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:6]
    return sanitise_intent("_".join([*words, digest]) if words else f"memory_{digest}")


def text_keywords(text: str, limit: int = 8) -> list[str]:
    """Distinct words of three letters or more, in order: the keywords of a draft whose
    client gave none."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) >= 3 and word not in _FILLER and word not in out:
            out.append(word)
    return out[:limit]


def _row(rec: MemoryRecord) -> dict[str, Any]:
    data = rec.to_json()
    for col in VECTOR_COLUMNS:
        data.pop(col, None)
    return data


def _clip(text: str, limit: int = MAX_BODY) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def check_agent(ws: Workspace, agent: str) -> None:
    """Refuse an agent the workspace does not have, naming the ones it has."""
    known = sorted(p.name for p in ws.agent_dirs())
    if agent not in known:
        raise OlavError(
            f"there is no agent {agent!r} in this workspace",
            hint="Use one of: " + (", ".join(known) or "core"),
        )


@dataclass
class MemoryService:
    """The memory of ``ws`` as one agent sees it. Thread-safe: one call at a time."""

    ws: Workspace
    store: MemoryStore
    recaller: Recaller
    audit: AuditRecorder
    session_id: str
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, ws: Workspace, *, agent: str = "core", tier: str = "") -> MemoryService:
        """Open the store and the agent's Recaller (with the chat's settings and tier)."""
        import uuid

        from olav.llm.tiers import model_tier

        check_agent(ws, agent)
        store = MemoryStore.for_workspace(ws)
        cfg = ws.config
        tier = tier or model_tier(cfg["llm.model"], cfg["llm.tier"])
        from olav.llm.models import verdict_model

        judge = verdict_model(cfg, root=ws.root)
        recaller = Recaller.for_config(store, cfg, agent=agent, tier=tier, judge_model=judge)
        audit = AuditRecorder(ws.audit_path)
        return cls(ws, store, recaller, audit, f"mcp-{uuid.uuid4().hex[:12]}")

    @property
    def agent(self) -> str:
        return self.recaller.agent

    @property
    def scopes(self) -> list[str]:
        return self.recaller.scopes

    @property
    def reader(self) -> Reader:
        """The workspace's operator: never another operator's private rows."""
        return Reader.of(self.ws.config)

    @property
    def author(self) -> Author:
        """Who writes through this server: the workspace's operator, as its owner (a draft of
        another operator's, put through olav serve's store API, is not theirs to see)."""
        return Author.of(self.ws.config)

    def _filter(self, categories: Sequence[str] | None) -> SearchFilter:
        """This agent's scopes, as the operator may read them."""
        return SearchFilter(scopes=self.scopes, categories=categories, reader=self.reader)

    def _own_agent(self, agent: str | None) -> None:
        if agent not in (None, "", self.agent):
            raise McpArgumentError(
                f"this server serves agent {self.agent!r} only, not {agent!r}",
                hint=f"Leave agent out, or start another server with `olav mcp --agent {agent}`",
            )

    # -- reading ---------------------------------------------------------------------------

    def recall(self, request: str, agent: str | None = None) -> dict[str, Any]:
        """What AutoRecall would inject before a model call for ``request``, and why each
        candidate was kept or dropped. Records nothing (like ``olav memory why``)."""
        self._own_agent(agent)
        with self._lock:
            result = self.recaller.recall(request, dry_run=True)
        return {**result.to_json(brief=True), "latency_ms": round(result.latency_ms, 1)}

    def search(self, query: str, category: str | None = None, k: int = 5) -> dict[str, Any]:
        """The hybrid search, restricted to this agent's scopes."""
        cats = [category] if category else None
        with self._lock:
            hits = self.store.search(query, mode="hybrid", k=k, filter=self._filter(cats))
        return {
            "hits": [
                {
                    "id": h.record.id,
                    "category": h.record.category,
                    "scope": h.record.scope,
                    "score": round(h.score, 5),
                    "text": _clip(memory_body(h)),
                }
                for h in hits
            ]
        }

    def get(self, memory_id: str) -> dict[str, Any]:
        """One memory row (no vectors). A row of another agent's scope is not found."""
        with self._lock:
            rec = self.store.read(memory_id, self.reader)
        if rec is None or rec.scope not in self.scopes:
            raise NotFoundError(
                f"no memory with id {memory_id!r} for agent {self.agent}",
                hint="Find ids with the search or recall tools",
            )
        if rec.quarantined:
            raise NotFoundError(
                f"memory {memory_id!r} is held back as possible prompt injection",
                hint="A person can review it with `olav memory quarantine`",
            )
        return _row(rec)

    # -- the curator: draft, then the person's consent -----------------------------------------

    def remember(
        self,
        text: str,
        category: str = "fact",
        agent: str | None = None,
        keywords: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Write a curator draft and return its preview. Stores nothing in memory."""
        self._own_agent(agent)
        if category not in REMEMBER_CATEGORIES:
            raise McpArgumentError(
                f"category {category!r} cannot be remembered over MCP",
                hint="Use one of: "
                + ", ".join(REMEMBER_CATEGORIES)
                + "; import documents with `olav kb import`",
            )
        intent = draft_intent(text)
        request = DraftRequest(
            intent=intent,
            keywords=list(keywords or text_keywords(text)),
            body=text,
            category=category,
            agent=self.agent,
        )
        who = self.author
        # a token's operator (olav mcp --http) proposes as themselves: their scope, their draft
        propose_draft(self.ws.root, request, author=None if who.role == OWNER else who)
        return {
            "draft_id": intent,
            "stored": False,
            "preview": self.preview(intent),
            "next": f"Call confirm with draft_id {intent!r}: the person is asked to approve it. "
            f"Or they run `olav kb drafts confirm {intent}` in a terminal.",
        }

    def preview(self, draft_id: str) -> str:
        """What confirming ``draft_id`` would store. Raises "no draft found"."""
        root = self.ws.root
        draft = pick_draft(root, draft_id, author=self.author)
        if draft.data.get("agent") != self.agent:
            raise NotFoundError(
                f"draft {draft_id!r} belongs to agent {draft.data.get('agent')!r}",
                hint=f"Confirm it with `olav kb drafts confirm {draft_id}` in a terminal",
            )
        return draft_preview(root, draft)

    def commit(self, draft_id: str, *, client: str) -> str:
        """Commit a draft the person approved in the client's elicitation dialog."""
        self.preview(draft_id)  # the same draft checks as when it was shown
        with self._lock:
            done = commit_draft(
                self.ws.root,
                self.store,
                intent=draft_id,
                audit_path=self.ws.audit_path,
                confirmed_by="mcp",
                author=self.author,
            )
        self._decision(True, draft_id, client, asked=True)
        return done

    def refuse(self, draft_id: str, *, client: str, asked: bool) -> None:
        """The person declined (or could not be asked): the draft waits, a denial is audited."""
        self._decision(False, draft_id, client, asked=asked)

    def _decision(self, approved: bool, draft_id: str, client: str, *, asked: bool) -> None:
        detail = {
            "tool": "confirm",
            "subject": draft_id,
            "asked": asked,
            "agent": self.agent,
            "via": "mcp",
            "client": client,
        }
        self.audit.event(None, APPROVAL_EVENT if approved else DENIAL_EVENT, detail)

    # -- the learning loop ---------------------------------------------------------------------

    def record_outcome(
        self,
        request: str,
        tools_called: Sequence[ToolCall],
        outcome: str,
        error: str | None = None,
        answer: str | None = None,
        *,
        client: str = "mcp",
    ) -> dict[str, Any]:
        """Record an external agent's run in the audit log (so trace-review learns from it)
        and capture its successful write-type calls as precedents."""
        check_outcome(tools_called, outcome, error)
        run_id = self._record_run(request, tools_called, outcome, error, answer, client)
        events = [
            ToolEvent(self.agent, c.tool, dict(c.args), c.result, c.status) for c in tools_called
        ]
        finished = outcome not in ("failed", "cancelled")
        with self._lock:
            captured = capture(
                self.store,
                events,
                question=request if finished else "",
                run_id=run_id,
                # an external agent's report is its operator's, like a run's own capture
                scope=private_scope(self.ws.config),
                policy=self.recaller.policy,
                log=self.audit,
                # what a client reports waits for a person's yes: no later report confirms it
                held=PENDING_EXTERNAL,
            )
        return {
            "run_id": run_id,
            "outcome": outcome,
            "captured": captured,
            "pending": captured,  # none is recalled until a person confirms it (olav kb drafts)
            "learnable": outcome != "completed",
        }

    def _record_run(
        self,
        request: str,
        calls: Sequence[ToolCall],
        outcome: str,
        error: str | None,
        answer: str | None,
        client: str,
    ) -> str:
        audit = self.audit
        run_id = audit.start_run(self.agent, self.session_id, request, f"mcp:{client}")
        audit.message(run_id, "user", request)
        for c in calls:
            audit.tool_call(
                run_id, self.agent, ToolCallEntry(c.tool, dict(c.args), c.result, c.status, 0.0)
            )
        if answer:
            audit.message(run_id, "assistant", answer)
        if outcome == "narrated":  # trace_learner reads the tools it could have called here
            audit.event(run_id, NARRATED_EVENT, {"named_tools": [], "tools": [], "client": client})
        audit.end_run(run_id, _STATUS_OF[outcome], error, outcome=outcome)
        return run_id

    # -- resources -------------------------------------------------------------------------

    def _live(self, category: str) -> list[MemoryRecord]:
        with self._lock:
            return self.store.rows(self._filter([category]), order=BY_ID)

    def guides(self) -> str:
        """The agent's directives (usage_guide rows of its scopes) as Markdown."""
        parts = [f"# Guides of agent {self.agent}"]
        for r in self._live("usage_guide"):
            words = ", ".join(str(k) for k in r.metadata.get("keywords") or [])
            body = str(r.metadata.get("body") or r.text).strip()
            title = r.metadata.get("intent") or r.id
            parts.append(f"## {title}\nid: {r.id} · scope {r.scope} · keywords: {words}\n\n{body}")
        return "\n\n".join(parts) + "\n"

    def lessons(self) -> str:
        """The live lessons (reflection rows) as Markdown."""
        rows = self._live("reflection")
        lines = [f"- {' '.join(r.text.split())} ({r.id})" for r in rows]
        return "# Lessons\n\n" + ("\n".join(lines) or "No lessons yet.") + "\n"

    def episodes(self, limit: int = 5) -> str:
        """The latest session summaries of the agent's scopes as Markdown."""
        with self._lock:
            rows = recent_episodes(self.store, self.scopes, limit=limit)
        parts = [f"## {r.id}\n{r.text.strip()}" for r in rows]
        return "# Recent episodes\n\n" + ("\n\n".join(parts) or "No episodes yet.") + "\n"


def check_outcome(calls: Sequence[ToolCall], outcome: str, error: str | None) -> None:
    """Refuse a reported outcome that contradicts its tool calls (the rules of
    olav.runtime.outcome.classify), or arguments too large to audit."""
    failed = [c.tool for c in calls if c.status == "error"]
    acted = [c.tool for c in calls if c.tool != DELEGATION]
    problem = None
    if outcome not in OUTCOMES:
        problem = f"outcome must be one of {', '.join(OUTCOMES)}"
    elif outcome == "tool_error" and not failed:
        problem = "outcome tool_error needs a call with status error in tools_called"
    elif outcome == "completed" and failed:
        problem = f"{failed[0]} failed, so the outcome is tool_error (or failed), not completed"
    elif outcome == "narrated" and acted:
        problem = f"narrated means no tool was called, but {acted[0]} was: use completed"
    elif outcome == "failed" and not (error or "").strip():
        problem = "outcome failed needs the error that ended the run"
    elif any(len(json.dumps(c.args, default=str)) > MAX_ARGS_JSON for c in calls):
        problem = f"a call's args exceed {MAX_ARGS_JSON} characters of JSON"
    if problem:
        raise McpArgumentError(problem)
