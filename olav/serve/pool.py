"""The server's agent sessions: a pool per operator and agent. A
:class:`~olav.runtime.runner.Session` runs one run at a time (its RunContext is the run's), so a
run takes an idle session or builds one, and gives it back when it ends. All sessions share one
memory table. A session is built on its operator's configuration (``memory.user`` is the
token's operator), so recall, capture and the audit see that operator and only that operator's
private memories."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.memory.store.roles import OPERATOR, ROLE_KEY

if TYPE_CHECKING:
    from olav.runtime.middleware import ApprovalDecision

from olav.serve.approvals import AnswerError, approval_request, read_answer
from olav.serve.run import Run

# why the server refused a tool nobody could be asked about (the OpenAI endpoint), by whether
# it is a memory commit: what the model is told, so that it does not say the user refused
_POLICY = {
    False: "olav serve runs this tool only when a person approves it (an Agent Protocol "
    "client) or when the server was started with --auto-approve; this endpoint cannot ask one",
    True: "olav serve never commits to memory without a person's confirmation, which this "
    "endpoint cannot ask for; the draft stays, for `olav kb drafts confirm`",
}


def operator_workspace(ws: Workspace, operator: str) -> Workspace:
    """``ws`` as ``operator`` sees it: their ``memory.user`` and their token's role (what
    they may write, olav.memory.store.roles; a plain name is an operator's), everything else
    the same."""
    role = getattr(operator, "role", OPERATOR)
    values = {**ws.config.values, "memory.user": str(operator), ROLE_KEY: role}
    # the rest of the configuration as it is: the memory policy and where each value came from
    return Workspace(root=ws.root, config=dataclasses.replace(ws.config, values=values))


class _Sink:
    """The callbacks a pooled session was built with, forwarded to the run it serves now."""

    def __init__(self) -> None:
        self.run: Run | None = None
        self.session: Any = None  # the session: the id of the message a token belongs to

    def token(self, piece: str) -> None:
        if self.run is not None:
            self.run.on_token(piece, getattr(self.session, "token_id", "") or "")

    def step(self, mode: str, payload: Any) -> None:
        if self.run is not None:
            self.run.on_step(mode, payload)


@dataclass
class _Pooled:
    session: Any
    sink: _Sink


class SessionPool:
    """Idle sessions per (operator, agent); all share the workspace's memory table."""

    def __init__(self, ws: Workspace, *, auto_approve: bool, model: Any = None) -> None:
        self.ws = ws
        self.auto_approve = auto_approve
        self.model = model
        self._idle: dict[tuple[str, str, str], list[_Pooled]] = {}
        self._lock = threading.Lock()
        self._store: Any = None
        self._memory_lock = threading.Lock()

    def memory(self, opener: Callable[[], Any] | None = None) -> Any:
        """The memory table every session shares, opened once per server on first use: by the
        first session (``opener``) or by another reader such as the store API. An opener that
        fails leaves it unopened for the next caller."""
        with self._memory_lock:
            if self._store is None:
                if opener is None:
                    from olav.memory.store.table import MemoryStore

                    self._store = MemoryStore.for_workspace(self.ws)
                else:
                    self._store = opener()
            return self._store

    def _approve(self, sink: _Sink, name: str, args: dict[str, Any]) -> bool | ApprovalDecision:
        """A dangerous tool runs with --auto-approve; otherwise, and always for a memory
        commit, an Agent Protocol run pauses with an interrupt that says what would happen, and
        the client's answer (a person's, with their token) decides. The OpenAI endpoint cannot
        answer one: there a dangerous tool is refused, as in ``olav ask``, and a memory commit
        waits for `olav kb drafts confirm`."""
        from olav.runtime.tools import NEEDS_CONSENT

        if self.auto_approve and name not in NEEDS_CONSENT:
            return True
        run = sink.run
        if run is None or not run.interruptible:
            from olav.runtime.middleware import ApprovalDecision

            return ApprovalDecision(False, message=_POLICY[name in NEEDS_CONSENT], by="policy")
        from langgraph.types import interrupt

        try:
            return read_answer(interrupt(approval_request(name, args))).decision()
        except AnswerError as exc:  # the request checked it: only a bug of olav's gets here
            raise OlavError(f"the answer to the approval of {name} was unreadable: {exc}") from None

    def _build(self, operator: str, agent: str) -> _Pooled:
        from olav.compose import agent_session
        from olav.runtime.builder import open_memory
        from olav.runtime.hooks import Callbacks

        sink = _Sink()
        ows = operator_workspace(self.ws, operator)
        session = agent_session(
            ows,
            agent=agent,
            model=self.model,
            callbacks=Callbacks(
                approver=lambda name, args: self._approve(sink, name, args),
                on_token=sink.token,
                on_step=sink.step,
            ),
            store_opener=lambda run: self.memory(lambda: open_memory(ows, run)),
            interrupts=True,
        )
        sink.session = session
        session.build()  # now: a failure is this run's, not the next one's
        return _Pooled(session, sink)

    @contextlib.contextmanager
    def session(self, operator: str, agent: str) -> Iterator[_Pooled]:
        # the role is part of the key: one name's admin and operator tokens never share a session
        key = (operator, getattr(operator, "role", OPERATOR), agent)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            pooled = idle.pop() if idle else None
        if pooled is None:
            pooled = self._build(operator, agent)
        try:
            yield pooled
        finally:
            pooled.sink.run = None
            with self._lock:
                self._idle.setdefault(key, []).append(pooled)

    def close(self) -> None:
        with self._lock:
            pools = [p for idle in self._idle.values() for p in idle]
            self._idle.clear()
        for pooled in pools:
            with contextlib.suppress(Exception):
                pooled.session.close()
