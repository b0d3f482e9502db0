"""The server's state and what its routes share (:class:`Server`): the workspace, its tokens,
agents, threads, the session pool and the run manager, the request audit, and how a request's
operator, body, thread and run are read. The Agent Protocol's handlers (:mod:`.protocol`), the
OpenAI endpoint (:mod:`.openai_api`), the store API (:mod:`.store_api`) and the console take a
Server; the ASGI app (:mod:`.app`) builds one and routes to them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request

from olav.audit.requests import RequestAudit
from olav.core.config import Workspace
from olav.core.log import flush as flush_log
from olav.core.log import get_logger
from olav.memory.store.roles import Operator
from olav.runtime.threads.model import ThreadInfo
from olav.serve import answers as A
from olav.serve.approvals import AnswerError, check_answer, command_of, read_answer
from olav.serve.http import (
    HTTPError,
    ident,
    input_text,
    iso,
    jsonsafe,
    stream_modes,
    unreadable_text,
)
from olav.serve.limits import Limits, OperatorSlots, TooMany
from olav.serve.pool import SessionPool
from olav.serve.run import Run, dump_values, now_iso
from olav.serve.runs import BusyError, RunManager
from olav.serve.schema import RunCreate, RunRequest

log = get_logger("serve")
MAX_BODY = 1 << 20


# -- the server object --------------------------------------------------------------------------


class Server:
    def __init__(
        self,
        ws: Workspace,
        *,
        auto_approve: bool = False,
        max_body: int = MAX_BODY,
        model: Any = None,
        tokens: Any = None,
    ) -> None:
        from olav.access.tokens import TokenStore
        from olav.audit.db import migrate
        from olav.audit.recorder import settle_orphans
        from olav.runtime.skills import load_agents
        from olav.runtime.threads import ThreadStore

        self.ws = ws
        self.max_body = max_body
        self.limits = Limits.of(ws.config)  # serve.*: what one client may hold (limits.py)
        migrate(ws.audit_path)
        settle_orphans(ws.audit_path)  # runs a killed process left 'running' say so now
        self.tokens = tokens or TokenStore.for_workspace(ws)
        self.threads = ThreadStore.for_workspace(ws)
        self.agents = load_agents(ws)
        self.pool = SessionPool(ws, auto_approve=auto_approve, model=model)
        slots = OperatorSlots(self.limits.runs_per_operator, self.limits.run_queue)
        self.runs = RunManager(self.pool, self.threads, slots)
        self.audit = RequestAudit(ws.audit_path)
        self.started = now_iso()
        self._closed = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.runs.shutdown()
        self.audit.close()
        flush_log()  # SIGTERM ends the process without atexit: the log's queue is written now

    # -- who is asking --------------------------------------------------------------------------

    def operator_of(self, request: Request) -> Operator:
        info = self.token_of(request)
        return Operator(info.operator, info.role)

    def token_of(self, request: Request) -> Any:
        """The live token the request presents (its :class:`~olav.access.tokens.TokenInfo`)."""
        header = request.headers.get("authorization", "")
        presented = header[7:].strip() if header.lower().startswith("bearer ") else ""
        presented = presented or request.headers.get("x-api-key", "").strip()
        if not presented:
            raise HTTPError(401, "missing token: send 'Authorization: Bearer <token>'")
        info = self.tokens.verify(presented)
        if info is None:
            raise HTTPError(401, "invalid or revoked token")
        return info

    def token_live(self, token_id: str) -> bool:
        """Whether the token is still live (not revoked, not gone from tokens.json)."""
        from olav.core.errors import OlavError

        try:
            return bool(self.tokens.find(token_id).live)
        except OlavError:  # gone, or tokens.json unreadable: nobody is checked
            return False

    # -- the pieces the routes share -------------------------------------------------------------

    async def body(self, request: Request) -> dict[str, Any]:
        size = int(request.headers.get("content-length") or 0)
        if size > self.max_body:
            raise HTTPError(413, f"request body over {self.max_body} bytes")
        raw = bytearray()
        async for chunk in request.stream():
            raw.extend(chunk)
            if len(raw) > self.max_body:
                raise HTTPError(413, f"request body over {self.max_body} bytes")
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw, parse_constant=_no_constant)
        except ValueError as exc:
            raise HTTPError(422, f"the body is not valid JSON: {exc.args[0]}") from None
        except RecursionError:
            raise HTTPError(422, "the body is not valid JSON: it is nested too deep") from None
        if not isinstance(data, dict):
            raise HTTPError(422, "the body must be a JSON object")
        # "\ud800" and "\u0000" are the only ways to send text no store keeps; a body
        # without a backslash-u escape or a raw surrogate (\xed) has neither
        if b"\\u" in raw or b"\xed" in raw:
            where = unreadable_text(data)
            if where:
                raise HTTPError(
                    422,
                    f"{where} holds a lone surrogate or a NUL character, which no text can "
                    "keep: send valid Unicode",
                )
        return data

    def agent(self, assistant_id: Any) -> str:
        if not isinstance(assistant_id, str) or not assistant_id:
            known = ", ".join(sorted(self.agents))
            raise HTTPError(422, f"assistant_id is required: one of {known}")
        ident(assistant_id, "assistant_id")
        if assistant_id not in self.agents:
            known = ", ".join(sorted(self.agents))
            raise HTTPError(404, f"no assistant {assistant_id!r}; the assistants are: {known}")
        return assistant_id

    def assistant(self, name: str) -> A.Assistant:
        a = self.agents[name]
        return A.Assistant(
            assistant_id=name,
            graph_id=name,
            name=name,
            description=a.spec.description,
            config={},
            context={},
            metadata={"created_by": "olav", "tools": list(a.spec.tools)},
            version=1,
            created_at=self.started,
            updated_at=self.started,
        )

    def thread(self, operator: str, thread_id: str) -> ThreadInfo:
        """The operator's thread with this id (404 when they have none)."""
        info = self.own_thread(operator, thread_id)
        if info is None:
            raise HTTPError(404, f"no thread {thread_id!r}")
        return info

    def own_thread(self, operator: str, thread_id: str) -> ThreadInfo | None:
        """The operator's thread with exactly this id, None when they have none. Thread ids
        are per operator: another operator's thread with this id is another thread, which
        nothing here finds, so an id reveals nothing. Every route looks a client's thread up
        here, and then uses ``info.id`` (its key) to store and ``info.known_as`` to show."""
        ident(thread_id, "thread_id")
        return self.threads.owned(operator, thread_id) if thread_id else None

    def claimed(self, info: ThreadInfo) -> bool:
        """Whether a live run holds the thread (this server's, or a terminal's in another
        process). The claim of a process that died (a server killed with -9 mid-run) holds
        nothing: the thread's next run takes it over."""
        return bool(info.running) and bool(self.threads.held(info.id))

    def thread_answer(
        self, info: ThreadInfo, *, with_values: bool = True, operator: str = ""
    ) -> A.Thread:
        """The thread as the Agent Protocol shows it; ``with_values``: with its state (and,
        when it waits for an approval, ``interrupted`` and what it waits on)."""
        active = self.runs.active(info.id)
        out = A.Thread(
            thread_id=info.known_as,
            created_at=iso(info.created_at),
            updated_at=iso(info.updated_at),
            metadata={
                **info.metadata,
                "graph_id": info.agent,
                "assistant_id": info.agent,
                "owner": info.owner,
                "name": info.name,
            },
            status="busy" if active is not None or self.claimed(info) else "idle",
            interrupts={},
        )
        if with_values:
            found = self.snapshots(operator or info.owner, info)
            out.values = dump_values(found[0].values) if found else {}
            waiting = list(found[0].interrupts or ()) if found else []
            if waiting and out.status == "idle":
                out.status = "interrupted"
                out.interrupts = {i.id: [{"value": i.value, "id": i.id}] for i in waiting}
        return out

    def snapshots(
        self,
        operator: str,
        info: Any,
        limit: int | None = None,
        *,
        before: str | None = None,
        metadata: dict[str, Any] | None = None,
        checkpoint: str | None = None,
    ) -> list[Any]:
        """The thread's state (``limit`` None; ``checkpoint``: at that checkpoint), or its
        history, newest first, on every branch (``before``: below that checkpoint;
        ``metadata``: the checkpoints whose metadata has those values), read through the
        agent's graph: the checkpoints keep messages as deltas that only the graph that wrote
        them puts back together."""
        if not info.agent or info.agent not in self.agents:
            return []
        with self.pool.session(operator, info.agent) as pooled:
            graph = pooled.session.built.graph
            config: dict[str, Any] = {"configurable": {"thread_id": info.id}}
            if limit is None:
                if checkpoint:
                    config["configurable"]["checkpoint_id"] = checkpoint
                state = graph.get_state(config)
                return [state] if state.created_at else []
            below = {"configurable": {"thread_id": info.id, "checkpoint_id": before}}
            return list(
                graph.get_state_history(
                    config, limit=limit, before=below if before else None, filter=metadata or None
                )
            )

    def state_values(self, operator: str, info: Any) -> dict[str, Any]:
        found = self.snapshots(operator, info)
        return dump_values(found[0].values) if found else {}

    def state_answer(self, thread_id: str, snap: Any) -> A.ThreadState:
        """A checkpoint as the Agent Protocol shows it (None: a thread with none yet);
        ``thread_id``: the id its owner knows (``info.known_as``), which its config and its
        parent's name instead of the key."""
        if snap is None:
            return A.ThreadState(
                values={},
                next=[],
                tasks=[],
                metadata={},
                created_at=None,
                checkpoint=A.Checkpoint.of(thread_id, {}),
                parent_checkpoint=None,
                interrupts=[],
            )
        cfg = (snap.config or {}).get("configurable", {})
        parent = (snap.parent_config or {}).get("configurable") if snap.parent_config else None
        return A.ThreadState(
            values=dump_values(snap.values),
            next=list(snap.next or ()),
            tasks=[_task_json(t) for t in (snap.tasks or ())],
            metadata=jsonsafe(dict(snap.metadata or {})),
            created_at=snap.created_at,
            checkpoint=A.Checkpoint.of(thread_id, cfg),
            parent_checkpoint=A.Checkpoint.of(thread_id, parent) if parent else None,
            interrupts=[{"value": jsonsafe(i.value), "id": i.id} for i in (snap.interrupts or ())],
        )

    def new_run(
        self,
        operator: str,
        body: RunCreate,
        thread_id: str | None,
        *,
        default_modes: Sequence[str] = ("values",),
    ) -> Run:
        """A run from an Agent Protocol body (its input's last human message is the
        request): the one way a run starts, for the routes, the console and ``/v1``."""
        agent = self.agent(body.assistant_id)
        command = body.command.model_dump(exclude_unset=True) if body.command else None
        resume, resolve = command_of(command)
        answers = resume is not None or resolve  # the run answers the thread's approval
        checkpoint = _checkpoint_of(body)
        again = checkpoint is not None and body.input in (None, {})
        text = "" if answers or again else input_text(body.input)
        disconnect = body.on_disconnect or "continue"
        modes = stream_modes(body.stream_mode, default_modes)
        strategy = body.multitask_strategy or "reject"
        metadata = body.metadata
        stateless = thread_id is None
        if answers and stateless:
            raise HTTPError(
                409,
                "a stateless run has no thread that waits for an answer: resume on "
                "/threads/{thread_id}/runs",
            )
        nothing = "resolve" if resolve else "resume"
        if checkpoint is not None and (stateless or body.if_not_exists == "create"):
            exists = not stateless and self.own_thread(operator, str(thread_id)) is not None
            if not exists:
                raise HTTPError(404, f"a new thread has no checkpoint {checkpoint!r}")
        info: ThreadInfo | None = None
        if thread_id is None:
            info = self.threads.create(agent, uuid.uuid4().hex, owner=operator)
        else:
            info = self.own_thread(operator, thread_id)
            if info is None:  # whether another operator has this id changes nothing here
                if body.if_not_exists != "create":
                    raise HTTPError(404, f"no thread {thread_id!r}")
                if answers:  # a new thread waits for nothing
                    raise HTTPError(
                        409,
                        f"thread {thread_id} waits for no answer: there is nothing to {nothing}",
                    )
                # the operator's own, made now (or by another of their requests meanwhile)
                info = self.threads.create(agent, thread_id, owner=operator)
            elif answers:
                found = self.snapshots(operator, info)
                waiting = list(found[0].interrupts or ()) if found else []
                if not waiting:
                    raise HTTPError(
                        409,
                        f"thread {thread_id} waits for no answer: there is nothing to {nothing}",
                    )
                # agent-chat-ui sends the checkpoint it shows with every run, an answer's
                # too: the one where the thread waits is its latest
                head = ((found[0].config or {}).get("configurable") or {}).get("checkpoint_id")
                if checkpoint is not None and checkpoint != head:
                    raise HTTPError(
                        409,
                        f"thread {thread_id} waits for its answer at checkpoint {head}, not at "
                        f"{checkpoint}: answer at the thread's latest checkpoint (reload it)",
                    )
                checkpoint = None
                try:
                    if resume is not None:
                        check_answer(read_answer(resume), waiting[0].value)
                except AnswerError as exc:
                    raise HTTPError(422, f"command.resume: {exc}") from None
            elif checkpoint is not None and not self.snapshots(
                operator, info, checkpoint=checkpoint
            ):
                raise HTTPError(404, f"thread {thread_id} has no checkpoint {checkpoint!r}")
            elif self.runs.active(info.id) is None and self.claimed(info):
                # a run of another process (the terminal's): refused now, not accepted and
                # failed a moment later
                raise HTTPError(
                    409,
                    f"thread {thread_id} has a run in progress in another process "
                    "(a terminal's); wait for it to finish",
                )
        own = body if isinstance(body, RunRequest) else None
        return Run(
            run_id=str(uuid.uuid4()),
            thread_id=info.id,
            known_as=info.known_as,
            assistant_id=agent,
            operator=operator,
            text=text,
            history=list(own.history) if own else [],
            stream_modes=modes,
            metadata=metadata,
            multitask_strategy=strategy,
            stateless=stateless,
            resume=resume,
            resolve=resolve,
            checkpoint=checkpoint,
            on_disconnect=disconnect,
            interruptible=own.interruptible if own else True,
            asked=dict(own.asked) if own else {},
        )

    def pending(self, operator: str, info: Any) -> list[Any]:
        """The interrupts the thread waits on (an approval asked of a person)."""
        found = self.snapshots(operator, info)
        return list(found[0].interrupts or ()) if found else []

    def start(self, run: Run) -> Run:
        on_done = self._forget_thread if run.stateless else None
        try:
            return self.runs.start(run, on_done)
        except BusyError as exc:
            raise HTTPError(409, exc.one_line()) from None
        except TooMany as exc:
            raise HTTPError(429, exc.one_line(), retry_after=exc.retry_after) from None

    def _forget_thread(self, run: Run) -> None:
        """A stateless run's thread is deleted once the run ends (on_completion 'delete'),
        its runs with it."""
        self.runs.delete_thread(run.thread_id)


