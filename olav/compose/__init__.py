"""The composition root: the headless agent engine (olav.runtime) wired with learning
(olav.learning), two packages that do not import each other. Whoever builds a Session for a
person or a job (the CLI, cron, the benchmarks) builds it here, with the learning tools that
agents list (drafts, commits, error scans) and trace learning after every run that went
wrong."""

from olav.compose.session import agent_session, learning_hooks, trace_learning
from olav.compose.tools import LEARNING_TOOLS, known_tools, unknown_tools

__all__ = [
    "LEARNING_TOOLS",
    "agent_session",
    "known_tools",
    "learning_hooks",
    "trace_learning",
    "unknown_tools",
]
