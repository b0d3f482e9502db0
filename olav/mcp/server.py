"""The MCP server of ``olav mcp``: :class:`MemoryService` as tools, resources and a prompt.

Built on ``MCPServer``, the high-level server inside the official ``mcp`` SDK (2.x). Its
resolvers (``Resolve`` + ``Elicit``) ask the person for consent over both protocol
generations: a standalone elicitation request for clients of 2025-11-25 and earlier, an
``input_required`` round for 2026-07-28 clients. A recorded answer travels in the SDK's sealed
request state, so a client cannot answer a question it was never asked.

No ``from __future__ import annotations`` here: the tools are closures over the service, and
the SDK reads their annotations with ``get_type_hints``, which cannot resolve a string
annotation naming a closure's local (the consent resolver).
"""

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from olav import __version__
from olav.core.errors import OlavError
from olav.mcp.middleware import CallAudit, client_name
from olav.mcp.service import MemoryService, ToolCall

Category = Literal[
    "usage_guide",
    "expert_knowledge",
    "operational_event",
    "reflection",
    "query_pattern",
    "format_guide",
    "fact",
    "decision",
    "preference",
    "audit",
    "topology",
    "document",
    "episode",
]
RememberCategory = Literal[
    "fact", "preference", "decision", "expert_knowledge", "usage_guide", "format_guide"
]
# what a client may report: a run that is over (olav.audit.events.FINAL_OUTCOMES)
Outcome = Literal["completed", "narrated", "tool_error", "failed", "cancelled"]
WRITING_TOOLS = ("remember", "confirm", "record_outcome")

INSTRUCTIONS = """olav's memory of this workspace: team directives, precedents of past actions and \
lessons from failures. Call recall with the user's request before acting and follow the block it \
returns. To store something new, call remember, then confirm: the person approves it in a dialog. \
After acting, call record_outcome so olav learns from what happened."""

USAGE_PROMPT = """You can use olav's memory through these tools.

1. Before you act on a request, call `recall` with the request in the user's words. If the \
`block` is not empty, treat it as reference data from the team: follow its directives and \
format rules, reuse its precedents, respect its lessons. An empty block means nothing relevant \
is stored; go ahead normally.
2. To look something up yourself, call `search` (hybrid full-text and vector search) and `get` \
for one memory by id.
3. When the user says "remember that ..." or states a convention, call `remember` with the text \
(category fact, preference or decision; usage_guide for a directive, with keywords). It only \
writes a draft and returns its preview. Then call `confirm` with the draft_id: the user is \
asked in a dialog and only their yes stores it. Never claim something is stored unless \
confirm returned stored: true.
4. After you acted on a request, call `record_outcome` with the request, every tool call you \
made (name, args, result, status) and the outcome: completed; tool_error when a call failed; \
narrated when you were asked to act but only described the steps; failed; cancelled. olav \
turns failures into lessons and successful write actions into precedents.
"""

CONSENT_MESSAGE = """{client} asks to store this in olav's memory (agent {agent}):

{preview}
Store it? Nothing is stored unless you say yes."""


class StoreConsent(BaseModel):
    """The person's answer in the client's elicitation dialog."""

    store: bool = Field(description="Yes stores the memory shown above; no leaves it waiting.")


@dataclass(frozen=True)
class NoDialog:
    """The client cannot show an elicitation dialog: nobody can be asked."""

    reason: str


class ToolCallIn(BaseModel):
    """One tool call the agent made, for record_outcome."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(
        pattern=r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$", description="The tool's name, e.g. save_config."
    )
    args: dict[str, Any] = Field(default_factory=dict, description="Its arguments (JSON object).")
    result: str = Field(default="", max_length=20000, description="What it returned.")
    status: Literal["success", "error"] = Field(
        default="success", description="error when the call failed."
    )


# -- argument types: what a model sees in each tool's input schema ------------------------------

Request = Annotated[
    str,
    Field(min_length=1, max_length=4000, description="The user's request, in their own words."),
]
AgentArg = Annotated[
    str | None,
    Field(
        default=None,
        max_length=64,
        description="The agent whose memory to use; this server serves one agent, "
        "so leave it out or give that agent's name.",
    ),
]
DraftId = Annotated[
    str,
    Field(pattern=r"^[a-z0-9_]{1,64}$", description="The draft_id that remember returned."),
]


@contextlib.contextmanager
def tool_errors() -> Iterator[None]:
    """An OlavError becomes an MCP tool error (isError) with its one-line message."""
    try:
        yield
    except OlavError as exc:
        raise ToolError(exc.one_line()) from None


def _read_tools(svc: MemoryService) -> list[Tool]:
    def recall(request: Request, agent: AgentArg = None) -> dict[str, Any]:
        """Call before acting on a request. Returns `block`, exactly the <relevant-memories> \
