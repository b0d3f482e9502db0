"""The console's page of one memory row (``/memory/{id}``): its text, state, history and the
decisions about it, and the buttons that change it (pin, edit, quarantine, release, delete),
each through the library's operation (:mod:`olav.memory.lifecycle.ops`) with its audit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from olav.memory.store.schema import GUIDE_CATEGORIES
from olav.serve.console.context import BadRequest, Ctx, Missing, Page, Redirect, Refused
from olav.serve.console.decisions import (
    DECISIONS,
    decision_json,
    decisions_table,
    visible_decisions,
)
from olav.serve.console.html import (
    Markup,
    facts,
    h,
    join,
    link,
    memory_href,
    post_button,
    pre,
    stamp,
    table,
    when,
)
from olav.serve.console.memory import (
    detail_text,
    expiry_of,
    made_by,
    quarantined,
    reader,
    row_json,
    shared_label,
    state_of,
)

SOURCE_CHARS = 20_000  # a guide's file is shown up to here
EDIT_CHARS = 20_000  # the longest text the edit form takes
# newest change first; rows changed at one instant by id (the listing's pages keep that order)


# -- one row -----------------------------------------------------------------------------------


def memory_row_page(ctx: Ctx) -> Page:
    from olav.audit.queries import memory_decisions, memory_events
    from olav.memory.lifecycle.conflicts import history

    memory_id = ctx.path_params["memory_id"]
    store = ctx.store()
    rec = readable_row(ctx, memory_id)
    chain = [r for r in history(store, memory_id) if reader(ctx).allows(r.scope)]
    events = memory_events(ctx.audit_path, [r.id for r in chain] or [rec.id], detail=True)
    meta = {k: v for k, v in rec.metadata.items() if k != "body"}
    decided = visible_decisions(
        ctx, memory_decisions(ctx.audit_path, memory_id=rec.id, limit=DECISIONS)
    )
    body = join(
        [
            h('<p class="lead">{} · {} · {}</p>', rec.category, rec.scope, state_of(rec)),
            _buttons(ctx, rec),
            Markup("<h2>Text</h2>"),
            pre(rec.text),
            _source_file(ctx, rec) or _guide_body(rec),  # the file holds the body too
            _context(rec),
            Markup("<h2>Details</h2>"),
            facts(
                [
                    ("id", h("<code>{}</code>", rec.id)),
                    ("category", rec.category),
                    ("scope", rec.scope),
                    ("shared", shared_label(rec.scope)),
                    ("made by", made_by(ctx, [rec])[rec.id]),
                    ("origin", rec.origin),
                    ("source file", _code(rec.metadata.get("source"))),
                    ("confidence", f"{rec.confidence:.2f}"),
                    ("read by recall", f"{rec.access_count} times"),
                    ("pinned", "yes: it never decays" if rec.metadata.get("pinned") else ""),
                    ("tags", ", ".join(rec.tags)),
                    ("created", when(rec.created_at)),
                    ("updated", when(rec.updated_at)),
                    ("happened", when(rec.event_at)),
                    ("expires", expiry_of(rec)),
                    ("retired", when(rec.invalidated_at)),
                    ("quarantined", rec.superseded_by if quarantined(rec) else ""),
                    ("superseded by", _superseder(rec)),
                ]
            ),
            Markup("<h2>Metadata</h2>") + pre(meta) if meta else Markup(""),
            Markup("<h2>History</h2>"),
            _chain(chain, rec.id),
            table(
                ["when", "memory", "action", "by", "detail"],
                [
                    (stamp(at), mid, action, actor, detail_text(detail))
                    for mid, action, actor, at, detail in events
                ],
                empty="No recorded changes (memory_events has none for this row).",
            ),
            h(
                '<h2>Decisions about this memory</h2><p class="hint">{}</p>',
                "What memory's control plane decided about this row, or about another row "
                "against it (newest first).",
            ),
            decisions_table(decided),
        ]
    )
    data = {
        "memory": row_json(rec),
        "chain": [r.id for r in chain],
        "events": [
            {
                "memory_id": m,
                "action": a,
                "actor": b,
                "at": t.isoformat() if t else None,
                "detail": d,
            }
            for m, a, b, t, d in events
        ],
        "decisions": [decision_json(d) for d in decided],
    }
    return Page(rec.id, body, data, active="/memory")


def readable_row(ctx: Ctx, memory_id: str) -> Any:
    """The row if this operator may read it; else "not found", as for a missing row."""
    rec = ctx.store().read(memory_id, reader(ctx))
    if rec is None:
        raise Missing(f"no memory with id {memory_id!r}", hint="Search for it on /memory")
    return rec


def changeable(ctx: Ctx, rec: Any) -> bool:
    """Who may pin or retire a row: the rule of every write (olav.memory.store.roles): an
    admin any row they may read, an operator only the rows of their own private scope (as the
    store API's delete)."""
    return ctx.author.refusal(rec.scope) is None


def _buttons(ctx: Ctx, rec: Any) -> Markup:
    if not changeable(ctx, rec):
        return Markup("")
    if quarantined(rec):
        release = post_button(
            memory_href(rec.id, "release"), ctx.csrf, "Release from quarantine", cls="primary"
        )
        return h('<div class="actions">{}</div>', release)
    if rec.invalidated_at is not None:
        return Markup("")
    pin = Markup("")
    if not rec.metadata.get("pinned"):
        pin = post_button(memory_href(rec.id, "pin"), ctx.csrf, "Pin (never decays)")
    hold = post_button(
        memory_href(rec.id, "quarantine"), ctx.csrf, "Quarantine (never recalled)", cls="danger"
    )
    retire = post_button(
        memory_href(rec.id, "delete"), ctx.csrf, "Delete (kept for history)", cls="danger"
    )
    return h('<div class="actions">{} {} {}</div>', pin, hold, retire) + _edit_form(ctx, rec)


def _edit_form(ctx: Ctx, rec: Any) -> Markup:
    """The text as `olav memory edit` opens it (a curator row's body, else its text); a guide
    says where it is edited instead."""
    from olav.memory.lifecycle.ops import edit_refusal

    if rec.category in GUIDE_CATEGORIES:
        return h('<p class="hint">{}</p>', edit_refusal(rec))
    return h(
        '<details class="edit"><summary>Edit the text</summary>'
        '<form method="post" action="{}"><input type="hidden" name="csrf" value="{}">'
        '<label for="edit-text">New text (re-embedded; the old text stays in the history)'
        '</label><textarea id="edit-text" name="text" rows="6" maxlength="{}" required>{}'
        '</textarea><button type="submit" class="primary">Save the text</button></form>'
        "</details>",
        memory_href(rec.id, "edit"),
        ctx.csrf,
        EDIT_CHARS,
        _editable_text(rec),
    )


def _editable_text(rec: Any) -> str:
    return str(rec.metadata.get("body") or rec.text)


def _changing(ctx: Ctx) -> Any:
    rec = readable_row(ctx, ctx.path_params["memory_id"])
    if not changeable(ctx, rec):
        raise Refused(
            f"memory {rec.id} is in scope {rec.scope}: only your own private memories can be "
            "changed here",
            hint=f"Ask the workspace's operator ({ctx.owner}) to change it",
        )
    return rec


def _actor(ctx: Ctx) -> Any:
    """The logged-in operator as the memory operations' actor (audited with who, by console)."""
    from olav.audit.recorder import AuditRecorder
    from olav.memory.lifecycle.ops import Actor

    return Actor(ctx.operator, "console", reader(ctx), AuditRecorder(ctx.audit_path))


def _apply(op: Any, ctx: Ctx, rec: Any, *args: Any) -> Any:
    """Run a memory operation on ``rec``; one that does not apply to the row as it is is
    refused (403) with the operation's own reason."""
    from olav.memory.lifecycle.ops import NotApplicable

    try:
        return op(ctx.store(), rec.id, *args, _actor(ctx))
    except NotApplicable as exc:
        raise Refused(exc.message) from None


def pin_action(ctx: Ctx) -> Redirect:
    """`olav memory pin`: it never decays and its confidence is 1.0 (audited, with who)."""
    from olav.memory.lifecycle.ops import pin

    rec = _changing(ctx)
    _apply(pin, ctx, rec)
    return Redirect(memory_href(rec.id), flash=f"Pinned {rec.id}: it never decays.")


def edit_action(ctx: Ctx) -> Redirect:
    """`olav memory edit --text`: the new text, re-embedded, the old one in the audit (with
    who). A guide is refused: it is edited through its YAML file."""
    from olav.memory.lifecycle.ops import edit, edit_refusal

    rec = _changing(ctx)
    refused = edit_refusal(rec)
    if refused is not None:
        raise Refused(refused)
    text = str(ctx.params.get("text", "")).replace("\r\n", "\n").strip()
    if not text:
        raise BadRequest("the new text is empty", hint="Delete the memory instead")
    if len(text) > EDIT_CHARS:
        raise BadRequest(f"the new text has {len(text)} characters; at most {EDIT_CHARS}")
    if text == _editable_text(rec).strip():
        return Redirect(memory_href(rec.id), flash=f"{rec.id} is unchanged.")
    _apply(edit, ctx, rec, text)
    return Redirect(memory_href(rec.id), flash=f"Updated and re-embedded {rec.id}.")


def quarantine_action(ctx: Ctx) -> Redirect:
    """Hold a row back from recall without deleting it, as the injection scanner does
    (retired, ``superseded_by = "quarantine:console"``): `olav memory quarantine` lists it
    and ``--release`` (or Release here) returns it. Audited with who."""
    from olav.memory.lifecycle.ops import quarantine

    rec = _changing(ctx)
    _apply(quarantine, ctx, rec)
    return Redirect(
        memory_href(rec.id), flash=f"Quarantined {rec.id}: recall never reads it until released."
    )


def release_action(ctx: Ctx) -> Redirect:
    """`olav memory quarantine --release ID`: back into recall (audited, with who)."""
    from olav.memory.lifecycle.ops import release

    rec = _changing(ctx)
    _apply(release, ctx, rec)
    return Redirect(memory_href(rec.id), flash=f"Released {rec.id}: recall reads it again.")


def delete_action(ctx: Ctx) -> Redirect:
    """`olav memory delete` (not --purge): retired, kept for history, never recalled again."""
    from olav.memory.lifecycle.ops import forget

    rec = _changing(ctx)
    _apply(forget, ctx, rec)
    return Redirect(memory_href(rec.id), flash=f"Deleted {rec.id}; it is kept for history.")


def _superseder(rec: Any) -> Markup | str:
    if quarantined(rec):
        return ""  # a reason, not a row: "quarantined" below says it
    return link(memory_href(rec.superseded_by), rec.superseded_by) if rec.superseded_by else ""


def _guide_body(rec: Any) -> Markup:
    body = rec.metadata.get("body")
    if not body or body == rec.text:
        return Markup("")
    what = "Guide body" if rec.category in GUIDE_CATEGORIES else "Body"
    return h("<h2>{} (what recall injects)</h2>", what) + pre(body)


def _code(value: Any) -> Markup | str:
    return h("<code>{}</code>", value) if value else ""


def _source_file(ctx: Ctx, rec: Any) -> Markup:
    """A guide's YAML file, as it is in the workspace (only a file inside the workspace)."""
    source = rec.metadata.get("source")
    if not source or not str(source).endswith((".yaml", ".yml")):
        return Markup("")
    root = Path(ctx.ws.root).resolve()
    path = (root / str(source)).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return Markup("")
    text = path.read_text(encoding="utf-8", errors="replace")[:SOURCE_CHARS]
    return h("<h2>Its file: <code>{}</code></h2>", source) + pre(text)


def _context(rec: Any) -> Markup:
    if not rec.context:
        return Markup("")
    return Markup("<h2>Context (recalled with it)</h2>") + pre(rec.context)


def _chain(chain: list[Any], current: str) -> Markup:
    if len(chain) < 2:
        return Markup("")
    items = [
        h("<li><strong>{}</strong></li>", r.id)
        if r.id == current
        else h("<li>{}</li>", link(memory_href(r.id), r.id))
        for r in chain
    ]
    return h('<p>Supersede chain, oldest first:</p><ol class="chain">{}</ol>', join(items))
