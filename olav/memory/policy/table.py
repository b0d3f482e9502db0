"""How a policy is built from a configuration: one declarative table (:data:`POLICY_TABLE`) of
(MemoryPolicy field, olav.yaml path, reader), and the readers that turn a value into a field
or a one-line error naming the key. A row reads either an older ``memory.*`` setting (these
are applied first) or a key under ``memory.policy``; the build itself has no row of its own."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from olav.core.errors import ConfigError
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
    read_only,
)
from olav.memory.store.schema import CATEGORIES, ORIGINS


class _Builder:
    """Applies settings and ``memory.policy`` keys to the defaults, recording sources and
    raising one-line errors that name the key."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.changes: dict[str, Any] = {}
        self.sources: dict[str, str] = {}

    def fail(self, key: str, want: str, got: Any, fix: str = "") -> ConfigError:
        return ConfigError(
            f"{self.where}: {key} must be {want}, got {_shown(got)}",
            hint=fix or "Fix the value or remove the key (docs/configuration.md)",
        )

    def mapping(self, name: str, raw: Any, keys: tuple[str, ...]) -> dict[str, Any]:
        key = f"{POLICY_KEY}.{name}" if name else POLICY_KEY
        if not isinstance(raw, Mapping):
            raise self.fail(key, "a mapping of " + ", ".join(keys[:4]) + ", ...", raw)
        for k in raw:
            if k not in keys:
                raise ConfigError(
                    f"{self.where}: unknown key '{key}.{k}'",
                    hint="Use one of: " + ", ".join(keys),
                )
        return dict(raw)


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


def _int(b: _Builder, key: str, raw: Any, minimum: int) -> int:
    number = not isinstance(raw, bool) and isinstance(raw, int | float)
    if not number or not math.isfinite(raw) or raw != int(raw) or raw < minimum:
        raise b.fail(key, f"an integer ≥ {minimum}", raw)
    return int(raw)


def _number(b: _Builder, key: str, raw: Any, minimum: float, *, above: bool = False) -> float:
    ok = not isinstance(raw, bool) and isinstance(raw, int | float) and math.isfinite(raw)
    if not ok or raw < minimum or (above and raw == minimum):
        sign = ">" if above else "≥"
        raise b.fail(key, f"a number {sign} {minimum:g}", raw)
    return float(raw)


def _words(b: _Builder, key: str, raw: Any) -> frozenset[str]:
    if not isinstance(raw, list) or not all(isinstance(w, str) and w.strip() for w in raw):
        raise b.fail(key, "a list of words", raw, "e.g. [deploy, push, save]")
    return frozenset(w.strip().lower() for w in raw)


def _per_category(
    b: _Builder, name: str, raw: Any, parse: Callable[[str, Any], Any], keys: tuple[str, ...]
) -> dict[str, Any]:
    got = b.mapping(name, raw, keys)
    out = {}
    for k, v in got.items():
        out[k] = parse(f"{POLICY_KEY}.{name}.{k}", v)
        b.sources[f"{name}.{k}"] = f"{b.where}: {POLICY_KEY}.{name}.{k}"
    return out


def _ttl(b: _Builder, key: str, raw: Any) -> timedelta | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("never", "none")):
        return None
    return timedelta(days=_number(b, key, raw, 0.0, above=True))


def _capacity(b: _Builder, key: str, raw: Any) -> int | None:
    if isinstance(raw, str) and raw.strip().lower() == UNBOUNDED:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise b.fail(key, f"an integer ≥ 1 or {UNBOUNDED}", raw)
    return raw


def _accept_reject(b: _Builder, key: str, raw: Any) -> tuple[float, float]:
    """A reranker's two floors: a score at least ACCEPT injects, below REJECT leaves out."""
    want = "two numbers [ACCEPT, REJECT] with REJECT ≤ ACCEPT"
    fix = "e.g. [0.9, 0.02]: a score of at least 0.9 injects, below 0.02 leaves out"
    pair = list(raw) if isinstance(raw, list | tuple) else []
    numbers = [
        float(v)
        for v in pair
        if not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)
    ]
    if len(pair) != 2 or len(numbers) != 2 or numbers[1] > numbers[0]:
        raise b.fail(key, want, raw, fix)
    return (numbers[0], numbers[1])