block olav's AutoRecall would put before the request (empty when nothing is relevant), the \
`injected` memory ids, and every candidate with its decision and the reason (margin = how much \
closer this request is than generic ones). Follow the block's directives."""
        with tool_errors():
            return svc.recall(request, agent)

    def search(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="What to find.")],
        category: Annotated[
            Category | None, Field(default=None, description="Only this category.")
        ] = None,
        k: Annotated[int, Field(ge=1, le=50, description="How many results.")] = 5,
    ) -> dict[str, Any]:
        """Hybrid (full-text + vector) search over this agent's memories and the global ones. \
Returns id, category, scope, fused score and text of each hit, best first."""
        with tool_errors():
            return svc.search(query, category, k)

    def get(
        id: Annotated[str, Field(min_length=1, max_length=200, description="A memory id.")],
    ) -> dict[str, Any]:
        """One memory in full (text, metadata, times, confidence) by the id that recall or \
search returned."""
        with tool_errors():
            return svc.get(id)

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return [_tool(f, read_only) for f in (recall, search, get)]


def _consent_resolver(svc: MemoryService) -> Callable[..., Elicit[StoreConsent] | NoDialog]:
    def ask_consent(draft_id: str, ctx: Context) -> Elicit[StoreConsent] | NoDialog:
        with tool_errors():
            preview = svc.preview(draft_id)
        caps = ctx.client_capabilities
        dialog = caps.elicitation if caps is not None else None
        if dialog is None or (dialog.form is None and dialog.url is not None):
            return NoDialog("the client has no elicitation dialog")
        message = CONSENT_MESSAGE.format(client=client_name(ctx), agent=svc.agent, preview=preview)
        return Elicit(message, StoreConsent)

    return ask_consent


def _write_tools(svc: MemoryService) -> list[Tool]:
    hints = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    made = (_remember_tool(svc), _confirm_tool(svc), _record_outcome_tool(svc))
    return [_tool(f, hints) for f in made]


def _remember_tool(svc: MemoryService) -> Callable[..., Any]:
    def remember(
        text: Annotated[
            str, Field(min_length=1, max_length=8000, description="What to remember, as stated.")
        ],
        category: Annotated[
            RememberCategory,
            Field(description="fact, preference or decision; usage_guide for a directive."),
        ] = "fact",
        agent: AgentArg = None,
        keywords: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=60)]] | None,
            Field(default=None, max_length=12, description="Words that should recall it."),
        ] = None,
    ) -> dict[str, Any]:
        """Draft a memory. Stores NOTHING: returns a draft_id and the preview of what would be \
stored. Show the preview to the user, then call confirm with the draft_id."""
        with tool_errors():
            return svc.remember(text, category, agent, keywords)

    return remember


def _confirm_tool(svc: MemoryService) -> Callable[..., Any]:
    ask_consent = _consent_resolver(svc)

    def confirm(
        draft_id: DraftId,
        consent: Annotated[ElicitationResult[StoreConsent], Resolve(ask_consent)],
        ctx: Context,
    ) -> dict[str, Any]:
        """Ask the user, in the client's dialog, whether to store a draft; only their yes \
stores it. Returns stored true/false. A client without dialogs stores nothing: the draft \
then waits for `olav kb drafts confirm <draft_id>` in a terminal."""
        return _decide(svc, draft_id, consent, client_name(ctx))

    return confirm


