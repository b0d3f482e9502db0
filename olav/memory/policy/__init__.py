"""MemoryPolicy: every parameter of memory's four decisions, in one typed object.

The control plane of memory decides four things (docs/architecture.md, "The control plane"):

- **routing**: which memories a request looks at (category ceilings, the tier's total, the
  token budget and the episodes' share of it, how many candidates, the relevance floors);
- **write decisions**: what is worth keeping (the capture rule, confidences, when an episode
  is written, the dedup distances);
- **conflicts**: what a new row does to a live one it contradicts, per category;
- **lifecycle**: expiry (TTL) and decay per category, the origins that never decay, capacity.

Every decision point reads its numbers from one :class:`MemoryPolicy`; none keeps a constant
of its own (``tests/test_policy.py`` fails if one appears). The policy is built once per
configuration (:func:`policy_for`): the defaults below, then the older keys of ``olav.yaml``
that already set a policy value (``memory.half_life_days``, ``memory.dedup_distance``,
``memory.relevance``, ``memory.token_budget``, ``memory.second_opinion``), then the
``memory.policy.*`` keys. Each value remembers where it came from (``sources``), and
``olav memory policy`` prints them. Relevance floors are the one value a workspace file can
set as well: ``olav memory calibrate`` saves floors per embedder in ``calibration.json``, and
:meth:`MemoryPolicy.floors_for` lets them override the defaults.

The package: :mod:`.values` (the policy and its defaults), :mod:`.table` (the declarative
table of olav.yaml keys and their readers, and the build), :mod:`.show` (what ``olav memory
policy`` prints), and here :func:`policy_for`, the cached build.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from olav.memory.policy.show import display_rows, policy_rows, source_label
from olav.memory.policy.table import (
    POLICY_SETTINGS,
    POLICY_TABLE,
    YAML_KEYS,
    build_policy,
    parse_floors,
    setting,
    yaml_key,
)
from olav.memory.policy.values import (
    CONFLICT_MODES,
    DEFAULT_SOURCE,
    DEFAULTS,
    FLOOR_FIELDS,
    POLICY_KEY,
    TIERS,
    UNBOUNDED,
    Floors,
    MemoryPolicy,
)

_BUILT: dict[str, MemoryPolicy] = {}
_BUILT_LOCK = threading.Lock()


def policy_for(config: Any) -> MemoryPolicy:
    """The policy of ``config``, built once per distinct configuration (cheap to call per
    run: the key is the few values it is built from)."""
    if config is None:
        return DEFAULTS
    origins = getattr(config, "origins", None) or {}
    raw = getattr(config, "policy", None)
    if raw is None and isinstance(config, Mapping):
        raw = config.get(POLICY_KEY)
    key = json.dumps(
        [
            [setting(config, k) for k in POLICY_SETTINGS],
            {k: origins.get(k) for k in (*POLICY_SETTINGS, POLICY_KEY)},
            raw,
        ],
        sort_keys=True,
        default=str,
    )
    with _BUILT_LOCK:
        got = _BUILT.get(key)
    if got is None:
        got = build_policy(config)
        with _BUILT_LOCK:
            if len(_BUILT) > 64:
                _BUILT.clear()
            _BUILT[key] = got
    return got


__all__ = [
    "CONFLICT_MODES",
    "DEFAULTS",
    "DEFAULT_SOURCE",
    "FLOOR_FIELDS",
    "POLICY_KEY",
    "POLICY_SETTINGS",
    "POLICY_TABLE",
    "TIERS",
    "UNBOUNDED",
    "YAML_KEYS",
    "Floors",
    "MemoryPolicy",
    "build_policy",
    "display_rows",
    "parse_floors",
    "policy_for",
    "policy_rows",
    "setting",
    "source_label",
    "yaml_key",
]
