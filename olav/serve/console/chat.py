"""The Chat page, ``/chat``: talk to an agent in the browser, streamed, on an ordinary olav
thread (the operator owns it; ``olav threads list`` shows it, the API continues it).

A message is a ``POST /chat/send`` and the answer to an approval a ``POST /chat/answer``: the
console's POSTs (a live session, its CSRF token, the console's own origin), never an API
token, so an approval is always a person's. Both drive the runs of the Agent Protocol
(:meth:`olav.serve.server.Server.new_run` and ``start``: the same session pool, the same one run
per thread, the same interrupts), and answer with the run as server-sent events
(``static/chat.js`` reads them with fetch):

- ``thread`` (first): the thread and agent the run is on;
- ``token``: a piece of the answer as the model writes it;
- ``tool_call`` and ``tool_result``: a tool the model called, and what it returned;
- ``approval``: the run paused for the person's yes or no (a dangerous tool);
- ``error``: the run failed (its message);
- ``done`` (last): the outcome, the whole answer, the audit's run id, and every recall of the
  run with the ``<relevant-memories>`` block its model calls received (from the audit, as
  ``/runs/ID`` shows it).

Without JavaScript the forms still work: the POST waits for the run (on the event loop, no
worker thread held) and goes back to the page, which shows the thread turn by turn from the
audit (each turn with its memory blocks) and an approval that waits as two buttons.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

from olav.audit.events import APPROVAL_EVENT, DENIAL_EVENT
from olav.serve.console.context import AfterRun, BadRequest, Ctx, Missing, Page
from olav.serve.console.html import (
    Markup,
    h,
    join,
    link,
    memory_href,
    pre,
    snippet,
    stamp,
    url,
)
from olav.serve.schema import Command, RunCreate

MODES = ["messages-tuple", "updates"]

MAX_TEXT = 20_000
TURNS_SHOWN = 30
THREADS_SHOWN = 15
RESULT_CHARS = 4000  # of a tool's result, in the stream
WAIT_S = 600.0  # the longest a form without JavaScript waits for its run
ANSWERS = {"allow": "yes", "deny": "no"}
VERBS = {APPROVAL_EVENT: "allowed", DENIAL_EVENT: "denied"}
DEFAULT_AGENT = "core"
SAID = '<div class="msg {}"><span class="who">{}</span><div class="text">{}</div></div>'
CALL = (
    '<div class="tool-call" data-tool="{0}"><span class="who">calls <code>{0}</code></span>'
    "{1}</div>"
)


# -- the page ------------------------------------------------------------------------------------


def chat_page(ctx: Ctx) -> Page:
    agents = sorted(ctx.server.agents)
    tid = ctx.text("thread", 200)
    info = _thread(ctx, tid) if tid else None
    agent = _agent(ctx, info)
    turns = _turns(ctx, info.id) if info is not None else []
    pending = _pending(ctx, info, turns) if info is not None else []
    threads = ctx.server.threads.recent(owner=ctx.operator, limit=THREADS_SHOWN)
    body = join(
        [
            _threads_nav(threads, info.known_as if info is not None else ""),
            h(
                '<section class="chat" id="chat" aria-label="conversation">'
                '<ol class="turns" id="turns" aria-live="polite">{}</ol>{}</section>',
                join(_turn_html(t) for t in turns),
                join(_approval_form(ctx, info.known_as, p) for p in pending) if info else "",
            ),
            _send_form(ctx, agents, agent, info),
            Markup('<script src="/static/chat.js" defer></script>'),
        ]
    )
    data = {
        "thread": info.known_as if info is not None else None,
        "agent": agent,
        "agents": agents,
        "turns": turns,
        "pending": pending,
        "threads": [
            {"id": t.known_as, "agent": t.agent, "title": t.name or t.preview, "turns": t.turns}
            for t in threads
        ],
    }
    title = (
        f"Chat · {info.name or info.preview or info.known_as[:12]}" if info is not None else "Chat"
    )
    return Page(title, body, data, active="/chat")


def _agent(ctx: Ctx, info: Any) -> str:
    """The thread's agent; for a new thread the form's (``core`` by default)."""
    agents = sorted(ctx.server.agents)
    if info is not None and info.agent in agents:
        return str(info.agent)
    asked = ctx.text("agent", 100)
    if asked and asked not in agents:
        raise BadRequest(f"no agent {asked!r}; the agents are: {', '.join(agents)}")
    if asked:
        return asked
    return DEFAULT_AGENT if DEFAULT_AGENT in agents else (agents[0] if agents else "")


def _thread(ctx: Ctx, thread_id: str) -> Any:
    """The operator's thread with exactly this id (thread ids are per operator)."""
    info = ctx.server.own_thread(ctx.operator, thread_id)
    if info is None:
        raise Missing(f"no thread {thread_id!r}", hint="Start one on /chat")
    return info


