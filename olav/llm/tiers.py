"""Model tiers from model names. Light on purpose: read-only commands (``olav memory why``)
need the tier without importing the chat-model stack."""

from __future__ import annotations

import re

_SIZE = re.compile(r"(?<!\d)(\d++(?:\.\d++)?)\s*+b\b", re.I)  # from a number's first digit


def model_tier(model: str, override: str = "auto") -> str:
    """small (<= 9B), medium (<= 34B) or large, from the parameter count in the model name."""
    if override != "auto":
        return override
    sizes = [float(m) for m in _SIZE.findall(model.replace("-a3b", "").replace("-a22b", ""))]
    if not sizes:
        return "medium"
    size = max(sizes)
    return "small" if size <= 9 else "medium" if size <= 34 else "large"
