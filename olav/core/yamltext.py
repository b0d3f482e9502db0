"""YAML read through libyaml's parser where PyYAML was built with it (its wheels are), else
PyYAML's own: the same safe loading, several times faster. Guides, agents, the configuration
and job files are read on every command, and a workspace's guides on each import."""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load``, parsed by libyaml when it is there."""
    return yaml.load(text, Loader=SafeLoader)