def _conflict(b: _Builder, key: str, raw: Any) -> str:
    if raw not in CONFLICT_MODES:
        raise b.fail(key, "one of " + ", ".join(CONFLICT_MODES), raw)
    return str(raw)


def parse_floors(raw: str, where: str = "") -> Floors:
    """``"0.03,0,-0.02,0.04,0.03,0.005"`` (the ``memory.relevance`` syntax): directive,
    directive named in words, in specific words, lesson, lesson with words, spread."""
    try:
        values = [float(v) for v in raw.split(",")]
    except ValueError:
        values = []
    if len(values) != len(FLOOR_FIELDS):
        prefix = f"{where}: " if where else ""
        raise ConfigError(
            f"{prefix}memory.relevance must be auto, off or {len(FLOOR_FIELDS)} comma-separated "
            f"numbers ({', '.join(FLOOR_FIELDS)}), got {raw!r}",
            hint="e.g. 0.03,0,-0.02,0.04,0.03,0.005 (see docs/configuration.md)",
        )
    return Floors(*values)


def setting(config: Any, key: str) -> Any:
    """A setting's value, or its default when ``config`` gives the settings in part."""
    from olav.core.settings import SETTINGS_BY_KEY

    try:
        return config[key]
    except KeyError:  # settings given in part (tests, benchmarks): the default
        return SETTINGS_BY_KEY[key].default


def _origin(config: Any, key: str) -> str:
    """Where a setting's value came from: its environment variable, the file, or default."""
    origins = getattr(config, "origins", None) or {}
    got = origins.get(key)
    return f"{got}: {key}" if got and not got.startswith("OLAV_") else (got or DEFAULT_SOURCE)


def _from_settings(b: _Builder, config: Any) -> None:
    """The older ``memory.*`` settings, each read by the rows of :data:`POLICY_TABLE` that
    name it, and where each value came from."""
    for row in POLICY_TABLE:
        if row.from_setting is None:
            continue
        b.changes[row.field] = row.from_setting(row.path, setting(config, row.path))
        if row.own_source:
            b.sources[row.field] = _origin(config, row.path)


def _apply_policy(b: _Builder, raw: Any) -> None:
    """``memory.policy`` read by :data:`POLICY_TABLE`: each key its parser, each mapping
    section its entries, every value its source."""
    got = b.mapping("", raw, POLICY_SECTIONS) if raw is not None else {}
    sections: dict[str, dict[str, Any]] = {}
    for row in POLICY_TABLE:
        if row.read is None:
            continue
        rel = row.path[len(POLICY_KEY) + 1 :]
        section, _, sub = rel.partition(".")
        if section not in got:
            continue
        if sub:
            if section not in sections:
                sections[section] = b.mapping(section, got[section], _SUBKEYS[section])
            if sub not in sections[section]:
                continue
            value = sections[section][sub]
        else:
            value = got[section]
        read = row.read
        if row.each:
            per = _per_category(b, rel, value, functools.partial(read, b), row.each)
            if rel != row.field:
                for k in per:
                    b.sources[f"{row.field}.{k}"] = b.sources.pop(f"{rel}.{k}")
            merged = dict(getattr(DEFAULTS, row.field))
            merged.update(per)
            b.changes[row.field] = read_only(merged)
        else:
            b.changes[row.field] = read(b, row.path, value)
            b.sources[row.field] = f"{b.where}: {row.path}"


def build_policy(config: Any) -> MemoryPolicy:
    """A policy from ``config`` (a :class:`~olav.core.config.Config` or a mapping of
    settings, as the benchmarks pass): defaults, the older memory keys, ``memory.policy``."""
    origins = getattr(config, "origins", None) or {}
    raw = getattr(config, "policy", None)
    if raw is None and isinstance(config, Mapping):
        raw = config.get(POLICY_KEY)
    b = _Builder(str(origins.get(POLICY_KEY) or "olav.yaml"))
    _from_settings(b, config)
    _apply_policy(b, raw)
    return dataclasses.replace(DEFAULTS, **b.changes, sources=read_only(b.sources))


