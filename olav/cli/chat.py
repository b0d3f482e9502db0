"""The terminal chat (``olav`` with no command)."""

from __future__ import annotations

from olav.cli.common import console, open_store, open_workspace

PREVIEW_QUERY = "备份路由器配置"


def recall_preview(query: str = PREVIEW_QUERY) -> None:
    """Show what memory would inject for a query: proof that memory works offline."""
    store = open_store(open_workspace())
    hits = store.search(query, k=3)
    console.print(f"Memory recall preview for [bold]{query!r}[/] ({store.count()} memories):")
    for h in hits:
        body = " ".join((h.record.metadata.get("body") or h.record.text).split())[:100]
        console.print(
            f"  [cyan]{h.record.id}[/] [dim]({h.record.category})[/] {body}", soft_wrap=True
        )


def chat() -> None:
    from olav.doctor import check_ollama

    ws = open_workspace()
    if ws.config["llm.provider"] == "ollama":
        check = check_ollama(ws.config["llm.base_url"], ws.config["llm.model"])
        if check.status != "ok":
            recall_preview()
            console.print(f"\n[yellow]The chat model is not available:[/] {check.detail}.")
            console.print(f"{check.fix}. For example:")
            console.print("  ollama serve &")
            console.print(f"  ollama pull {ws.config['llm.model']}")
            console.print("  olav")
            return
    from olav.runtime.repl import run_repl

    run_repl(ws)
