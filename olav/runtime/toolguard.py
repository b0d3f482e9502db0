"""The tool guard: :class:`ToolGuardMiddleware` enforces the agent's tool list, asks a human
before dangerous tools and for consent before a tool that stores for good, audits every call,
adds the lessons that name a tool to that tool's error, and reports progress to the caller's
hooks. Every hook has a sync and an async version."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import ToolMessage

from olav.audit.events import APPROVAL_EVENT, DENIAL_EVENT, TOOL_LESSONS_EVENT
from olav.audit.recorder import ToolCallEntry
from olav.core.errors import OlavError
from olav.core.log import get_logger
from olav.memory.ingest.capture import ToolEvent
from olav.runtime.middleware import ApprovalDecision, RunContext, message_text, stream_note
from olav.runtime.rescue.response import tool_schemas
from olav.runtime.rescue.schema import coerce
from olav.runtime.tools import DANGEROUS, NEEDS_CONSENT, Consent, consent_given

log = get_logger("runtime.tools")
# (id, text) of the lessons that name a tool (Recaller.tool_lessons)
LessonsFor = Callable[[str], list[tuple[str, str]]]
LESSONS_HEADER = "Lessons from earlier runs with this tool:"


class ToolGuardMiddleware(AgentMiddleware):
    def __init__(
        self,
        agent_name: str,
        allowed: set[str],
        subagents: set[str],
        run: RunContext,
        lessons: LessonsFor | None = None,
    ) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.allowed = allowed
        self.subagents = subagents
        self.run = run
        self.lessons = lessons
        self._consents: dict[str, Consent] = {}  # tool call id -> the person's yes
        self._edits: dict[str, dict[str, Any]] = {}  # tool call id -> the person's arguments
        self._schemas: dict[str, dict[str, Any]] = {}

    @property
    def name(self) -> str:
        return f"olav_tool_guard_{self.agent_name}"

    def _visible(self, request: Any) -> Any:
        tools = [
            t
            for t in request.tools
            if (getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else None))
            in self.allowed
        ]
        return request.override(tools=tools)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._visible(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._visible(request))

    def _refuse(self, call: dict[str, Any], tool: Any = None) -> ToolMessage | None:
        name, args = call["name"], call.get("args") or {}
        invalid = self._invalid(name, args, tool) if name in self.allowed else None
        if name not in self.allowed:
            reason = (
                f"Error: tool {name!r} is not available to {self.agent_name}. "
                f"Use one of: {', '.join(sorted(self.allowed))}"
            )
        elif invalid:
            reason = invalid
        elif name == "task" and args.get("subagent_type") not in self.subagents:
            reason = (
                f"Error: unknown sub-agent {args.get('subagent_type')!r}. "
                f"Delegate to one of: {', '.join(sorted(self.subagents))}"
            )
        elif name in NEEDS_CONSENT:
            refused = self._ask_consent(call, tool)
            if refused is None:
                return None
            self.run.rescue.denied.append(name)
            reason = refused
        elif name in DANGEROUS and self.run.approver is not None:
            answer = self._asked(self.run.approver, name, args)
            detail: dict[str, Any] = {"tool": name, "args": args, **_said(answer)}
            invalid = None
            if answer and isinstance(answer, ApprovalDecision) and answer.args is not None:
                edited, invalid = self._checked(name, answer.args, tool)
                if edited != args:
                    detail |= {"edited": True, "edited_args": answer.args}
                    self._edits[call["id"]] = edited
            detail["decision"] = (
                ("edit" if "edited" in detail else "approve")
                if answer and not invalid
                else "reject"
            )
            self._audit_decision(bool(answer) and not invalid, detail)
            if answer and not invalid:
                return None
            self._edits.pop(call["id"], None)
            self.run.rescue.denied.append(name)
            reason = invalid or _denied(name, answer)
        else:
            return None
        return ToolMessage(content=reason, tool_call_id=call["id"], name=name, status="error")

    def _invalid(self, name: str, args: dict[str, Any], tool: Any) -> str | None:
        """The arguments' problems after repair (olav.runtime.rescue.schema): an error that
        names the field, the type and an example, before anyone is asked to approve."""
        if tool is None or name == "task":
            return None
        checked = coerce(args, tool_schemas([tool], self._schemas).get(name) or {})
        if checked.ok:
            return None
        return f"Error: {name} was not run: " + "; ".join(checked.problems)

    def _checked(
        self, name: str, args: dict[str, Any], tool: Any
    ) -> tuple[dict[str, Any], str | None]:
        """A person's edited arguments, repaired by the tool's schema as the model's are, and
        the error that names what is still wrong with them (None: they validate)."""
        if tool is None:
            return dict(args), None
        checked = coerce(args, tool_schemas([tool], self._schemas).get(name) or {})
        if not checked.ok:
            return dict(args), f"Error: {name} was not run: the edited " + "; ".join(
                checked.problems
            )
        return dict(checked.args), None

    def _ask_consent(self, call: dict[str, Any], tool: Any) -> str | None:
        """A consent tool runs only after a person's yes to its preview: None (and the yes
        kept for the call) when given, else the error for the model. With no approver (olav
        ask, cron) nobody can say yes, so it is refused, never auto-approved."""
        name, args = call["name"], call.get("args") or {}
        describe = getattr(tool, "describe", None)
        if describe is None:
            return f"Error: {name} needs a person's confirmation, which is not available here."
        try:
            ask = describe(args)
        except OlavError as exc:
            return f"Error: {exc}"
        except Exception as exc:  # a value for the model, like any tool failure
            return f"Error: {type(exc).__name__}: {exc}"
        approver = self.run.approver
        answer = approver is not None and self._asked(
            approver, name, {**args, "subject": ask.subject, "preview": ask.preview}
        )
        detail = {"tool": name, "subject": ask.subject, "asked": approver is not None}
        self._audit_decision(bool(answer), {**detail, **_said(answer)})
        if not answer:
            if isinstance(answer, ApprovalDecision) and answer.by == "policy":
                return _denied(name, answer)
            said = answer.message if isinstance(answer, ApprovalDecision) else ""
            return f"Error: {ask.refusal}" + (f" The user said: {said}" if said else "")
        self._consents[call["id"]] = Consent(by="chat", subject=ask.subject)
        return None

    def _asked(self, approver: Any, name: str, args: dict[str, Any]) -> bool | ApprovalDecision:
        """The person's answer (a yes or no, or an :class:`ApprovalDecision` that says more);
        the time they took is the run's approval wait, never the tool's time or the model's
        time to its first token."""
        started = time.perf_counter()
        try:
            answer = approver(name, args)
            return answer if isinstance(answer, ApprovalDecision) else bool(answer)
        finally:
            self.run.rescue.approval_s += time.perf_counter() - started

    def _audit_decision(self, approved: bool, detail: dict[str, Any]) -> None:
        if self.run.audit:
            self.run.audit.event(
                self.run.run_id,
                APPROVAL_EVENT if approved else DENIAL_EVENT,
                {**detail, "agent": self.agent_name},
            )

    def _start(self, call: dict[str, Any]) -> float:
        stream_note(
            {"olav": "tool", "agent": self.agent_name, "name": call["name"], "status": "start"}
        )
        if self.run.on_tool_start:
            self.run.on_tool_start(self.agent_name, call["name"], call.get("args") or {})
        return time.perf_counter()

    def _finish(self, call: dict[str, Any], result: Any, started: float) -> None:
        ms = (time.perf_counter() - started) * 1000
        text = message_text(result) if isinstance(result, ToolMessage) else str(result)
        failed = isinstance(result, ToolMessage) and result.status == "error"
        status = "error" if failed else "success"
        note = {"olav": "tool", "agent": self.agent_name, "name": call["name"], "status": status}
        stream_note(note | {"ms": round(ms, 1)})
        self.run.tool_events.append(
            ToolEvent(self.agent_name, call["name"], dict(call.get("args") or {}), text, status)
        )
        if self.run.audit:
            self.run.audit.tool_call(
                self.run.run_id,
                self.agent_name,
                ToolCallEntry(call["name"], call.get("args") or {}, text, status, ms),
            )
        if self.run.on_tool_end:
            self.run.on_tool_end(self.agent_name, call["name"], status, ms)

    def _with_lessons(self, call: dict[str, Any], result: Any) -> Any:
        """A failed tool's error, followed by the lessons that name the tool. The audit and
        the learning loop keep the tool's own output; only the model sees the lessons."""
        failed = isinstance(result, ToolMessage) and result.status == "error"
        if self.lessons is None or not failed:
            return result
        try:
            found = self.lessons(call["name"])
        except Exception as exc:  # memory degrades; the tool's own error still gets through
            log.warning("lessons for %s not read: %s", call["name"], exc)
            return result
        if not found:
            return result
        if self.run.audit:
            detail = {"tool": call["name"], "lessons": [i for i, _ in found]}
            self.run.audit.event(self.run.run_id, TOOL_LESSONS_EVENT, detail)
        note = "\n".join([LESSONS_HEADER, *(f"- {text}" for _, text in found)])
        return result.model_copy(update={"content": f"{message_text(result)}\n\n{note}"})

    def _repaired(self, request: Any) -> Any:
        """The request with its arguments repaired by the tool's schema (when they validate
        that way), so that approval, the audit and the tool all see the same values."""
        call, tool = request.tool_call, request.tool
        if tool is None or call["name"] == "task" or call["name"] not in self.allowed:
            return request
        checked = coerce(call.get("args") or {}, tool_schemas([tool], self._schemas)[call["name"]])
        if not (checked.ok and checked.repaired):
            return request
        return request.override(tool_call={**call, "args": checked.args})

    def _edited(self, request: Any) -> Any:
        """The request with the arguments a person edited at the approval, if they did."""
        edited = self._edits.pop(request.tool_call["id"], None)
        if edited is None:
            return request
        return request.override(tool_call={**request.tool_call, "args": edited})

    def _ready(self, request: Any) -> tuple[Any, float, Any]:
        """The request as it will run (repaired, with a person's edit), when the tool's own
        time started, and the answer to give instead of running it (None: it runs)."""
        request = self._repaired(request)
        call = request.tool_call
        started = self._start(call)
        waited = self.run.rescue.approval_s
        refused = self._refuse(call, request.tool)
        started += self.run.rescue.approval_s - waited  # the person's time is not the tool's
        if refused is not None:
            self._finish(call, refused, started)
            return request, started, refused
        return self._edited(request), started, None

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        request, started, refused = self._ready(request)
        if refused is not None:
            return refused
        call = request.tool_call  # what runs is what the audit keeps (a person's edit)
        with consent_given(self._consents.pop(call["id"], None)):
            result = handler(request)
        self._finish(call, result, started)
        return self._with_lessons(call, result)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        request, started, refused = self._ready(request)
        if refused is not None:
            return refused
        call = request.tool_call
        with consent_given(self._consents.pop(call["id"], None)):
            result = await handler(request)
        self._finish(call, result, started)
        return self._with_lessons(call, result)


def _said(answer: bool | ApprovalDecision) -> dict[str, Any]:
    """What the audit keeps of an answer beyond its yes or no: who decided, their words."""
    if not isinstance(answer, ApprovalDecision):
        return {}
    out: dict[str, Any] = {"by": answer.by} if answer.by != "user" else {}
    return out | ({"message": answer.message} if answer.message else {})


def _denied(name: str, answer: bool | ApprovalDecision) -> str:
    """What the model is told of a no: the user's (with their words, when they gave some),
    or the server's policy, which asked nobody."""
    said = answer.message if isinstance(answer, ApprovalDecision) else ""
    if isinstance(answer, ApprovalDecision) and answer.by == "policy":
        return (
            f"Error: {name} was refused by the server's policy, not by the user, and did not "
            f"run: {said or 'this server does not run it'}. Do not retry it; tell the user."
        )
    if said:
        return f"Error: the user rejected {name} and said: {said}"
    return f"Error: the user denied {name}. Do not retry it; ask what to do instead."