# -- the table: each value's olav.yaml key and how it is read --------------------------------


@dataclass(frozen=True)
class PolicyKey:
    """One row of :data:`POLICY_TABLE`: the MemoryPolicy ``field`` and the olav.yaml ``path``
    that sets it, and exactly one of two readers. ``read`` takes a value under
    ``memory.policy`` (for a mapping read entry by entry, ``each`` lists the entries it takes,
    merged over the defaults); ``from_setting`` takes the value of the older ``memory.*``
    setting named by ``path`` (``own_source`` False: the field shares another row's source
    and records none). ``entries`` are those `olav memory policy` names (None: every entry
    the field has)."""

    field: str
    path: str
    read: Callable[[_Builder, str, Any], Any] | None = None
    each: tuple[str, ...] = ()
    entries: tuple[str, ...] | None = None
    from_setting: Callable[[str, Any], Any] | None = None
    own_source: bool = True

    def __post_init__(self) -> None:
        if (self.read is None) == (self.from_setting is None):
            raise TypeError(f"policy row {self.field}: needs exactly one of read, from_setting")


def _at_least(minimum: int) -> Callable[[_Builder, str, Any], int]:
    return lambda b, key, raw: _int(b, key, raw, minimum)


def _share(b: _Builder, key: str, raw: Any) -> float:
    share = _number(b, key, raw, 0.0, above=True)
    if share > 1:
        raise b.fail(key, "a number > 0 and ≤ 1", share)
    return share


def _unit(b: _Builder, key: str, raw: Any) -> float:
    value = _number(b, key, raw, 0.0)
    if value > 1:
        raise b.fail(key, "a number within 0 and 1", value)
    return value


def _origins(b: _Builder, key: str, raw: Any) -> frozenset[str]:
    origins = _words(b, key, raw)
    if not origins <= set(ORIGINS):
        raise b.fail(key, "a list of " + ", ".join(ORIGINS), sorted(origins))
    return origins


def _bound(b: _Builder, key: str, raw: Any) -> int | None:
    category = key.rsplit(".", 1)[-1]
    if category in DEFAULTS.never_archived:
        raise ConfigError(
            f"{b.where}: {key}: guides are never archived",
            hint="Remove the key; bound the other categories",
        )
    return _capacity(b, key, raw)


# readers of the older memory.* settings (for a Config the settings layer has already checked
# each value's type): the policy's reading of the value, or a one-line error naming the key


def _as_int(key: str, raw: Any) -> int:
    return int(raw)


def _as_float(key: str, raw: Any) -> float:
    return float(raw)


def _lowered(key: str, raw: Any) -> str:
    return str(raw).strip().lower()


def _relevance_mode(key: str, raw: Any) -> str:
    """auto, off, or manual for anything else (the floors row reads those numbers)."""
    mode = _lowered(key, raw)
    return mode if mode in ("auto", "off") else "manual"


def _relevance_floors(key: str, raw: Any) -> Floors | None:
    mode = _lowered(key, raw)
    return None if mode in ("auto", "off") else parse_floors(mode)


def _lesson_dedup(key: str, raw: Any) -> float | None:
    text = str(raw).strip()
    if text == "auto":
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{key} must be a number or auto, got {text!r}") from None


_P = POLICY_KEY
_CATS = tuple(CATEGORIES)
# the categories whose writers read the workspace's policy (imports use the defaults)
_WRITTEN = ("operational_event", "query_pattern", "reflection", "episode")

