"""The rescue layer in the agent loop: :class:`RescueMiddleware`.

It wraps each model call, inside the tool guard, so it sees the tools the agent is offered and
a salvaged call reaches the guard like a native one (allow-list, y/N approval, consent, audit).
After the model answers it, in order:

1. **counts** the call and its tokens (``usage_metadata``: Ollama's ``prompt_eval_count``),
   and warns once when the prompt filled the context window;
2. **keeps reasoning apart**: ``<think>`` text leaves the content for
   ``additional_kwargs["reasoning_content"]``, and the audit keeps it as a ``reasoning`` message;
3. **repairs native calls' arguments** by each tool's schema;
4. **salvages** a message that has no structured call but writes one as text: the message is
   replaced by a proper tool call, so the model's next step and the person see a normal turn;
5. **nudges once** a message that would end the run ``narrated``: the model is asked again,
   for this call only, with a short directive that names the tool;
   a message that stopped on the **token limit** (``done_reason``/``finish_reason``
   ``length``) runs nothing, structured calls included: the model is asked once to send its
   call again, and when that is cut too the person is told the limit and how to raise it;
6. **guards against loops**: a call repeated ``runtime.loop_limit`` times with the same
   arguments is not run again; the model is told so once, and the run stops if it repeats.

Every hook has a sync and an async version.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage

from olav.audit.events import (
    CONTEXT_EVENT,
    CUT_EVENT,
    LOOP_EVENT,
    NUDGE_EVENT,
    REASK_EVENT,
    SALVAGE_EVENT,
)
from olav.audit.events import REASONING_ROLE as REASONING_ROLE  # for the runner's import
from olav.audit.events import RUN_STATS_EVENT as RUN_STATS_EVENT  # for the runner's import
from olav.core.log import get_logger
from olav.memory.store.token_counts import estimate_tokens
from olav.runtime.middleware import RunContext, last_human_index, message_text
from olav.runtime.outcome import (
    DELEGATION,
    DIRECTIVE_CATEGORIES,
    Directive,
    directive,
    named_tools,
    narrates,
)
from olav.runtime.rescue.asked import extra_body, with_asked
from olav.runtime.rescue.counts import call_tokens, cut_warning
from olav.runtime.rescue.markers import scrub
from olav.runtime.rescue.reask import reask
from olav.runtime.rescue.response import (
    Ask,
    Done,
    ai_of,
    call_key,
    cut_short,
    nudge_text,
    rebuilt,
    replace_ai,
    tool_schemas,
)
from olav.runtime.rescue.salvage import Salvage, asks_for_example, salvage
from olav.runtime.rescue.schema import coerce
from olav.runtime.rescue.think import split_reasoning

log = get_logger("runtime.rescue")

_BLOCK = re.compile(r"^\s*<relevant-memories>.*?</relevant-memories>\s*", re.S)
TRUNCATION_SHARE = 0.98  # a prompt this close to num_ctx was cut by the server


@dataclass(frozen=True)
class RescuePolicy:
    """The rescue layer's settings (``runtime.*`` and ``llm.num_ctx``)."""

    salvage: bool = True
    nudge: bool = True
    reask: bool = True
    loop_limit: int = 3
    max_model_calls: int = 24
    num_ctx: int = 16384
    provider: str = "ollama"
    num_predict: int = 4096

    @classmethod
    def for_config(cls, cfg: Any, *, window: int | None = None) -> RescuePolicy:
        """``window``: the model's window as its server reports it (olav.llm.window)."""
        return cls(
            salvage=bool(cfg["runtime.salvage"]),
            nudge=bool(cfg["runtime.nudge"]),
            reask=bool(cfg["runtime.reask"]),
            loop_limit=int(cfg["runtime.loop_limit"]),
            max_model_calls=int(cfg["runtime.max_model_calls"]),
            num_ctx=window or int(cfg["llm.num_ctx"]),
            provider=str(cfg["llm.provider"]),
            num_predict=int(cfg["llm.num_predict"]),
        )


