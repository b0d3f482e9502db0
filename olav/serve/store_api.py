"""The LangGraph Store API subset (``client.store`` of langgraph-sdk) over olav's memory.

An item is a memory row the request's operator may read (:func:`olav.memory.store.scopes.readable`,
the rule recall applies): its key is the row's id, its namespace
``["memories", <where>, <category>]``, where ``<where>`` is ``private`` (the operator's own
``user:`` scope), ``team`` (the team's ``team:`` scope) or the scope itself (``global``, an
agent's name). Another operator's private row is "not found", never "forbidden".

- **put** never writes memory: it becomes a curator draft (``olav kb drafts``) that waits for a
  person's ``olav kb drafts confirm``, exactly like ``propose_memory_draft`` in the chat. The
  draft goes to the operator's private scope (the team's when the namespace says ``team``), its
  category is the namespace's last label when that is one the curator stores, else ``fact``,
  and it records the operator.
- **get** and **delete** take the row's id as the key, or the key of the put whose draft was
  confirmed (its row is found by the draft's name). Only the operator's own private rows may be
  deleted here, with ``olav memory delete``'s rule: retired, kept for history.
- **search** is the hybrid search when a query is given, else the newest rows, and
  **namespaces** the namespaces that hold rows the operator may read.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from olav.serve import answers as A
from olav.serve.http import HTTPError, jsonsafe
from olav.serve.routing import Reply, Routes
from olav.serve.schema import (
    ItemQuery,
    StoreDelete,
    StoreFilter,
    StoreNamespaces,
    StorePut,
    StoreSearch,
    StoreValue,
    labels,
)
from olav.serve.server import Server

STORE = Routes()

ROOT = "memories"
PRIVATE = "private"
TEAM = "team"
STORED = ("fact", "decision", "preference", "expert_knowledge", "document", "topology")


# -- the operator, the memory table, and what a namespace means -----------------------------------


class _Operator:
    """The request's operator: their configuration (``memory.user`` is them) and scopes."""

    def __init__(self, server: Server, operator: str) -> None:
        from olav.memory.store.scopes import Reader, team_scope, user_name
        from olav.serve.pool import operator_workspace

        self.ws = operator_workspace(server.ws, operator)
        self.config = self.ws.config
        self.reader = Reader.of(self.config)
        self.user = user_name(self.config)
        self.team = team_scope(self.config)

    def namespace(self, scope: str, category: str) -> list[str]:
        from olav.memory.store.scopes import TEAM_PREFIX

        if scope == self.reader.user:
            where = PRIVATE
        elif scope.startswith(TEAM_PREFIX):
            where = TEAM
        else:
            where = scope
        return [ROOT, where, category]

    def target(self, namespace: list[str]) -> tuple[str, str]:
        """(scope, category) a put to ``namespace`` drafts into."""
        from olav.learning.curator import GUIDE_CATEGORIES

        last = namespace[-1] if namespace else ""
        if last in GUIDE_CATEGORIES:
            raise HTTPError(
                422,
                f"namespace: {last} is a guide, written in the workspace (a guide file, or "
                "the chat's propose_memory_draft); the store takes: " + ", ".join(STORED),
            )
        category = last if last in STORED else "fact"
        if TEAM in namespace:
            if self.team is None:
                raise HTTPError(
                    422,
                    "namespace: it says team, but this workspace has no team (memory.team); "
                    "leave 'team' out for a private memory",
                )
            return self.team, category
        return self.reader.user, category

    def draft_id(self, scope: str, category: str, key: str) -> str:
        """The draft a put of ``key`` becomes: the operator's own (two operators never share
        one), the same for the same item, so a second put before the confirm replaces it."""
        digest = hashlib.sha256(f"{self.user}\0{scope}\0{category}\0{key}".encode()).hexdigest()
        slug = re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")[:40].strip("_") or "item"
        return f"{slug}_{digest[:8]}"


class _Reading(_Operator):
    """What a read (or a delete) works with: the operator and the server's memory table."""

    def __init__(self, server: Server, operator: str) -> None:
        super().__init__(server, operator)
        self.store = _memory(server)

    def item(self, rec: Any, score: float | None = None) -> A.StoreItem:
        out = A.StoreItem(
            namespace=self.namespace(rec.scope, rec.category),
            key=rec.id,
            value=A.StoredValue(
                text=rec.text,
                category=rec.category,
                scope=rec.scope,
                origin=rec.origin,
                confidence=rec.confidence,
                tags=list(rec.tags),
                metadata=jsonsafe(rec.metadata),
            ),
            created_at=_iso(rec.created_at),
            updated_at=_iso(rec.updated_at or rec.created_at),
        )
        if score is not None:
            out.score = score
        return out

    def live(self, where: Where | None = None, **fields: Any) -> Any:
        """The live rows the operator may read that ``where`` (a namespace's and a filter's
        conditions) and ``fields`` select (olav.memory.store.filters.SearchFilter)."""
        from olav.memory.store.filters import SearchFilter

        chosen = where or Where()
        return SearchFilter(
            reader=self.reader,
            scopes=chosen.only("scope"),
            categories=chosen.only("category"),
            origins=chosen.only("origin"),
            scope_prefix=chosen.scope_prefix,
            **fields,
        )

    def find(self, namespace: list[str], key: str) -> Any:
        """The live row the operator may read whose id is ``key`` or, for the key of a put
        whose draft was confirmed, the row that draft became (its newest); else 404."""
        from olav.memory.store.schema import now

        rec = self.store.read(key, self.reader)
        if rec is not None:
            if rec.invalidated_at is not None:
                raise HTTPError(404, f"item {key!r} was deleted or replaced")
            if rec.expires_at is not None and rec.expires_at <= now():
                raise HTTPError(404, f"item {key!r} has expired")
            return rec
        try:
            scope, category = self.target(namespace)
        except HTTPError:
            raise HTTPError(404, f"no item {key!r}") from None
        intent = self.draft_id(scope, category, key)
        named = self.live(mentions=f'"intent": "{intent}"')
        rows = [r for r in self.store.rows(named) if r.metadata.get("intent") == intent]
        if not rows:
            raise HTTPError(404, f"no item {key!r}")
        rows.sort(key=lambda r: (r.category == category, _stamp(r)), reverse=True)
        return rows[0]


