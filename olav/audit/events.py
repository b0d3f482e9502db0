"""The audit's vocabulary: the ``events.kind`` names, the message roles and the run outcomes
that more than one layer writes or reads.

The writers sit above the audit (the runtime's rescue layer, runner and tool guard, the MCP
server, olav serve, the learning loop) and the readers in it (:mod:`olav.audit.queries`,
:mod:`olav.audit.export`) and in the console, so every kind lives here, at the bottom, where
all of them may import it; tests/test_house.py checks that no ``event()`` call names a kind
by a literal. Nothing here imports anything.
"""

from __future__ import annotations

# -- events.kind -------------------------------------------------------------------------------

NARRATED_EVENT = "narrated"  # a narrated run: the tools it could have called
NUDGE_EVENT = "nudge"  # the rescue layer's nudge: the narration and the tool named
SALVAGE_EVENT = "salvaged"  # a tool call the rescue layer salvaged from the message's text
LOOP_EVENT = "loop_guard"  # a repeated call refused, or the run stopped for it
CONTEXT_EVENT = "context_full"  # the prompt filled the model's context window
CUT_EVENT = "cut_short"  # a model message stopped on the token limit
REASK_EVENT = "reask"  # a call olav could not read, asked for again under a constraint
RUN_STATS_EVENT = "run_stats"  # a run's model calls, tokens and rescue marks
RECALL_DEGRADED_EVENT = "recall_degraded"  # a recall that fell back (full text, or nothing)
INTERRUPT_EVENT = "interrupt"  # a run paused for a person's answer
APPROVAL_EVENT = "approval"  # a person allowed a guarded tool call (chat, MCP, olav serve)
DENIAL_EVENT = "denial"  # a person refused one
TOOL_LESSONS_EVENT = "tool_lessons"  # lessons about a tool shown to the model with its call
MEMORY_UNAVAILABLE_EVENT = "memory_unavailable"  # the run went on without its memory
TRACE_LEARNED_EVENT = "trace_learned"  # trace_learner turned a run into lessons
HTTP_REQUEST_EVENT = "http_request"  # one request to olav serve (its request audit)
DRAFT_REJECTED_EVENT = "draft_rejected"  # a person said no to a curator draft
CLIENT_USER_EVENT = "client_user"  # the end user an OpenAI client named (/v1's user field)
CLIENT_TURN_EVENT = "client_turn"  # a model call for a client's own agent loop (its tools)
FIX_EVENTS = {"accepted": "fix_accepted", "rejected": "fix_rejected"}  # a fix proposal decided

# -- messages.role -----------------------------------------------------------------------------

REASONING_ROLE = "reasoning"  # the reasoning the audit keeps apart from the answer

# -- runs.outcome ------------------------------------------------------------------------------

# what a finished run achieved; see olav.runtime.outcome for how it is decided.
# "interrupted": the run paused for a person's answer (an approval asked by olav serve)
OUTCOMES = ("completed", "narrated", "tool_error", "failed", "cancelled", "interrupted")
# the outcomes of a run that is over (not waiting for anyone): what an MCP client may report
FINAL_OUTCOMES = ("completed", "narrated", "tool_error", "failed", "cancelled")
# the outcomes trace_learner turns into lessons
LEARNABLE_OUTCOMES = ("narrated", "tool_error", "failed", "cancelled")
# what a listing of runs can filter on: a run without an outcome yet shows its status
RUN_OUTCOMES = (*OUTCOMES, "running")