class RescueMiddleware(AgentMiddleware):
    def __init__(self, agent_name: str, run: RunContext, policy: RescuePolicy) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.run = run
        self.policy = policy
        self._schemas: dict[str, dict[str, Any]] = {}
        self._warned_context = False
        self._unread: Salvage | None = None  # this message's call olav could not read
        self._request: Any = None  # this call's request, for an estimate when none is counted
        self._last_call = (0, 0)  # the last call's (prompt, answer) tokens

    @property
    def name(self) -> str:
        return f"olav_rescue_{self.agent_name}"

    # -- the hooks --------------------------------------------------------------------------

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        steps = self._steps(request)
        reply = next(steps)
        try:
            while True:
                if isinstance(reply, Done):
                    return reply.response
                try:
                    answer = handler(reply.request)
                except Exception as exc:
                    if not reply.tolerant:
                        raise
                    reply = steps.throw(exc)
                    continue
                reply = steps.send(answer)
        except StopIteration as stop:  # pragma: no cover - _steps always ends with Done
            return stop.value

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        steps = self._steps(request)
        reply = next(steps)
        while True:
            if isinstance(reply, Done):
                return reply.response
            try:
                answer = await handler(reply.request)
            except Exception as exc:
                if not reply.tolerant:
                    raise
                reply = steps.throw(exc)
                continue
            reply = steps.send(answer)

    # -- one model call, as a generator of the requests it makes (sync and async share it) --

    def _steps(self, request: Any) -> Generator[Any, Any, None]:
        state = self.run.rescue
        if state.model_calls >= self.policy.max_model_calls:
            state.loop_stopped = state.loop_stopped or "max_model_calls"
            limit = self.policy.max_model_calls
            text = f"Stopped: this run reached runtime.max_model_calls ({limit})."
            self._audit(LOOP_EVENT, {"reason": "max_model_calls", "limit": state.model_calls})
            yield Done(AIMessage(content=text))
            return
        request = self._with_thinking(request)
        request = with_asked(request, self.run.asked, self.policy.provider, self.policy.num_predict)
        self._request = request
        tools = tool_schemas(list(request.tools or []), self._schemas)
        self._check_fit(request)
        response = yield Ask(request)
        msg = self._account(response)
        if msg is None:
            yield Done(response)
            return
        if cut_short(msg):
            msg = yield from self._cut(request, msg, tools)
            yield Done(replace_ai(response, msg))
            return
        self._unread = None
        msg = self._clean(msg, request, tools)
        if not msg.tool_calls and self._unread is not None and self.policy.reask:
            msg = yield from self._reask(request, msg, tools, self._unread)
        if msg.tool_calls:
            repeated = self._repeated(request, msg)
            if repeated:
                msg = yield from self._break_loop(request, msg, repeated, tools)
        elif self._would_narrate(request, msg, tools):
            msg = yield from self._nudge(request, msg, tools)
        yield Done(replace_ai(response, msg))

    def _with_thinking(self, request: Any) -> Any:
        """This turn's thinking switch, as the provider takes it."""
        thinking = self.run.thinking
        if thinking is None:
            return request
        settings = dict(getattr(request, "model_settings", None) or {})
        if self.policy.provider == "ollama":
            settings["reasoning"] = thinking
        elif self.policy.provider == "openai":
            body = extra_body(request, settings)  # the model's max_tokens kept beside it
            body["chat_template_kwargs"] = {"enable_thinking": thinking}
            settings["extra_body"] = body
        else:
            return request
        return request.override(model_settings=settings)

    def _check_fit(self, request: Any) -> None:
        """Warn once, before the call, when the prompt will not fit the window even after
        compression (a huge tool result, a long pasted file): the server would cut it."""
        if self._warned_context:
            return

        parts = [message_text(m) for m in request.messages]
        system = getattr(request, "system_message", None)
        if system is not None:
            parts.append(message_text(system))
        else:
            parts.append(str(getattr(request, "system_prompt", None) or ""))
        estimate = sum(estimate_tokens(p) + 4 for p in parts)
        if estimate < self.policy.num_ctx:
            return
        self._warned_context = True
        detail = {"estimated_tokens": estimate, "num_ctx": self.policy.num_ctx, "before": True}
        self._audit(CONTEXT_EVENT, detail)
        self.run.warn(
            f"this prompt (about {estimate} tokens) will not fit the model's window "
            f"({self.policy.num_ctx} tokens): the server will cut older text. Raise llm.num_ctx "
            "(and the server's window), or /new"
        )

    def _account(self, response: Any) -> AIMessage | None:
        """Count the call and its tokens; the model's message (None if it sent none)."""
        state = self.run.rescue
        state.model_calls += 1
        msg = ai_of(response)
        if msg is None:
            return None
        prompt, written = call_tokens(state, self._request, msg)
        self._last_call = (prompt, written)
        state.tokens_in += prompt
        state.tokens_out += written
        state.last_prompt = prompt or state.last_prompt
        if prompt >= TRUNCATION_SHARE * self.policy.num_ctx and not self._warned_context:
            self._warned_context = True
            detail = {"prompt_tokens": prompt, "num_ctx": self.policy.num_ctx}
            self._audit(CONTEXT_EVENT, detail)
            self.run.warn(
                f"the prompt filled the model's window ({prompt} of {self.policy.num_ctx} "
                "tokens): the server cut older text. Raise llm.num_ctx, or /new"
            )
        return msg

    def _clean(self, msg: AIMessage, request: Any, tools: dict[str, dict[str, Any]]) -> AIMessage:
        """Reasoning out of the content; native arguments repaired; a call written as text
        salvaged."""
        content = message_text(msg)
        answer, thought = split_reasoning(content)
        answer = scrub(answer)  # no family's control tokens in what the person sees
        kept = str(msg.additional_kwargs.get("reasoning_content") or "")
        reasoning = "\n\n".join(t for t in (kept, thought) if t)
        if reasoning:
            self.run.rescue.reasoning.append(reasoning)
        if msg.tool_calls:
            return self._repaired(msg, answer, reasoning, tools)
        if not self.policy.salvage or not tools:
            return rebuilt(msg, answer, reasoning, [])
        found = salvage(content, tools, request=self._request_text(request), reasoning=kept)
        if not found.calls:
            if found.unfinished or found.invalid:
                self._unread = found
            return rebuilt(msg, found.answer if found.unfinished else answer, reasoning, [])
        self._record_salvage(found)
        calls = [
            {"name": c.name, "args": c.args, "id": f"salvaged_{uuid.uuid4().hex[:12]}"}
            for c in found.calls
        ]
        return rebuilt(msg, found.answer, reasoning, calls)

    def _repaired(
        self, msg: AIMessage, answer: str, reasoning: str, tools: dict[str, dict[str, Any]]
    ) -> AIMessage:
        calls: list[dict[str, Any]] = []
        for call in msg.tool_calls:
            schema = tools.get(call["name"])
            if schema is not None:
                checked = coerce(call.get("args") or {}, schema)
                if checked.ok and checked.repaired:
                    call = {**call, "args": checked.args}
            calls.append(dict(call))
        return rebuilt(msg, answer, reasoning, calls)

    def _record_salvage(self, found: Salvage) -> None:
        for call in found.calls:
            entry = {
                "agent": self.agent_name,
                "tool": call.name,
                "family": call.family,
                "in_reasoning": call.in_reasoning,
            }
            self.run.rescue.salvaged.append(entry)
            self._audit(SALVAGE_EVENT, entry)

    # -- the nudge --------------------------------------------------------------------------

    def _request_text(self, request: Any) -> str:
        """The person's (or the delegating agent's) message, without the recall block that
        AutoRecall put in front of it for this call."""
        messages = list(request.messages)
        idx = last_human_index(messages)
        text = message_text(messages[idx]) if idx is not None else ""
        return _BLOCK.sub("", text, count=1).strip()

    def _would_narrate(
        self, request: Any, msg: AIMessage, tools: dict[str, dict[str, Any]]
    ) -> bool:
        if not self.policy.nudge or self.run.rescue.nudged or not tools:
            return False
        text = self._request_text(request)
        if asks_for_example(text, tools):  # showing a call is the answer, not a narration
            return False
        offered = set(tools) - {"task"}
        if any(ev.tool != DELEGATION for ev in self.run.tool_events):
            return False  # a tool ran: the answer may say so truly
        # the answer itself must announce, start or claim an action (or name a tool it was
        # offered): a plain answer ("Noted.", a summary, a question back) is never asked again,
        # whatever the request or the recalled guides suggest
        return narrates(message_text(msg), offered)

    def _named(self, text: str, offered: set[str]) -> list[str]:
        state = self.run.rescue
        directives = [
            directive(c.hit.record)
            for result in self.run.recalls[state.first_recall :]
            for c in result.injected
            if c.hit.record.category in DIRECTIVE_CATEGORIES
        ]
        return named_tools(directives, text, offered)

    def _nudge(
        self, request: Any, msg: AIMessage, tools: dict[str, dict[str, Any]]
    ) -> Generator[Any, Any, AIMessage]:
        text = self._request_text(request)
        offered = set(tools) - {"task"}
        named = self._named(text, offered) or named_tools(
            [Directive(message_text(msg))], text, offered
        )
        note = nudge_text(named, sorted(offered))
        self.run.rescue.nudged.append(",".join(named))
        self._audit(
            NUDGE_EVENT,
            {"agent": self.agent_name, "tools": named, "narration": message_text(msg)[:500]},
        )
        messages = [*request.messages, msg, HumanMessage(content=note)]
        response = yield Ask(request.override(messages=messages))
        again = self._account(response)
        if again is None:
            return msg
        again = self._clean(again, request, tools)
        recovered = bool(again.tool_calls)
        self._audit(NUDGE_EVENT, {"agent": self.agent_name, "recovered": recovered})
        # a second narration is not shown or kept: the person sees the first answer once,
        # not the same announcement twice ("I will now back up …I will now back up …")
        return again if recovered else msg

    # -- the constrained re-ask -------------------------------------------------------------

    def _reask(
        self, request: Any, msg: AIMessage, tools: dict[str, dict[str, Any]], found: Salvage
    ) -> Generator[Any, Any, AIMessage]:
        """A call olav could not read safely, asked for once more under the engine's
        constraint (olav.runtime.rescue.reask); once a run."""
        state = self.run.rescue
        if state.reasked:
            return msg
        wanted = [*found.unfinished, *(i.name for i in found.invalid)]
        problems = [p for i in found.invalid for p in i.problems]
        why = "; ".join(problems[:3]) if problems else "it was cut off or never closed"

        def audit(detail: dict[str, Any]) -> None:
            state.reasked.append(detail)
            self._audit(REASK_EVENT, {"agent": self.agent_name, **detail})

        call = yield from reask(request, msg, tools, wanted, why, self._account, audit)
        if call is None:
            return msg
        return rebuilt(msg, "", "", [call])

    # -- the token limit ---------------------------------------------------------------------

    def _cut(
        self, request: Any, msg: AIMessage, tools: dict[str, dict[str, Any]]
    ) -> Generator[Any, Any, AIMessage]:
        """A message that stopped on the token limit. Nothing in it runs: not its structured
        calls (the server may have closed the last one itself), not a call written as text
        (the model never finished it, and its siblings may be lost). When it held a call, the
        model is asked once to send it again; the person is told when it is cut again."""
        state = self.run.rescue
        state.cut_short += 1
        content = message_text(msg)
        answer, thought = split_reasoning(content, finished=False)
        kept = str(msg.additional_kwargs.get("reasoning_content") or "")
        reasoning = "\n\n".join(t for t in (kept, thought) if t)
        if reasoning:
            state.reasoning.append(reasoning)
        found = salvage(content, tools, reasoning=kept, finished=False) if tools else Salvage()
        names = [c["name"] for c in msg.tool_calls] + [c.name for c in found.calls]
        names += found.unfinished
        limit = self.policy.num_predict
        detail = {"agent": self.agent_name, "calls": names, "num_predict": limit}
        self._audit(CUT_EVENT, {**detail, "retried": state.cut_short == 1 and bool(names)})
        shown = found.answer if tools else answer
        if not names or state.cut_short > 1:
            what = f": {', '.join(sorted(set(names)))} did not run" if names else ""
            self.run.warn(cut_warning(limit, self._last_call, what, self.policy.provider))
            if names and not shown.strip():  # what the person and the thread keep of the turn
                shown = f"(The answer was cut off at the model's token limit{what}.)"
            return rebuilt(msg, shown, reasoning, [])
        note = (
            f"[olav] Your last message was cut off at the token limit ({limit} tokens) before "
            "it ended, so its tool call did not run. Send the tool call again, complete, as one "
            "tool call; keep its arguments short (write long content in parts)."
        )
        plain = rebuilt(msg, shown, "", [])
        response = yield Ask(
            request.override(messages=[*request.messages, plain, HumanMessage(content=note)])
        )
        again = self._account(response)
        if again is None:
            return rebuilt(msg, shown, reasoning, [])
        if cut_short(again):
            return (yield from self._cut(request, again, tools))
        return self._clean(again, request, tools)

    # -- the loop guard ---------------------------------------------------------------------

    def _repeated(self, request: Any, msg: AIMessage) -> str:
        """The tool of a call in ``msg`` that this run already made ``loop_limit`` times
        with the same arguments ('' when none)."""
        seen: dict[str, int] = {}
        idx = last_human_index(list(request.messages))
        for old in list(request.messages)[(idx or 0) :]:
            for call in getattr(old, "tool_calls", None) or []:
                key = call_key(call["name"], call.get("args"))
                seen[key] = seen.get(key, 0) + 1
        for call in msg.tool_calls:
            if seen.get(call_key(call["name"], call.get("args")), 0) >= self.policy.loop_limit:
                return str(call["name"])
        return ""

    def _break_loop(
        self, request: Any, msg: AIMessage, tool: str, tools: dict[str, dict[str, Any]]
    ) -> Generator[Any, Any, AIMessage]:
        limit = self.policy.loop_limit
        self._audit(LOOP_EVENT, {"agent": self.agent_name, "tool": tool, "limit": limit})
        note = (
            f"[olav] You have called {tool} {limit} times with the same arguments and the result "
            "will not change. Do not call it again with them: answer from the results above, "
            "or change the arguments."
        )
        plain = rebuilt(msg, message_text(msg), "", [])
        response = yield Ask(
            request.override(messages=[*request.messages, plain, HumanMessage(note)])
        )
        again = self._account(response)
        again = self._clean(again, request, tools) if again is not None else None
        if again is not None and not (again.tool_calls and self._repeated(request, again)):
            return again
        self.run.rescue.loop_stopped = tool
        self._audit(LOOP_EVENT, {"agent": self.agent_name, "tool": tool, "stopped": True})
        return AIMessage(
            content=f"Stopped: the model kept calling {tool} with the same arguments "
            f"({limit} times) although the result did not change.",
            id=msg.id,
        )

    def _audit(self, kind: str, detail: dict[str, Any]) -> None:
        if self.run.audit:
            try:
                self.run.audit.event(self.run.run_id, kind, detail)
            except Exception as exc:  # the audit must never break the run
                log.warning("audit event %s not written: %s", kind, exc)
