"""The drafts page: what waits for a person's decision (``olav kb drafts``: memory drafts, guide
drafts, fix proposals), each with its preview and Confirm / Reject buttons.

Confirm is the person's yes: only a logged-in person's form (session, CSRF token, same origin)
reaches it, never an API token, and it goes through :func:`olav.learning.drafts.confirm` with
``confirmed_by="console"`` and the operator's name in the audit, as ``olav kb drafts confirm``
does with ``cli``.

**Whose drafts.** A draft that records its operator (a put through the store API) is that
operator's. Otherwise a draft proposed in a run is the run's (the operator its audit row
names, as on the runs page), and one proposed outside a run (``olav memory promote``, the
terminal without a thread) or a fix proposal (the reflector's) is the workspace's own
operator's. Either way its scope must be one the operator may read.
"""

from __future__ import annotations

from typing import Any

from olav.serve.console.context import Ctx, Missing, Page, Redirect
from olav.serve.console.html import Markup, badge, h, join, post_button, pre, when
from olav.serve.console.memory import reader

FIX_CHARS = 6000  # a fix proposal's preview is cut here


def visible(ctx: Ctx) -> list[tuple[Any, Any]]:
    """(pending item, its draft or None for a fix proposal) of the operator's, oldest first."""
    from olav.learning.curator import list_drafts
    from olav.learning.drafts import pending

    drafts = {d.intent: d for d in list_drafts(ctx.ws.root)}
    asked = [str(d.data["run_id"]) for d in drafts.values() if d.data.get("run_id")]
    operators = ctx.audit.whose(asked)
    out = []
    for item in pending(ctx.ws, store=ctx.store(), reader=reader(ctx)):
        draft = drafts.get(item.id) if item.kind != "fix" else None
        if _mine(ctx, item.kind, draft, operators):
            out.append((item, draft))
    return out


def _mine(ctx: Ctx, kind: str, draft: Any, operators: dict[str, bool]) -> bool:
    from olav.memory.store.scopes import readable

    if kind == "fix":
        return ctx.operator == ctx.owner
    if kind == "capture":  # listed by the operator's reader: theirs, or shared
        return True
    if draft is None or not readable(ctx.config, str(draft.data.get("scope") or "global")):
        return False
    made_by = draft.data.get("author") or draft.data.get("operator")  # Author.sees_draft
    if made_by:
        return bool(made_by == ctx.operator)
    run_id = draft.data.get("run_id")
    if run_id and str(run_id) in operators:  # a run's draft: whoever may see the run
        return operators[str(run_id)]
    return ctx.operator == ctx.owner


def count_visible(ctx: Ctx) -> int:
    return len(visible(ctx))


def drafts_page(ctx: Ctx) -> Page:
    from olav.learning.curator import draft_preview, mark_seen
    from olav.learning.held import held_text

    cards, rows = [], []
    for item, draft in visible(ctx):
        if draft is not None:
            text = draft_preview(ctx.ws.root, draft)
            if not ctx.wants_json:
                mark_seen(draft)  # a person has been shown it, as by `olav kb drafts show`
        elif item.kind == "capture":
            text = held_text(ctx.store().read(item.id, reader(ctx)))
        else:
            text = item.path.read_text(encoding="utf-8")[:FIX_CHARS]
        cards.append(_card(ctx, item, text))
        rows.append(
            {
                "id": item.id,
                "kind": item.kind,
                "summary": item.summary,
                "created_at": item.created_at.isoformat(),
                "seen": item.seen,
                "preview": text,
                "amends": draft.data.get("amends") if draft is not None else None,
            }
        )
    lead = Markup(
        '<p class="lead">Nothing here reaches memory until you confirm it. Reject archives it; '
        "confirming a fix proposal only marks it accepted: olav never edits code.</p>"
    )
    body = lead + (join(cards) or Markup('<p class="empty">No drafts are waiting.</p>'))
    return Page("Drafts", body, {"drafts": rows}, active="/drafts")


def _card(ctx: Ctx, item: Any, text: str) -> Markup:
    yes = "Accept (no code is changed)" if item.kind == "fix" else "Confirm"
    return h(
        '<section class="draft" aria-labelledby="d-{id}">'
        '<h2 id="d-{id}">{kind} <code>{id}</code> {new}</h2>'
        '<p class="hint">{created} · {summary}</p>{preview}'
        '<div class="actions">{yes}{no}</div></section>',
        id=item.id,
        kind=badge(item.kind),
        new=badge("new") if not item.seen else "",
        created=when(item.created_at),
        summary=item.summary,
        preview=pre(text),
        yes=post_button(f"/drafts/{item.id}/confirm", ctx.csrf, yes, cls="primary"),
        no=post_button(f"/drafts/{item.id}/reject", ctx.csrf, "Reject", cls="danger"),
    )


def _find(ctx: Ctx) -> Any:
    item_id = ctx.path_params["draft_id"]
    for item, _draft in visible(ctx):
        if item.id == item_id:
            return item
    raise Missing(f"no pending draft or fix proposal with id {item_id!r}", hint="See /drafts")


def confirm_action(ctx: Ctx) -> Redirect:
    from olav.learning.drafts import confirm

    item = _find(ctx)
    done = confirm(
        ctx.ws,
        item.id,
        store=ctx.store(),
        reader=reader(ctx),
        by="console",
        operator=ctx.operator,
        author=ctx.author,
    )
    return Redirect("/drafts", flash=done)


def reject_action(ctx: Ctx) -> Redirect:
    from olav.learning.drafts import reject

    item = _find(ctx)
    return Redirect(
        "/drafts",
        flash=reject(
            ctx.ws,
            item.id,
            by="console",
            operator=ctx.operator,
            author=ctx.author,
            store=ctx.store(),
            reader=reader(ctx),
        ),
    )
