"""The olav error hierarchy.

Every error carries a message that says what went wrong *and* how to fix it. The CLI prints
it as one red line; tracebacks appear only with ``--debug`` or ``OLAV_DEBUG=1``.
"""

from __future__ import annotations


class OlavError(Exception):
    """Base class for every error a user may see. ``str(err)`` is the one-line message."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return f"{self.message}. {self.hint}" if self.hint else self.message


class WorkspaceNotFoundError(OlavError):
    def __init__(self, start: str) -> None:
        super().__init__(
            f"no olav workspace here ({start} has no .olav/ above it)",
            hint="Run `olav init` to create one, or set OLAV_HOME",
        )


class ConfigError(OlavError):
    """A bad value in olav.yaml or an OLAV_* variable."""


class EmbedderError(OlavError):
    """The embedder could not be loaded or did not answer."""


class EmbeddingDimMismatchError(OlavError):
    """The configured embedder disagrees with the one the memory table was built with."""

    def __init__(self, *, stored: str, stored_dim: int, configured: str, configured_dim: int):
        self.stored, self.stored_dim = stored, stored_dim
        self.configured, self.configured_dim = configured, configured_dim
        super().__init__(
            f"memory was embedded with {stored} ({stored_dim}-d) but olav.yaml configures "
            f"{configured} ({configured_dim}-d)",
            hint="Run `olav kb re-embed` to rebuild memory with the configured embedder "
            "(the old table is kept as a backup), or set embedder back to "
            f"{stored} in .olav/olav.yaml",
        )


class GuideError(OlavError):
    """A *.guide.yaml file failed validation."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        self.path, self.field, self.problem = path, field, problem
        super().__init__(f"{path}: field '{field}': {problem}")


class MemoryStoreError(OlavError):
    """A memory operation failed in a way the user can act on."""


class NotFoundError(OlavError):
    """A memory id or other named object does not exist."""


class ModelError(OlavError):
    """The chat model could not be reached or failed."""
