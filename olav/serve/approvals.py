"""Approvals on the server: what an interrupt asks (LangChain v1's human-in-the-loop request,
with agent-inbox's older keys), how a client's answer is read and checked, and *Mark as
resolved* (``command: {"goto": "__end__"}``), which ends a thread's wait without running the
tool."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from olav.runtime.middleware import ApprovalDecision

from olav.audit.events import DENIAL_EVENT
from olav.serve.http import HTTPError, shown
from olav.serve.run import Run

RESOLVED_TEXT = "(the approval marked as resolved: nothing ran)"  # the audit's request


def resolved_note(name: str) -> str:
    """What the thread keeps, and the model reads, for a tool call whose approval a person
    marked as resolved."""
    return (
        f"Error: {name} did not run: the user marked its approval as resolved without approving it."
    )


def end_wait(session: Any, run: Run) -> Any:
    """End the wait of a thread paused at an approval, without running the tool (a run with
    ``command: {"goto": "__end__"}``, agent-chat-ui's *Mark as resolved*).

    The pending tasks are ended as LangGraph's ``update_state(None, as_node=END)`` ends them
    (agent-inbox's resolve; a run with ``Command(goto=END)`` alone would run the waiting node
    again, and it would ask again): the thread is idle. Each tool call left without a result
    gets one that says the person marked it resolved (the model reads it on the next turn,
    instead of deepagents' "did not complete"). Audited as a run of the thread with a
    ``denial`` per waiting action, ``decision: "resolve"``: the token's operator decided, and
    the tool did not run."""
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.constants import END

    from olav.memory.store.scopes import user_name
    from olav.runtime.runner import TurnResult

    graph = session.built.graph
    config: dict[str, Any] = {"configurable": {"thread_id": run.thread_id}}
    waiting = list(graph.get_state(config).interrupts or ())
    claim = uuid.uuid4().hex
    session.threads.claim(run.thread_id, claim, session.agent_name, user_name(session.ws.config))
    audit = session.audit
    audit_id = audit.start_run(
        session.agent_name,
        session.session_id,
        RESOLVED_TEXT,
        session.built.model_name,
        thread_id=run.thread_id,
    )
    try:
        audit.message(audit_id, "user", RESOLVED_TEXT)
        for asked in waiting:
            value = asked.value if isinstance(asked.value, dict) else {}
            for action in value.get("action_requests") or []:
                detail = {"tool": action.get("name"), "args": action.get("args") or {}}
                audit.event(
                    audit_id,
                    DENIAL_EVENT,
                    {**detail, "decision": "resolve", "agent": run.assistant_id},
                )
        graph.update_state(config, None, as_node=END)  # the pending tasks end here
        messages = list((graph.get_state(config).values or {}).get("messages") or [])
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        notes = [
            ToolMessage(
                content=resolved_note(call["name"]),
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
            for call in (last.tool_calls if last is not None else [])
            if call.get("id") and call["id"] not in answered
        ]
        if notes:  # written as the tools node's results, then that step ended as well
            graph.update_state(config, {"messages": notes}, as_node="tools")
            graph.update_state(config, None, as_node=END)
        state = graph.get_state(config)
        session.threads.sync(run.thread_id, list((state.values or {}).get("messages") or []))
        audit.end_run(audit_id, "completed")
    except Exception as exc:
        audit.end_run(audit_id, "error", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        session.threads.release(run.thread_id, claim)
    run.on_step("values", state.values)
    return TurnResult(run_id=audit_id, answer="", status="completed")


def approval_request(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What an interrupt asks, in LangChain v1's human-in-the-loop shape (a HITLRequest, which
    agent-chat-ui and deep-agents-ui render): the action, its arguments and description, and
    the decisions it takes: approve and reject, and edit for a tool whose arguments a person
    may change (never a memory commit, whose preview is what they agree to). The keys of
    agent-inbox's older shape (a HumanInterrupt) are there too, for clients that read it."""
    from olav.runtime.tools import NEEDS_CONSENT

    consent = name in NEEDS_CONSENT
    if consent:
        subject = str(args.get("subject", ""))
        text = f"{name} would store {subject} in memory:\n{args.get('preview', '')}"
    else:
        text = f"{name} needs your approval before it runs."
    allowed = ["approve", "reject"] if consent else ["approve", "edit", "reject"]
    return {
        "action_requests": [{"name": name, "args": args, "description": text}],
        "review_configs": [{"action_name": name, "allowed_decisions": allowed}],
        "action_request": {"action": name, "args": args},
        "config": {
            "allow_accept": True,
            "allow_ignore": True,
            "allow_respond": True,
            "allow_edit": not consent,
        },
        "description": text,
    }


_YES = {"y", "yes", "accept", "approve", "approved", "allow", "true", "ok"}
_NO = {"n", "no", "ignore", "reject", "rejected", "deny", "denied", "false", "cancel"}
ANSWER_SHAPES = (
    '{"decisions": [{"type": "approve"}]}, {"decisions": [{"type": "edit", "edited_action": '
    '{"name": TOOL, "args": {...}}}]}, {"decisions": [{"type": "reject", "message": "why"}]}, '
    'agent-inbox\'s [{"type": "accept" | "ignore" | "response" | "edit", "args": ...}], '
    'or "yes" / "no"'
)


class AnswerError(ValueError):
    """A client's answer to an approval that olav cannot read (the request's 422)."""


@dataclass(frozen=True)
class Answer:
    """A person's answer to an approval, read: ``kind`` approve, edit or reject; ``name`` and
    ``args`` of an edit; ``message`` of a rejection (their words for the model)."""

    kind: str
    name: str = ""
    args: dict[str, Any] | None = None
    message: str = ""

    def decision(self) -> ApprovalDecision:
        from olav.runtime.middleware import ApprovalDecision

        return ApprovalDecision(
            approved=self.kind != "reject",
            args=self.args if self.kind == "edit" else None,
            message=self.message,
        )


def read_answer(value: Any) -> Answer:
    """A client's answer to an approval, in any shape olav reads: LangChain v1's
    ``{"decisions": [DECISION]}`` (or one DECISION), agent-inbox's ``[{"type": "accept"}]``
    and its other responses, ``{"approve": bool}``, ``true`` / ``false``, ``"yes"`` /
    ``"no"``. :class:`AnswerError`, naming the shapes, for anything else: an answer is never
    taken as a no because it could not be read."""
    if isinstance(value, dict) and "decisions" in value:
        decisions = value["decisions"]
        if not isinstance(decisions, list) or len(decisions) != 1:
            count = len(decisions) if isinstance(decisions, list) else "not a list"
            raise AnswerError(
                f"resume.decisions must be a list of one decision (one action waits for it), "
                f"not {count}; send " + ANSWER_SHAPES
            )
        return _decision_of(decisions[0], "resume.decisions[0]")
    if isinstance(value, list):
        if len(value) != 1:
            raise AnswerError(
                f"resume is a list of {len(value)} answers; one action waits for one: send "
                + ANSWER_SHAPES
            )
        return _decision_of(value[0], "resume[0]")
    return _decision_of(value, "resume")


def _decision_of(value: Any, where: str) -> Answer:
    if isinstance(value, bool):
        return Answer("approve" if value else "reject")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _YES:
            return Answer("approve")
        if word in _NO:
            return Answer("reject")
        raise AnswerError(
            f"{where} {value[:40]!r} is neither a yes nor a no; send " + ANSWER_SHAPES
        )
    if not isinstance(value, dict):
        raise AnswerError(f"{where} must be a decision object; send " + ANSWER_SHAPES)
    if "approve" in value and "type" not in value:
        if not isinstance(value["approve"], bool):
            raise AnswerError(f"{where}.approve must be true or false")
        return Answer("approve" if value["approve"] else "reject")
    kind = value.get("type")
    if kind in ("approve", "accept"):
        return Answer("approve")
    if kind in ("reject", "ignore", "response"):
        # agent-inbox's "response" is the person's reply instead of the action: a no, with
        # their words for the model
        said = value.get("message") if kind != "response" else value.get("args")
        if said is not None and not isinstance(said, str):
            field_name = "args" if kind == "response" else "message"
            raise AnswerError(f"{where}.{field_name} must be text (the person's words)")
        return Answer("reject", message=(said or "").strip())
    if kind == "edit":
        action = value.get("edited_action")
        if action is None and isinstance(value.get("args"), dict):  # agent-inbox's edit
            inbox = value["args"]
            action = {"name": inbox.get("action"), "args": inbox.get("args")}
        if not isinstance(action, dict):
            raise AnswerError(
                f'{where} is an edit without edited_action: send {{"type": "edit", '
                '"edited_action": {"name": TOOL, "args": {...}}}'
            )
        name, args = action.get("name"), action.get("args")
        if not isinstance(name, str) or not isinstance(args, dict):
            raise AnswerError(
                f"{where}.edited_action must have a name (the tool) and args (an object)"
            )
        return Answer("edit", name=name, args=args)
    if kind == "respond":
        raise AnswerError(
            f"{where}: 'respond' is not a decision olav offers (a tool's result is the tool's); "
            "send approve, edit or reject"
        )
    shown = str(kind)[:40] if kind is not None else "no type"
    raise AnswerError(f"{where} has {shown!r}, which is not a decision; send " + ANSWER_SHAPES)


def check_answer(answer: Answer, asked: Any) -> None:
    """An answer against the interrupt it answers (its value, as approval_request made it):
    an edit must be offered for that action and keep its name."""
    if answer.kind != "edit" or not isinstance(asked, dict):
        return
    requests = asked.get("action_requests") or []
    configs = asked.get("review_configs") or []
    name = str(requests[0].get("name")) if requests and isinstance(requests[0], dict) else ""
    allowed = configs[0].get("allowed_decisions", []) if configs else []
    if "edit" not in allowed:
        raise AnswerError(
            f"{name or 'this action'} takes no edit: its decisions are " + ", ".join(allowed)
        )
    if name and answer.name != name:
        raise AnswerError(
            f"edited_action.name is {answer.name[:60]!r}, but the action waiting is {name!r}: "
            "an edit changes the arguments, not the tool"
        )


def approved(answer: Any) -> bool:
    """Whether a client's answer to an approval is a yes (an approve or an edit)."""
    try:
        return read_answer(answer).kind != "reject"
    except AnswerError:
        return False


END = "__end__"  # LangGraph's END: a command's goto that ends the run where it waits


def command_of(command: Any) -> tuple[Any, bool]:
    """A run's ``command``: the person's answer to an approval (``{"resume": ...}``), or the
    end of the wait (``{"goto": "__end__"}``, agent-chat-ui's *Mark as resolved*): (the
    answer or None, whether it ends the wait). One olav cannot read is a 422 that names the
    shapes it reads, never a no."""
    if command is None:
        return None, False
    if not isinstance(command, dict):
        raise HTTPError(
            422,
            'command must be an object: {"resume": ANSWER} (the answer to an approval) or '
            '{"goto": "__end__"} (end the wait without running the tool)',
        )
    if command.get("update"):
        raise HTTPError(
            422,
            "command.update is not supported: olav's state is the agent's messages; answer "
            'the approval with {"resume": ...} or end it with {"goto": "__end__"}',
        )
    goto = command.get("goto")
    if goto not in (None, [], ""):
        targets = goto if isinstance(goto, list) else [goto]
        for target in targets:
            node = target.get("node") if isinstance(target, dict) else target
            if node != END:
                raise HTTPError(
                    422,
                    f"command.goto {shown(json.dumps(node, default=str), 40)}: olav goes to "
                    f"'{END}' only (end the run where it waits: the tool does not run); the "
                    "agent's own nodes are not a client's to send to",
                )
        if command.get("resume") is not None:
            raise HTTPError(
                422,
                'command has both resume and goto: answer the approval ({"resume": ...}) or '
                'end the wait ({"goto": "__end__"}), not both',
            )
        return None, True
    if "resume" not in command:
        raise HTTPError(
            422,
            'command must have "resume" (the answer to an approval) or "goto": "__end__" '
            "(end the wait without running the tool)",
        )
    if command["resume"] is None:
        raise HTTPError(
            422,
            'command.resume is empty: answer the approval, e.g. {"decisions": [{"type": '
            '"approve"}]} or "no"',
        )
    try:
        read_answer(command["resume"])
    except AnswerError as exc:
        raise HTTPError(422, f"command.resume: {exc}") from None
    return command["resume"], False
