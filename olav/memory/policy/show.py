"""What ``olav memory policy`` prints: every value with its olav.yaml key and where it came
from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from olav.memory.policy.table import yaml_key
from olav.memory.policy.values import DEFAULT_SOURCE, DEFAULTS, MemoryPolicy


def source_label(source: str, changed: bool = True) -> str:
    """A source as ``olav memory policy`` shows it: ``default``, ``olav.yaml`` (only for a
    value that differs from the default) or the ``OLAV_*`` variable that set it."""
    if source.startswith("OLAV_"):
        return source
    if source == DEFAULT_SOURCE or not changed:
        return DEFAULT_SOURCE
    return "olav.yaml"


def display_rows(
    policy: MemoryPolicy,
) -> tuple[list[tuple[str, Any, str]], list[tuple[str, Any]]]:
    """What ``olav memory policy`` prints: every value that olav.yaml can set as (its
    olav.yaml key, JSON-safe value, source label), and the built-in values as (field name,
    value). The relevance floors and the lesson dedup distance are left out: they depend on
    the embedder and the calibration, and are shown apart."""
    defaults = {key: value for key, value, _ in policy_rows(DEFAULTS)}
    settable: list[tuple[str, Any, str]] = []
    built_in: list[tuple[str, Any]] = []
    for name, value, source in policy_rows(policy):
        field_name, _, entry = name.partition(".")
        if field_name in ("relevance", "floors", "lesson_dedup"):
            continue
        key = yaml_key(field_name, entry or None)
        if key is None:
            built_in.append((name, value))
            continue
        changed = name not in defaults or defaults[name] != value
        settable.append((key, value, source_label(source, changed)))
    return settable, built_in


def policy_rows(policy: MemoryPolicy) -> list[tuple[str, Any, str]]:
    """Every value as (key, JSON-safe value, source), a mapping's entries one by one: what
    ``olav memory policy`` prints."""
    rows: list[tuple[str, Any, str]] = []
    for name, value in policy.to_json().items():
        raw = getattr(policy, name)
        if isinstance(raw, Mapping):
            for sub, item in value.items():
                key = f"{name}.{sub}"
                rows.append((key, item, policy.sources.get(key, policy.source(name))))
        else:
            rows.append((name, value, policy.source(name)))
    return rows
