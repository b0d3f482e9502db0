"""The audit's vocabulary: the ``events.kind`` names, the message roles and the run outcomes
that more than one layer writes or reads.

The writers sit above the audit (the runtime's rescue layer and runner, the MCP server) and
the readers in it (:mod:`olav.audit.queries`, :mod:`olav.audit.export`), so the names live
here, at the bottom, where both may import them. Nothing here imports anything.
"""

from __future__ import annotations

# -- events.kind -------------------------------------------------------------------------------

NARRATED_EVENT = "narrated"  # a narrated run: the tools it could have called
NUDGE_EVENT = "nudge"  # the rescue layer's nudge: the narration and the tool named
SALVAGE_EVENT = "salvaged"  # a tool call the rescue layer salvaged from the message's text
LOOP_EVENT = "loop_guard"  # a repeated call refused, or the run stopped for it
CONTEXT_EVENT = "context_full"  # the prompt filled the model's context window
CUT_EVENT = "cut_short"  # a model message stopped on the token limit
RUN_STATS_EVENT = "run_stats"  # a run's model calls, tokens and rescue marks
RECALL_DEGRADED_EVENT = "recall_degraded"  # a recall that fell back (full text, or nothing)

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