def _memory(server: Server) -> Any:
    """The server's one memory table (shared with its sessions), or 503."""
    from olav.runtime.builder import MemoryOff

    try:
        store = server.pool.memory()
    except Exception as exc:  # the next request tries again
        raise HTTPError(503, f"the memory table cannot be opened: {exc}") from None
    if isinstance(store, MemoryOff):
        raise HTTPError(503, f"the memory table cannot be opened: {store.reason}")
    return store


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def _stamp(rec: Any) -> str:
    return _iso(rec.updated_at or rec.created_at) or ""


# -- reading the request ----------------------------------------------------------------------


def _text_of(value: StoreValue) -> tuple[str, list[str]]:
    """What a put's value stores: its ``text`` (else the value as JSON), and its ``tags``
    (bounded as metadata is, by the model: its size, keys and depth)."""
    text, tags = value.text, value.tags
    extra = value.model_extra or {}
    if tags is None and isinstance(extra.get("keywords"), list):
        tags = [str(t) for t in extra["keywords"]]
    if text is None:
        text = json.dumps(value.model_dump(exclude_unset=True), ensure_ascii=False, sort_keys=True)
    if not text.strip():
        raise HTTPError(422, "value.text is empty: say what should be remembered")
    return text, list(tags or [])


@dataclass
class Where:
    """The conditions a search puts on a row: each field equal to every value named for it
    (two different values select nothing), and a scope prefix."""

    equal: dict[str, set[str]] = dataclass_field(default_factory=dict)
    scope_prefix: str | None = None

    def add(self, field: str, value: str) -> None:
        self.equal.setdefault(field, set()).add(value)

    def only(self, field: str) -> list[str] | None:
        """The one value ``field`` must have (as a list); [] when two are asked, None: any."""
        wanted = self.equal.get(field)
        if wanted is None:
            return None
        return sorted(wanted) if len(wanted) == 1 else []

    def merged(self, other: Where) -> Where:
        out = Where({k: set(v) for k, v in self.equal.items()}, self.scope_prefix)
        for field, values in other.equal.items():
            out.equal.setdefault(field, set()).update(values)
        out.scope_prefix = out.scope_prefix or other.scope_prefix
        return out


def _prefix_where(prefix: list[str], reading: _Reading) -> Where | None:
    """The conditions on the rows whose namespace starts with ``prefix``; None when no row's
    can."""
    from olav.memory.store.scopes import TEAM_PREFIX, USER_PREFIX

    out = Where()
    if not prefix:
        return out
    if prefix[0] != ROOT or len(prefix) > 3:
        return None
    if len(prefix) > 1:
        where = prefix[1]
        if where == PRIVATE:
            out.add("scope", reading.reader.user)
        elif where == TEAM:
            out.scope_prefix = TEAM_PREFIX
        elif where.startswith((USER_PREFIX, TEAM_PREFIX)):
            return None  # those scopes are named private and team
        else:
            out.add("scope", where)
    if len(prefix) > 2:
        out.add("category", prefix[2])
    return out


def _filter_where(value: StoreFilter | None) -> Where:
    out = Where()
    for field, wanted in (value.model_dump(exclude_none=True) if value else {}).items():
        out.add(field, wanted)
    return out


# -- the routes -------------------------------------------------------------------------------


@STORE.add(
    "PUT",
    "/store/items",
    "a memory draft, for a person to confirm",
    {202: Reply("the draft", A.Draft)},
    errors=(413, 422),
    body=StorePut,
    body_required=True,
)
async def put_item(server: Server, request: Request, operator: str, body: StorePut) -> Response:
    namespace, key = body.namespace, body.key
    text, tags = _text_of(body.value)
    draft = await anyio.to_thread.run_sync(_draft, server, operator, namespace, key, text, tags)
    return JSONResponse(
        {"draft": draft, "status": "pending", "confirm": f"olav kb drafts confirm {draft}"},
        status_code=202,
    )