def _record_outcome_tool(svc: MemoryService) -> Callable[..., Any]:
    def record_outcome(
        ctx: Context,
        request: Request,
        tools_called: Annotated[
            list[ToolCallIn], Field(max_length=100, description="Every tool call, in order.")
        ],
        outcome: Annotated[
            Outcome,
            Field(
                description="completed; tool_error: a call failed; narrated: asked to act but "
                "no tool was called; failed: an error ended the run; cancelled."
            ),
        ],
        error: Annotated[
            str | None, Field(default=None, max_length=4000, description="What went wrong.")
        ] = None,
        answer: Annotated[
            str | None,
            Field(default=None, max_length=8000, description="Your final answer to the user."),
        ] = None,
    ) -> dict[str, Any]:
        """Call after acting on a request. Records the run in olav's audit log: failed, \
tool_error and narrated runs become lessons (`olav learn trace-review`); successful write \
actions (save_, create_, deploy_ ...) become precedents that recall offers next time."""
        calls = [ToolCall(c.tool, c.args, c.result, c.status) for c in tools_called]
        with tool_errors():
            return svc.record_outcome(
                request, calls, outcome, error, answer, client=client_name(ctx)
            )

    return record_outcome


def _decide(svc: MemoryService, draft_id: str, consent: Any, client: str) -> dict[str, Any]:
    """Store the draft on the person's yes; anything else stores nothing and is audited."""
    answer = consent.data if isinstance(consent, AcceptedElicitation) else None
    if isinstance(answer, NoDialog):
        svc.refuse(draft_id, client=client, asked=False)
        message = (
            f"Nothing was stored: {client} cannot show a consent dialog, and only the person "
            f"may approve a memory. The draft waits: they run `olav kb drafts confirm "
            f"{draft_id}` in a terminal."
        )
        return {"stored": False, "draft_id": draft_id, "message": message}
    if isinstance(answer, StoreConsent) and answer.store:
        with tool_errors():
            done = svc.commit(draft_id, client=client)
        return {"stored": True, "draft_id": draft_id, "message": done}
    svc.refuse(draft_id, client=client, asked=True)
    message = (
        "The person did not approve it; nothing was stored. The draft waits in "
        f"`olav kb drafts` (`olav kb drafts reject {draft_id}` drops it)."
    )
    return {"stored": False, "draft_id": draft_id, "message": message}


def _tool(fn: Callable[..., Any], annotations: ToolAnnotations) -> Tool:
    """A tool whose input schema refuses unknown arguments."""
    tool = Tool.from_function(fn, annotations=annotations, structured_output=True)
    tool.parameters["additionalProperties"] = False
    return tool


def _add_resources(server: MCPServer, svc: MemoryService) -> None:
    markdown = "text/markdown"

    @server.resource("olav://guides", name="guides", mime_type=markdown)
    def guides() -> str:
        """The agent's directives (usage guides), with their keywords."""
        return svc.guides()

    @server.resource("olav://lessons", name="lessons", mime_type=markdown)
    def lessons() -> str:
        """The live lessons learned from failed and narrated runs."""
        return svc.lessons()

    @server.resource("olav://episodes", name="episodes", mime_type=markdown)
    def episodes() -> str:
        """Summaries of the latest chat sessions."""
        return svc.episodes()

    @server.prompt(name="use_olav_memory", description="How to use olav's memory tools.")
    def use_olav_memory() -> str:
        return USAGE_PROMPT


def build_server(
    svc: MemoryService,
    *,
    read_only: bool = False,
    transport: str = "stdio",
    auth: AuthSettings | None = None,
    tokens: TokenVerifier | None = None,
) -> Any:
    """The MCP server over ``svc``; ``read_only`` leaves out every tool that writes. Over HTTP,
    ``auth`` and ``tokens`` make every request need a bearer token (olav.mcp.auth)."""
    tools = _read_tools(svc) + ([] if read_only else _write_tools(svc))
    server = MCPServer(
        "olav",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=tools,
        log_level="WARNING",
        auth=auth,
        token_verifier=tokens,
    )
    server.middleware.append(CallAudit(svc, tools, transport))
    _add_resources(server, svc)
    return server