def _turns(ctx: Ctx, thread_id: str) -> list[dict[str, Any]]:
    """The thread's last turns (``thread_id``: its key, as the audit names it), oldest first,
    as the audit keeps them: each run's messages, tool calls and results, its approvals, and
    the memory block each recall injected."""
    from olav.audit.export import RunFilter, redact_again

    # the operator's runs of this id only (the audit reader's): a thread deleted and made
    # again by someone else keeps its earlier owner's runs in the audit
    newest = ctx.audit.runs(RunFilter(threads=(thread_id,), limit=TURNS_SHOWN))
    runs = list(ctx.audit.details(newest[::-1]))
    turns = [redact_again(_turn_json(r)) for r in runs]
    for before, turn in pairwise(turns):
        if before["outcome"] == "interrupted":  # this run is the answer that continued it
            turn["continues"] = before["run"]
            shown = len(before["messages"])
            roles = [m["role"] for m in turn["messages"][:shown]]
            if roles == [m["role"] for m in before["messages"]]:  # shown with the turn before
                turn["messages"] = turn["messages"][shown:]
    return turns


def _turn_json(run: Any) -> dict[str, Any]:
    answers = [
        {"kind": e["kind"], "tool": (e["detail"] or {}).get("tool", "")}
        for e in run.events
        if e["kind"] in VERBS
    ]
    return {
        "run": run.id,
        "started_at": run.started_at.isoformat(),
        "outcome": run.outcome,
        "query": run.query,
        "messages": [s.to_json() for s in run.steps],
        "answers": answers,
        "recalls": [_recall_json(r) for r in run.recalls],
        "continues": None,  # the interrupted run this one answered
    }


def _recall_json(recall: dict[str, Any]) -> dict[str, Any]:
    return {
        "agent": recall["agent"],
        "block": recall["block"] or "",
        "injected": recall["injected"],
        "latency_ms": recall["latency_ms"],
    }