# every value olav.yaml can set, once: the build reads the older settings and memory.policy
# by it, `olav memory policy` names each value by its key, and a test writes every key back
# into olav.yaml. A field absent here (or an entry absent from a row's entries) has no key:
# it is built in.
POLICY_TABLE: tuple[PolicyKey, ...] = (
    PolicyKey("quotas", f"{_P}.quotas", _at_least(0), _CATS),
    PolicyKey("tier_totals", f"{_P}.tier_totals", _at_least(0), TIERS),
    PolicyKey("token_budget", "memory.token_budget", from_setting=_as_int),
    PolicyKey("episode_share", f"{_P}.episode_share", _share),
    PolicyKey("candidates", f"{_P}.candidates", _at_least(1)),
    PolicyKey("recent_episodes", f"{_P}.recent_episodes", _at_least(1)),
    PolicyKey("tool_lessons", f"{_P}.tool_lessons", _at_least(1)),
    PolicyKey("relevance", "memory.relevance", from_setting=_relevance_mode),
    # the floors' source is memory.relevance's, recorded under relevance (see floors_for)
    PolicyKey("floors", "memory.relevance", from_setting=_relevance_floors, own_source=False),
    PolicyKey("second_opinion", "memory.second_opinion", from_setting=_lowered),
    PolicyKey("judge_band", "memory.judge_band", from_setting=_as_float),
    PolicyKey("judge_close_calls", f"{_P}.second_look.close_calls", _at_least(1)),
    PolicyKey("rerank_uncalibrated", f"{_P}.second_look.uncalibrated", _accept_reject),
    PolicyKey("write_verbs", f"{_P}.capture.write_verbs", _words),
    PolicyKey("never_capture", f"{_P}.capture.never", _words),
    PolicyKey("confidence", f"{_P}.confidence", _unit, _WRITTEN, _WRITTEN),
    PolicyKey("episode_every_turns", f"{_P}.capture.episode_every_turns", _at_least(1)),
    PolicyKey("suppress_after_bad_runs", f"{_P}.outcomes.suppress_after", _at_least(1)),
    PolicyKey("bad_run_weight", f"{_P}.outcomes.weight", _unit),
    PolicyKey("lesson_dedup", "memory.dedup_distance", from_setting=_lesson_dedup),
    PolicyKey("supersede_distance", f"{_P}.dedup.supersede", lambda b, k, v: _number(b, k, v, 0.0)),
    PolicyKey("conflicts", f"{_P}.conflicts", _conflict, _CATS),
    PolicyKey("ttl", f"{_P}.ttl_days", _ttl, _CATS),
    PolicyKey("half_life_days", "memory.half_life_days", from_setting=_as_float),
    PolicyKey(
        "category_half_life", f"{_P}.half_life_days", lambda b, k, v: _number(b, k, v, 0.0), _CATS
    ),
    PolicyKey("no_decay_origins", f"{_P}.no_decay_origins", _origins),
    # guides are never archived, so they have no capacity to set
    PolicyKey(
        "capacity",
        f"{_P}.capacity",
        _bound,
        _CATS,
        tuple(c for c in CATEGORIES if c not in DEFAULTS.never_archived),
    ),
)
# (field, key, entries), as `olav memory policy` and its test read the table
YAML_KEYS: tuple[tuple[str, str, tuple[str, ...] | None], ...] = tuple(
    (row.field, row.path, row.entries) for row in POLICY_TABLE
)
_YAML_KEY_OF = {name: (key, entries) for name, key, entries in YAML_KEYS}
# the older memory.* settings the table reads, once each, in the table's order
POLICY_SETTINGS: tuple[str, ...] = tuple(
    dict.fromkeys(row.path for row in POLICY_TABLE if row.from_setting is not None)
)
# the sections under memory.policy, and the keys inside each nested one, in the table's order
POLICY_SECTIONS: tuple[str, ...] = tuple(
    dict.fromkeys(
        row.path[len(_P) + 1 :].split(".")[0] for row in POLICY_TABLE if row.read is not None
    )
)
_SUBKEYS: dict[str, tuple[str, ...]] = {}
for _row in POLICY_TABLE:
    _section, _, _sub = _row.path[len(_P) + 1 :].partition(".")
    if _row.read is not None and _sub:
        _SUBKEYS[_section] = (*_SUBKEYS.get(_section, ()), _sub)


def yaml_key(name: str, entry: str | None = None) -> str | None:
    """The olav.yaml key that sets a policy value (``ttl``, ``reflection`` ->
    ``memory.policy.ttl_days.reflection``), or None for a built-in value."""
    found = _YAML_KEY_OF.get(name)
    if found is None:
        return None
    key, entries = found
    if entry is None:
        return key
    return f"{key}.{entry}" if entries is None or entry in entries else None
