"""The interactive terminal chat."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
import threading
import time
from typing import Any

from rich.console import Console
from rich.text import Text

from olav.cli.common import counted
from olav.core.config import Workspace
from olav.core.errors import OlavError

HELP = """\
/help            this help
/agent NAME      talk to another agent directly (core delegates by itself)
/new             start a new conversation
/threads         this agent's conversations; /resume ID continues one
/memory QUERY    what AutoRecall would inject for QUERY, and why
/history         the runs of this session
/think, /no_think  switch the model's thinking on or off for the next turns
/trace-review [HOURS] [LIMIT]  learn lessons from recent failed runs
/exit            leave (Ctrl-D works too)
Esc then Enter inserts a new line. Ctrl-C cancels a running answer."""


def _short(args: dict[str, Any], width: int = 70) -> str:
    parts = []
    for k, v in args.items():
        val = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        val = " ".join(str(val).split())
        parts.append(f"{k}={val[:30] + '…' if len(val) > 30 else val}")
    text = ", ".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def _turn_stats(rescue: dict[str, Any]) -> str:
    """``412 tokens in · 38 out · first token 0.41 s`` and what the rescue layer did."""
    about = "~" if rescue.get("tokens_estimated") else ""  # the engine counted none: estimated
    parts = [
        f"{about}{rescue.get('tokens_in', 0)} tokens in",
        f"{about}{rescue.get('tokens_out', 0)} out",
    ]
    if rescue.get("first_token_s") is not None:
        parts.append(f"first token {rescue['first_token_s']:.2f} s")
    if rescue.get("salvaged"):
        parts.append("tool call salvaged from text")
    if rescue.get("nudged"):
        parts.append("nudged once")
    if rescue.get("approval_s"):
        parts.append(f"{rescue['approval_s']:.1f} s waiting for you")
    for name in rescue.get("denied") or ():
        parts.append(f"{name} refused")
    return "  " + " · ".join(parts)


class Chat:
    def __init__(
        self,
        ws: Workspace,
        *,
        agent: str = "core",
        auto_approve: bool = False,
        console: Console | None = None,
        model: str | None = None,
        thread: str | None = None,
    ) -> None:
        self.ws = ws
        self.thread = thread  # the conversation to continue (None: a new one)
        self.console = console or Console(highlight=False)
        self.auto_approve = auto_approve
        self._streamed = self._turn_streamed = False
        self.agent_name = agent  # the prompt shows it without waiting for the engine
        self.model = model or ws.config["llm.model"]
        self._session: Any = None
        self._failure: BaseException | None = None
        # the agent engine (langgraph, the model client, the memory table, the embedder)
        # loads while the person types the first request
        self._starting = threading.Thread(
            target=self._start, args=(agent,), name="olav-chat-start", daemon=True
        )
        self._starting.start()

    def _start(self, agent: str) -> None:
        threading.Thread(target=self._warm_model, name="olav-model-warm-up", daemon=True).start()
        try:
            from olav.compose import agent_session
            from olav.runtime.hooks import Callbacks

            session = agent_session(
                self.ws,
                agent=agent,
                thread=self.thread,
                callbacks=Callbacks(
                    approver=self.approve,
                    approver_reads_terminal=True,
                    on_token=self.token,
                    on_tool_start=self.tool_start,
                    on_tool_end=self.tool_end,
                    on_warning=self.warn,  # e.g. memory degraded: one line per run
                ),
            )
            session.build()  # the graph, memory and the embedder, while the person types
            self._session = session
        except BaseException as exc:  # raised where the session is first needed
            self._failure = exc

    def _warm_model(self) -> None:
        from olav.llm.models import warm_up

        warm_up(self.ws.config, self.model)

    @property
    def session(self) -> Any:
        """The Session, once its start-up (begun at construction) has finished."""
        self._starting.join()
        if self._failure is not None:
            raise self._failure
        return self._session

    # -- UI hooks ----------------------------------------------------------------------------

    def token(self, text: str) -> None:
        if text:
            self._quiet()
            self._streamed = self._turn_streamed = True
            sys.stdout.write(text)
            sys.stdout.flush()

    def _waiting(self) -> Any:
        """A spinner with the seconds waited, from the request to the first thing shown
        (text, a tool, a question): a small model on a busy machine can take seconds before
        its first visible word, and the stream guard holds a short lead-in back. Only on a
        terminal."""
        if not self.console.is_terminal:
            return None
        started = time.monotonic()
        status = self.console.status("thinking…", spinner="dots")

        def tick() -> None:
            while not self._shown.wait(0.25):
                status.update(f"thinking… {time.monotonic() - started:.0f} s")

        self._shown = threading.Event()
        status.start()
        threading.Thread(target=tick, name="olav-spinner", daemon=True).start()
        return status

    def _quiet(self) -> None:
        """The first visible output of a turn ends its spinner."""
        status, self._status = getattr(self, "_status", None), None
        if status is not None:
            self._shown.set()
            status.stop()

    def tool_start(self, agent: str, name: str, args: dict[str, Any]) -> None:
        self._quiet()
        if self._streamed:
            sys.stdout.write("\n")
            self._streamed = False
        self.console.print(Text(f"  ⚙ {agent} → {name}({_short(args)})", style="cyan"))

    def tool_end(self, agent: str, name: str, status: str, ms: float) -> None:
        mark = "[green]✓[/]" if status == "success" else "[red]✗[/]"
        self.console.print(f"    {mark} {name} {status} · {ms:.0f} ms")

    def warn(self, message: str) -> None:
        if self._streamed:
            sys.stdout.write("\n")
            self._streamed = False
        self.console.print(Text(message, style="yellow"), soft_wrap=True)

    def approve(self, name: str, args: dict[str, Any]) -> bool:
        from olav.runtime.tools import NEEDS_CONSENT

        self._quiet()
        if name in NEEDS_CONSENT:
            return self.consent(name, args)
        if self.auto_approve:
            return True
        self.console.print(
            Text(f"  {name} needs your approval: {_short(args, 120)}", style="yellow")
        )
        allowed = self._yes("  Allow? [y/N] ")
        # the answer is taken: say what happens now, not still what was asked
        said = f"allowed, running {name}…" if allowed else f"denied: {name} does not run"
        self.console.print(Text(f"  {said}", style="green" if allowed else "yellow"))
        return allowed

    def consent(self, name: str, args: dict[str, Any]) -> bool:
        """commit_to_memory: show what would be stored; only an explicit y stores it.
        --auto-approve does not apply: a memory needs the person's own yes."""
        from olav.learning.curator import mark_seen, pick_draft

        subject = str(args.get("subject", ""))
        self.console.print(Text(f"  {name} would store {subject}:", style="yellow"))
        self.console.print(Text(textwrap.indent(str(args.get("preview", "")), "    ")))
        with contextlib.suppress(OlavError):
            mark_seen(pick_draft(self.ws.root, subject))
        return self._yes("  Store it in memory? [y/N] ")

    def _yes(self, prompt: str) -> bool:
        """True only for y/yes; no, an empty line, EOF and Ctrl-C are all no."""
        try:
            answer = input(prompt)
        except (EOFError, KeyboardInterrupt):
            return False
        return answer.strip().lower() in {"y", "yes"}

    # -- commands ----------------------------------------------------------------------------

    def show_memory(self, query: str) -> None:
        from olav.cli.memory import render_why

        recaller = self.session.built.recallers[self.session.agent_name]
        result = recaller.recall(query, dry_run=True)
        if not result.candidates:
            self.console.print("no memory matches")
            return
        render_why(result, recaller)

    def show_history(self) -> None:
        from olav.audit.queries import session_runs

        runs = session_runs(self.session.audit.path, self.session.session_id)
        rows = [(started, agent, status, query) for _id, agent, status, query, started in runs]
        from olav.memory.recall.episodes import recent_episodes
        from olav.memory.store.scopes import personal_scopes

        scopes = [self.session.agent_name, *personal_scopes(self.session.ws.config)]
        for ep in reversed(recent_episodes(self.session.store, scopes, 3)):
            self.console.print(ep.text, markup=False, style="dim")
        if not rows:
            self.console.print("no runs yet in this session")
        for started, agent, status, query in rows:
            self.console.print(
                f"{started:%H:%M:%S} {agent:<8} {status:<10} {query[:80]}", markup=False
            )

    def show_threads(self) -> None:
        from olav.cli.threads import _title, _when

        threads = self.session.threads.recent(agent=self.session.agent_name, limit=10)
        if not threads:
            self.console.print("no conversations yet")
        for t in threads:
            mark = "*" if t.id == self.session.thread_id else " "
            self.console.print(
                f"{mark} {t.id}  {_when(t.updated_at)}  {counted(t.turns, 'turn'):>9}  "
                f"{_title(t)[:70]}",
                markup=False,
            )

    def trace_review(self, arg: str) -> None:
        from olav.cli.learn import render_lessons
        from olav.learning.trace_learner import learn_from_traces
        from olav.llm.models import workspace_chat_model

        parts = arg.split()
        try:
            hours = float(parts[0]) if parts else 24.0
            limit = int(parts[1]) if len(parts) > 1 else 10
        except ValueError:
            self.console.print("usage: /trace-review [HOURS] [LIMIT]")
            return
        lessons = learn_from_traces(
            self.ws,
            self.session.store,
            workspace_chat_model(self.ws),
            hours=hours,
            limit=limit,
        )
        if lessons:
            self.console.print(render_lessons(lessons))
        else:
            self.console.print("no new failed, narrated or tool-error runs to learn from")

    def command(self, line: str) -> bool:
        """Handle a slash command; False means leave the chat."""
        cmd, _, arg = line.strip().partition(" ")
        arg = arg.strip()
        if cmd in ("/exit", "/quit"):
            return False
        if cmd == "/help":
            self.console.print(HELP, markup=False)
        elif cmd == "/new":
            self.session.new_thread()
            self.console.print("new conversation")
        elif cmd == "/threads":
            self.show_threads()
        elif cmd == "/resume":
            if not arg:
                self.console.print("usage: /resume ID (see /threads)")
            else:
                info = self.session.resume(arg)
                self.agent_name = self.session.agent_name
                self.console.print(f"continuing {info.id} with {info.agent or self.agent_name}")
                show_last_turns(self.console, self.session.threads, info.id)
        elif cmd == "/agent":
            if not arg:
                self.console.print(f"current agent: {self.session.agent_name}")
            else:
                from olav.runtime.skills import load_agents

                if arg not in load_agents(self.ws):
                    raise OlavError(f"no agent named {arg!r}", hint="See `olav agent list`")
                self.session.switch_agent(arg)
                self.agent_name = arg
                self.console.print(f"now talking to {arg}")
        elif cmd == "/memory":
            if not arg:
                self.console.print("usage: /memory QUERY")
            else:
                self.show_memory(arg)
        elif cmd == "/history":
            self.show_history()
        elif cmd in ("/think", "/no_think"):
            self.session.run.thinking = cmd == "/think"
            self.console.print(f"thinking {'on' if cmd == '/think' else 'off'} for the next turns")
        elif cmd == "/trace-review":
            self.trace_review(arg)
        else:
            self.console.print(f"unknown command {cmd}; /help lists them", markup=False)
        return True

    def turn(self, text: str) -> None:
        from olav.runtime.runner import RunCancelled

        self._streamed = False  # the cursor is after streamed text, mid-line
        self._turn_streamed = False  # this turn's answer streamed (some of it)
        session = self.session  # its start-up first: the spinner times the request only
        self._status = self._waiting()
        try:
            result = session.ask(text)
        except RunCancelled:
            self._quiet()
            self.console.print("\n[yellow]cancelled[/]")
            return
        except OlavError:
            if self._streamed:  # the error on a line of its own, not glued to the answer
                sys.stdout.write("\n")
                sys.stdout.flush()
                self._streamed = False
            raise
        finally:
            self._quiet()
        if not self._turn_streamed and result.answer:
            self.console.print(result.answer, markup=False)
        elif self._turn_streamed:  # a warning or a tool line may have come after the stream
            if result.unshown:  # the end of the answer the stream held back
                sys.stdout.write(("\n" if self._streamed else "") + result.unshown)
            if self._streamed or result.unshown:
                sys.stdout.write("\n")
            sys.stdout.flush()
        self.console.print(Text(_turn_stats(result.rescue), style="dim"))

    def loop(self) -> None:
        read = self._reader()
        while True:
            try:
                line = read()
            except EOFError:
                break
            except KeyboardInterrupt:
                continue
            if not line.strip():
                continue
            try:
                if line.startswith("/"):
                    if not self.command(line):
                        break
                else:
                    self.turn(line)
            except OlavError as exc:
                self.console.print(Text("error: ", style="bold red") + Text(exc.one_line()))
        self._starting.join()
        if self._session is not None:
            self._session.close()
        self.console.print("bye")

    def _reader(self) -> Any:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            return lambda: input("olav> ")
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings

        keys = KeyBindings()

        @keys.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        prompt: PromptSession[str] = PromptSession(
            history=FileHistory(str(self.ws.olav_dir / "chat_history")), key_bindings=keys
        )
        return lambda: prompt.prompt(f"{self.agent_name}> ")