def _draft(
    server: Server, operator: str, namespace: list[str], key: str, text: str, tags: list[str]
) -> str:
    from olav.learning.curator import DraftRequest, propose_draft
    from olav.memory.store.roles import Author

    who = _Operator(server, operator)
    scope, category = who.target(namespace)
    draft = who.draft_id(scope, category, key)
    words = " ".join(re.sub(r"[^\w]+", " ", key).split())
    propose_draft(
        server.ws.root,
        DraftRequest(
            intent=draft,
            keywords=tags or [words or key],
            body=text,
            category=category,
            scope=scope,
            operator=who.user,
        ),
        author=Author.of(who.config),
    )
    return draft


@STORE.get(
    "/store/items", "one item", Reply("the item", A.StoreItem), errors=(404, 422), query=ItemQuery
)
def get_item(server: Server, request: Request, operator: str, query: ItemQuery) -> A.StoreItem:
    namespace = labels([label for label in query.namespace.split(".") if label], "namespace")
    key = query.key
    reading = _Reading(server, operator)
    return reading.item(reading.find(namespace, key))


@STORE.add(
    "DELETE",
    "/store/items",
    "retire one of the operator's own private memories",
    {204: Reply("retired")},
    errors=(403, 404, 413, 422),
    body=StoreDelete,
    body_required=True,
)
def delete_item(server: Server, request: Request, operator: str, body: StoreDelete) -> Response:
    _delete(server, operator, body.namespace, body.key)
    return Response(status_code=204)


def _delete(server: Server, operator: str, namespace: list[str], key: str) -> None:
    from olav.audit.recorder import AuditRecorder
    from olav.learning.curator import GUIDE_CATEGORIES
    from olav.memory.lifecycle.ops import Actor, forget

    reading = _Reading(server, operator)
    rec = reading.find(namespace, key)
    guide = rec.category in GUIDE_CATEGORIES and not rec.metadata.get("doc_id")
    if rec.scope != reading.reader.user or guide:
        what = "a guide" if guide else f"shared (scope {rec.scope})"
        raise HTTPError(
            403,
            f"item {rec.id} is {what}: only your own private memories are deleted here; "
            f"delete it in the workspace with `olav memory delete {rec.id}`",
        )
    actor = Actor(operator, "store", reading.reader, AuditRecorder(reading.ws.audit_path))
    forget(reading.store, rec.id, actor)


@STORE.post(
    "/store/items/search",
    "items: the hybrid search with a query, else the newest",
    Reply("the items", A.StoreItems),
    errors=(413, 422),
    body=StoreSearch,
)
def search_items(
    server: Server, request: Request, operator: str, body: StoreSearch
) -> A.StoreItems:
    # a query is refused beyond MAX_QUERY (the model's bound), never cut: a client that sends
    # a page as a query should hear so (the embedder cuts what it embeds to its own window)
    query = (body.query or "").strip()
    conditions = _filter_where(body.filter)
    return _search(
        server, operator, body.namespace_prefix, conditions, query, body.limit, body.offset
    )


def _search(
    server: Server,
    operator: str,
    prefix: list[str],
    conditions: Where,
    query: str,
    limit: int,
    offset: int,
) -> A.StoreItems:
    from olav.memory.store.filters import NEWEST

    reading = _Reading(server, operator)
    under = _prefix_where(prefix, reading)
    if under is None:
        return A.StoreItems(items=[])
    chosen = reading.live(under.merged(conditions))
    if query:
        hits = reading.store.search(query, k=offset + limit, filter=chosen)
        picked = hits[offset : offset + limit]
        return A.StoreItems(
            items=[reading.item(h.record, round(float(h.score), 6)) for h in picked]
        )
    rows = reading.store.rows(chosen, order=NEWEST, offset=offset, limit=limit)
    return A.StoreItems(items=[reading.item(r) for r in rows])


@STORE.post(
    "/store/namespaces",
    "the namespaces that hold items the operator may read",
    Reply("the namespaces", A.Namespaces),
    errors=(413, 422),
    body=StoreNamespaces,
)
def list_namespaces(
    server: Server, request: Request, operator: str, body: StoreNamespaces
) -> A.Namespaces:
    return _namespaces(
        server, operator, body.prefix, body.suffix, body.max_depth, body.limit, body.offset
    )


def _namespaces(
    server: Server,
    operator: str,
    prefix: list[str],
    suffix: list[str],
    depth: int | None,
    limit: int,
    offset: int,
) -> A.Namespaces:
    reading = _Reading(server, operator)
    if reading.store.size() == 0:
        return A.Namespaces(namespaces=[])
    rows = reading.store.values(["scope", "category"], reading.live()).to_pylist()
    found = sorted({tuple(reading.namespace(r["scope"], r["category"])) for r in rows})
    out: list[list[str]] = []
    for names in found:
        ns = list(names)
        if ns[: len(prefix)] != prefix or (suffix and ns[-len(suffix) :] != suffix):
            continue
        ns = ns[:depth] if depth else ns
        if ns not in out:
            out.append(ns)
    return A.Namespaces(namespaces=out[offset : offset + limit])