def _pending(ctx: Ctx, info: Any, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the thread waits for (an approval), when its last run paused and nothing runs."""
    if not turns or turns[-1]["outcome"] != "interrupted":
        return []
    if ctx.server.runs.active(info.id) is not None:
        return []
    return [_approval_json(i.id, i.value) for i in ctx.server.pending(ctx.operator, info)]


def _approval_json(interrupt_id: Any, value: Any) -> dict[str, Any]:
    from olav.audit.export import redact_again

    value = value if isinstance(value, dict) else {}
    action = value.get("action_request") or {}
    out = {
        "id": str(interrupt_id or ""),
        "action": str(action.get("action") or "?"),
        "args": action.get("args") or {},
        "description": str(value.get("description") or ""),
    }
    result: dict[str, Any] = redact_again(out)
    return result


# -- its HTML (chat.js builds the same for a live turn) ------------------------------------------


def _threads_nav(threads: list[Any], current: str) -> Markup:
    items = [h('<li><a href="/chat">+ new chat</a></li>')]
    for t in threads:
        mark = Markup(' aria-current="page"') if t.known_as == current else Markup("")
        items.append(
            h(
                '<li><a href="{}"{}>{}</a> <span class="hint">{} · {} turn{}</span></li>',
                url("/chat", {"thread": t.known_as}),
                mark,
                snippet(t.name or t.preview or t.known_as[:12], 60),
                t.agent,
                t.turns,
                "" if t.turns == 1 else "s",
            )
        )
    return h(
        '<nav class="threads" aria-label="your threads"><h2>Your threads</h2><ul>{}</ul></nav>',
        join(items),
    )


def _turn_html(turn: dict[str, Any]) -> Markup:
    parts: list[Markup] = []
    if turn["continues"]:
        said = ", ".join(
            f"{VERBS.get(a['kind'], a['kind'])} {a['tool'] or 'the tool'}" for a in turn["answers"]
        )
        parts.append(h(SAID, "user answer", "you answered", said or turn["query"]))
    for m in turn["messages"]:
        parts.append(_message_html(m))
    parts.append(_saw_html(turn["recalls"]))
    parts.append(
        h(
            '<p class="hint">{} · {} · <a href="/runs/{}">the run in the audit</a></p>',
            stamp(turn["started_at"]),
            turn["outcome"],
            turn["run"],
        )
    )
    return h('<li class="turn" data-run="{}">{}</li>', turn["run"], join(parts))


def _message_html(m: dict[str, Any]) -> Markup:
    if m["role"] == "user":
        return h(SAID, "user", "you", m["content"])
    if m["role"] == "tool":
        return h(
            '<div class="tool-result"><span class="who">tool result · {} · {}</span>{}</div>',
            m.get("name") or "?",
            m.get("status") or "success",
            pre(snippet_block(m["content"])),
        )
    calls = join(
        h(CALL, c.get("name", "?"), pre(c.get("args") or {})) for c in m.get("tool_calls") or []
    )
    text = h(SAID, "assistant", "agent", m["content"]) if m["content"] else Markup("")
    return text + calls


def snippet_block(text: str) -> str:
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"


def _saw_html(recalls: list[dict[str, Any]]) -> Markup:
    blocks = [r for r in recalls if r["block"]]
    if not recalls:
        summary, inner = "What the model saw: no recall was recorded", Markup("")
    elif not blocks:
        summary = "What the model saw: no memory block (nothing was relevant)"
        inner = Markup("")
    else:
        plural = "s" if len(blocks) > 1 else ""
        summary = f"What the model saw: {len(blocks)} memory block{plural}"
        inner = join(
            h(
                '<p class="hint">{} · injected {}</p>{}',
                r["agent"],
                join((link(memory_href(i), i) for i in r["injected"]), ", "),
                pre(r["block"], "block"),
            )
            for r in blocks
        )
    return h('<details class="saw"><summary>{}</summary>{}</details>', summary, inner)


def _approval_form(ctx: Ctx, thread_id: str, ask: dict[str, Any]) -> Markup:
    return h(
        '<form method="post" action="/chat/answer" class="approval" role="group" '
        'aria-label="approval">'
        "<p><strong>{}</strong></p>{}"
        '<input type="hidden" name="csrf" value="{}">'
        '<input type="hidden" name="thread" value="{}">'
        '<div class="actions"><button type="submit" name="answer" value="allow" class="primary">'
        'Allow</button><button type="submit" name="answer" value="deny" class="danger">Deny'
        "</button></div></form>",
        ask["description"] or f"{ask['action']} needs your approval",
        pre(ask["args"]),
        ctx.csrf,
        thread_id,
    )


def _send_form(ctx: Ctx, agents: list[str], agent: str, info: Any) -> Markup:
    if info is not None:
        which = h(
            '<input type="hidden" name="agent" value="{}"><span class="hint">agent <strong>{}'
            "</strong> · thread <code>{}</code></span>",
            agent,
            agent,
            info.known_as,
        )
    else:
        which = h(
            '<label>agent <select name="agent">{}</select></label>',
            join(
                h('<option value="{}"{}>{}</option>', a, Markup(" selected" * (a == agent)), a)
                for a in agents
            ),
        )
    return h(
        '<form method="post" action="/chat/send" class="send" id="chat-form">'
        '<input type="hidden" name="csrf" value="{}">'
        '<input type="hidden" name="thread" value="{}">'
        '<label for="chat-text">Message</label>'
        '<textarea id="chat-text" name="text" rows="3" required '
        'placeholder="ask the agent; Enter sends, Shift+Enter is a new line"></textarea>'
        '<div class="actions">{}<button type="submit" class="primary">Send</button></div>'
        '<p class="error" role="alert" id="chat-error" hidden></p></form>',
        ctx.csrf,
        info.known_as if info is not None else "",
        which,
    )


# -- the POSTs -----------------------------------------------------------------------------------


def send_action(ctx: Ctx) -> Any:
    """A message: a run on the operator's thread (a new one when the form names none)."""
    text = str(ctx.params.get("text", "")).strip()
    if not text:
        raise BadRequest("the message is empty: type something to send")
    if len(text) > MAX_TEXT:
        raise BadRequest(f"the message is over {MAX_TEXT} characters")
    tid = ctx.text("thread", 200)
    info = _thread(ctx, tid) if tid else None
    agent = _agent(ctx, info)
    if info is None:
        info = ctx.server.threads.create(agent, owner=ctx.operator)
    body = RunCreate(
        assistant_id=agent,
        input={"messages": [{"role": "user", "content": text}]},
        stream_mode=list(MODES),
    )
    return _respond(ctx, ctx.server.start(ctx.server.new_run(ctx.operator, body, info.known_as)))


def answer_action(ctx: Ctx) -> Any:
    """The person's answer to the approval a thread waits for: Allow runs the tool, Deny
    does not (the run goes on, and the model is told)."""
    choice = ctx.text("answer", 20)
    if choice not in ANSWERS:
        raise BadRequest("answer must be 'allow' or 'deny'")
    tid = ctx.text("thread", 200)
    if not tid:
        raise BadRequest("the form names no thread")
    info = _thread(ctx, tid)
    body = RunCreate(
        assistant_id=info.agent, command=Command(resume=ANSWERS[choice]), stream_mode=list(MODES)
    )
    return _respond(ctx, ctx.server.start(ctx.server.new_run(ctx.operator, body, info.known_as)))


def _respond(ctx: Ctx, run: Any) -> Any:
    """The run as a stream (chat.js asks with ``stream=1``), else, for a form without
    JavaScript, back to the thread's page once the run has ended."""
    from starlette.responses import StreamingResponse

    if ctx.params.get("stream") == "1":
        headers = {"X-Accel-Buffering": "no"}
        return StreamingResponse(_events(ctx, run), media_type="text/event-stream", headers=headers)
    return AfterRun(run, url("/chat", {"thread": run.known_as}), WAIT_S)


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()


async def _events(ctx: Ctx, run: Any) -> AsyncIterator[bytes]:
    import anyio

    from olav.serve.follow import follow

    yield _sse("thread", {"thread": run.known_as, "agent": run.assistant_id})
    seen: set[str] = set()
    async for events in follow(run):
        if not events:
            yield b": heartbeat\n\n"
        for _, kind, data in events:
            for name, payload in translate(kind, data, seen):
                yield _sse(name, payload)
    yield _sse("done", await anyio.to_thread.run_sync(_done, ctx, run))


def translate(kind: str, data: Any, seen: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """A run's event (:class:`olav.serve.run.Run`) as the chat's events; ``seen`` keeps the
    tool calls, results and approvals already sent (a node's update may repeat them)."""
    if kind == "messages" and isinstance(data, list) and data:
        text = str((data[0] or {}).get("content") or "")
        return [("token", {"text": text})] if text else []
    if kind == "error" and isinstance(data, dict):
        return [("error", {"message": str(data.get("message") or "the run failed")})]
    if kind != "updates" or not isinstance(data, dict):
        return []
    out: list[tuple[str, dict[str, Any]]] = []
    for node, value in data.items():
        if node == "__interrupt__":
            found = [(f"ask:{a.get('id')}", "approval", _ask_json(a)) for a in value or []]
        else:
            messages = value.get("messages") if isinstance(value, dict) else None
            found = [e for m in messages or [] if isinstance(m, dict) for e in _message_events(m)]
        for key, name, payload in found:
            if key not in seen:
                seen.add(key)
                out.append((name, payload))
    return out


def _ask_json(ask: Any) -> dict[str, Any]:
    ask = ask if isinstance(ask, dict) else {}
    return _approval_json(ask.get("id"), ask.get("value"))


def _message_events(m: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(key, event, data) of a message in a node's update: the tool calls of an AI message,
    or a tool's result."""
    from olav.audit.export import redact_again

    if m.get("type") == "ai":
        return [
            (
                f"call:{c.get('id')}",
                "tool_call",
                redact_again({"id": c.get("id"), "name": c.get("name"), "args": c.get("args")}),
            )
            for c in m.get("tool_calls") or []
        ]
    if m.get("type") != "tool":
        return []
    result = {
        "id": m.get("tool_call_id"),
        "name": m.get("name"),
        "status": m.get("status") or "success",
        "content": snippet_block(_text(m.get("content"))),
    }
    return [(f"result:{m.get('tool_call_id')}", "tool_result", redact_again(result))]


def _text(content: Any) -> str:
    from olav.serve.http import HTTPError, content_text

    try:
        return content_text(content)
    except HTTPError:
        return str(content)


def _done(ctx: Ctx, run: Any) -> dict[str, Any]:
    """The end of a run: its outcome, answer and what its model calls saw (the audit's)."""
    from olav.audit.export import redact_again

    recalls: list[dict[str, Any]] = []
    if run.audit_run_id:  # not in the audit (its write failed, or not theirs): nothing shown
        recorded = ctx.audit.run(run.audit_run_id)
        recalls = [_recall_json(r) for r in recorded.recalls] if recorded else []
    out = {
        "status": run.status,
        "outcome": run.outcome,
        "answer": run.answer,
        "error": run.error,
        "run": run.audit_run_id,
        "thread": run.known_as,
        "waiting": bool(run.interrupts),
        "recalls": recalls,
    }
    result: dict[str, Any] = redact_again(out)
    return result