def _drafts_waiting(chat: Chat) -> None:
    """One banner line when drafts or fix proposals wait for the person; nothing otherwise."""
    from olav.learning.drafts import waiting_line

    line = waiting_line(chat.ws)
    if line:
        chat.console.print(Text(line, style="yellow"))


RESUME_TURNS = 3  # the person's last turns (and what followed) shown on resume


def show_last_turns(console: Console, threads: Any, thread_id: str) -> None:
    from olav.cli.threads import render_turns

    for line in render_turns(threads.turns(thread_id, last=RESUME_TURNS)):
        console.print(line, soft_wrap=True)


def resume_target(ws: Workspace, agent: str, thread: str | None, resume_last: bool) -> Any:
    """The thread the chat continues (its info), or None for a new one."""
    if thread is None and not resume_last:
        return None
    from olav.cli.threads import open_threads

    with open_threads(ws) as store:
        return store.get(thread) if thread is not None else store.last(agent)


def run_repl(
    ws: Workspace,
    *,
    agent: str = "core",
    auto_approve: bool = False,
    thread: str | None = None,
    resume_last: bool = False,
) -> None:
    """The banner and the prompt come at once; the engine loads behind them (Chat)."""
    from olav.llm.tiers import model_tier
    from olav.runtime.skills import load_agents

    info = resume_target(ws, agent, thread, resume_last)
    if info is not None and info.agent:
        agent = info.agent
    agents = load_agents(ws)
    if agent not in agents:
        raise OlavError(f"no agent named {agent!r}", hint="See `olav agent list`")
    cfg = ws.config
    model = agents[agent].spec.model or (cfg.agents.get(agent) or {}).get("model")
    model = model or cfg["llm.model"]
    chat = Chat(
        ws,
        agent=agent,
        auto_approve=auto_approve,
        model=model,
        thread=info.id if info is not None else None,
    )
    chat.console.print(
        f"[bold]olav[/] · agent {agent} · model {model} ({model_tier(model, cfg['llm.tier'])}) · "
        "/help for commands"
    )
    if info is not None:
        chat.console.print(f"continuing {info.id} ({counted(info.turns, 'turn')}):", style="dim")
        from olav.cli.threads import open_threads

        with open_threads(ws) as store:
            show_last_turns(chat.console, store, info.id)
    elif resume_last:
        chat.console.print(f"no earlier conversation with {agent}: starting a new one", style="dim")
    _drafts_waiting(chat)
    chat.loop()
