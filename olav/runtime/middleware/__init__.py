"""olav's agent middleware, one per module (as deepagents keeps its own). Every hook has a
sync and an async version.

- :mod:`~olav.runtime.middleware.autorecall`: :class:`AutoRecallMiddleware` puts a
  ``<relevant-memories>`` block next to the last human message, for this model call only;
  the stored history is never changed.
- :mod:`~olav.runtime.middleware.static_context`: :class:`StaticContextMiddleware` adds
  ``on_intent`` reference files (L1) when the query hits their keywords. ``static_context``
  files (L0) are part of the system prompt already.
- :mod:`~olav.runtime.middleware.compression`: :class:`CompressionMiddleware` compresses older
  turns when the conversation outgrows the context budget.
- :mod:`~olav.runtime.middleware.run_context`: what they share in one session: the run
  (:class:`RunContext`), the rescue layer's marks (:class:`RescueState`), an approval's
  :class:`ApprovalDecision`, :func:`stream_note`; :mod:`~olav.runtime.middleware.messages`: the text
  of a message and the last human one.
- The tool guard (allow-list, approvals, audit of each call) is :mod:`olav.runtime.toolguard`,
  the rescue layer's middleware :mod:`olav.runtime.rescue.middleware`.
"""

from __future__ import annotations

from olav.runtime.middleware.autorecall import (
    STAGE_WORDS,
    AutoRecallMiddleware,
    degraded_detail,
    degraded_message,
    describe_error,
    failed_stage,
)
from olav.runtime.middleware.compression import CompressionMiddleware, summarise_turns
from olav.runtime.middleware.messages import last_human_index, message_text
from olav.runtime.middleware.run_context import (
    ApprovalDecision,
    RescueState,
    RunContext,
    stream_note,
)
from olav.runtime.middleware.static_context import StaticContextMiddleware

__all__ = [
    "STAGE_WORDS",
    "ApprovalDecision",
    "AutoRecallMiddleware",
    "CompressionMiddleware",
    "RescueState",
    "RunContext",
    "StaticContextMiddleware",
    "degraded_detail",
    "degraded_message",
    "describe_error",
    "failed_stage",
    "last_human_index",
    "message_text",
    "stream_note",
    "summarise_turns",
]
