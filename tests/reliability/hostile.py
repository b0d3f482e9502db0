"""What the hostile-input tests share (not a test module)."""

from __future__ import annotations

MARKER = "pwned_marker"  # what the object-constructing YAML tags would create if executed


def as_bytes(content: str | bytes) -> bytes:
    return content if isinstance(content, bytes) else content.encode("utf-8")