def _checkpoint_of(body: RunCreate) -> str | None:
    """The checkpoint a run starts from: ``checkpoint`` (``{"checkpoint_id": …}``, as the SDKs
    send it) or ``checkpoint_id``; None for the thread's latest."""
    found = body.checkpoint
    if found is not None and (found.model_extra or {}).get("checkpoint_ns"):
        raise HTTPError(422, "checkpoint.checkpoint_ns: a run starts from the agent's own graph")
    return (found.checkpoint_id if found else None) or body.checkpoint_id


def _no_constant(name: str) -> Any:
    """NaN and Infinity are not JSON: accepted, they would be stored and then break every
    response that shows them."""
    raise ValueError(f"{name} is not a JSON value")


def _task_json(task: Any) -> dict[str, Any]:
    """A pending task with all of the Agent Protocol's ThreadTask fields (langgraph's
    RemoteGraph reads each: ``error``, ``state``, ``checkpoint``, ``result``)."""
    state = task.state
    below = state.get("configurable") if isinstance(state, dict) else None
    return {
        "id": task.id,
        "name": task.name,
        "error": str(task.error) if task.error else None,
        "interrupts": [{"value": jsonsafe(i.value), "id": i.id} for i in task.interrupts],
        "checkpoint": jsonsafe(below) if below else None,
        "state": None,  # olav's agents have no subgraph state to show
        "result": jsonsafe(task.result) if getattr(task, "result", None) is not None else None,
    }
