"""A session of LangChain's agent-chat-ui, the real UI in a real browser, against `olav serve`:
the pictures in docs/http-api.md, and a check that the UI's own calls work end to end.

agent-chat-ui is not on npm, so the suite cannot install it; tests/js/agent_chat_ui.mjs makes
its calls through the same SDK in CI. To run this, start the UI from a checkout of
langchain-ai/agent-chat-ui (``pnpm install && pnpm dev``, on http://localhost:3000), then::

    .venv/bin/python -m tests.serve.agent_chat_ui_session docs/img

It starts `olav serve --cors http://localhost:3000` on a workspace whose Ollama stub calls the
demo's tools (tests/serve/test_console_screens.py), fills in the UI's connection form (URL,
``netops``, the token as its API key), asks for the border routers, asks for a snapshot,
approves it, asks again and rejects it with a reason, and saves a picture after each. It fails
if the UI shows an error or a React warning about duplicate messages.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

UI = "http://localhost:3000"
WAIT_MS = 120_000


def main(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    from tests.serve._support import serving
    from tests.serve.test_console_screens import DemoModel

    out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        serving(Path(tmp) / "ws", "--cors", UI, model=DemoModel()) as served,
    ):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1280, "height": 800})

            def console(message: Any) -> None:
                text = str(message.text)
                if message.type == "error" and "clip-path" not in text:
                    problems.append(text[:300])  # the UI's own clip-path warning is not olav's

            page.on("console", console)
            try:
                _session(page, served, out)
            except Exception:
                page.screenshot(path=str(out / "agent-chat-ui-failed.png"))
                raise
            finally:
                browser.close()
        runs = subprocess.run(
            [str(Path(sys.executable).parent / "olav"), "log", "list"],
            cwd=served.ws,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    print(runs)
    if problems:
        raise SystemExit("the UI reported: " + " | ".join(problems))


def _session(page: Any, served: Any, out: Path) -> None:
    from playwright.sync_api import expect

    from tests.serve.test_console_screens import INVENTORY, SNAPSHOT

    def send(text: str) -> None:  # once the run before has ended: the UI sends nothing till then
        box.fill(text)
        expect(page.get_by_role("button", name="Send")).to_be_enabled(timeout=WAIT_MS)
        box.press("Enter")

    page.goto(UI, timeout=WAIT_MS)
    page.fill("#apiUrl", served.url)
    page.fill("#assistantId", "netops")
    page.fill("#apiKey", served.tokens[served.alice])
    page.get_by_role("button", name="Continue").click()
    box = page.locator("textarea").first
    box.wait_for(timeout=WAIT_MS)
    send(INVENTORY)
    page.get_by_text("two border routers").first.wait_for(timeout=WAIT_MS)

    send(SNAPSHOT)
    approve = page.get_by_role("button", name="Approve").first
    approve.wait_for(timeout=WAIT_MS)
    page.add_style_tag(content="nextjs-portal { display: none !important; }")  # the dev badge
    page.set_viewport_size({"width": 1280, "height": 1100})
    page.get_by_text(SNAPSHOT).last.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(out / "agent-chat-ui-approval.png"))
    approve.click()
    page.get_by_text("snapshot taken").first.wait_for(timeout=WAIT_MS)
    page.screenshot(path=str(out / "agent-chat-ui-approved.png"))

    send(SNAPSHOT + ", again")
    page.get_by_role("button", name="Submit rejection").last.wait_for(timeout=WAIT_MS)
    page.get_by_placeholder("Share feedback with the agent...").last.fill(
        "not during business hours"
    )
    page.get_by_role("button", name="Submit rejection").last.click()
    page.get_by_text("rejected take_snapshot").last.wait_for(timeout=WAIT_MS)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img"))
