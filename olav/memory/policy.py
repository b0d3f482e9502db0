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
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from olav.core.errors import ConfigError
from olav.memory.store.schema import CATEGORIES, ORIGINS


@dataclass(frozen=True)
class Floors:
    """Margins a memory needs to count as relevant (see the module docstring)."""

    directive: float  # any memory but a lesson, on its margin alone
    directive_words: float  # ... when the request names it in words
    specific: float  # any memory, a lesson too, named in specific words
    lesson: float
    lesson_words: float  # a lesson the full-text search matched too
    spread: float  # memories more than this below the best one are left out

    @classmethod
    def off(cls) -> Floors:
        """No relevance floor (the nearest memories are taken, as upstream did)."""
        inf = float("inf")
        return cls(-inf, -inf, -inf, -inf, -inf, inf)


TIERS = ("small", "medium", "large")
# what a new row does to a live one of its category and scope that it contradicts (the same
# subject, or nearer than dedup.supersede): supersede it (the old one is retired and kept for
# history), keep both (logged), keep both and send the pair for review (logged, and the new
# row names the old ones in metadata.review), or do not compare at all
CONFLICT_MODES = ("supersede", "keep_both", "review", "off")
UNBOUNDED = "unbounded"
POLICY_KEY = "memory.policy"
DEFAULT_SOURCE = "default"


def _ro(data: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(data))


def _default_quotas() -> Mapping[str, int]:
    # ceilings per category: how many relevant memories of a kind may share one block; the
    # categories listed here are the ones recall searches (episodes only on a cue)
    return _ro(
        {
            "usage_guide": 3,
            "expert_knowledge": 3,
            "query_pattern": 2,
            "format_guide": 1,
            "reflection": 1,
            "fact": 2,
            "preference": 1,
            "decision": 1,
            "operational_event": 2,
            "topology": 1,
            "document": 2,
            "episode": 1,
        }
    )


def _default_ttl() -> Mapping[str, timedelta | None]:
    # None: until the row is invalidated, superseded or deleted. Precedents
    # (operational_event) and SQL (query_pattern) stay: a replayed call has the same id, so
    # an expiry would drop a precedent that is still in use
    return _ro({c: (timedelta(days=30) if c == "reflection" else None) for c in CATEGORIES})


def _default_floors() -> Mapping[str, Floors]:
    # floors key prefix (olav.memory.recall.calibration.floors_key) -> floors: directive, directive
    # named in words, in specific words, lesson, lesson with a full-text match, spread below
    # the best memory; chosen on the calibration half of the golden suite
    return _ro(
        {
            "e5:multilingual-e5-small": Floors(0.03, 0.01, -0.02, 0.04, 0.03, 0.005),
            "e5:multilingual-e5-small+use-m3": Floors(0.03, 0.01, -0.02, 0.04, 0.04, 0.005),
        }
    )


@dataclass(frozen=True)
class MemoryPolicy:
    """The parameters of every memory decision. Build it with :func:`policy_for`; the
    field defaults are olav's defaults (:data:`DEFAULTS`)."""

    # -- routing: what a request looks at --------------------------------------------------
    quotas: Mapping[str, int] = field(default_factory=_default_quotas)
    tier_totals: Mapping[str, int] = field(
        default_factory=lambda: _ro({"small": 3, "medium": 5, "large": 13})
    )
    token_budget: int = 1000  # memory.token_budget
    episode_share: float = 0.25  # an earlier-session summary takes at most this of the budget
    candidates: int = 40  # hybrid-search candidates each request is decided on
    recent_episodes: int = 2  # the latest episodes a "last time" request adds
    tool_lessons: int = 2  # lessons naming a tool shown with its error
    # ties between equally ranked memories: earlier origins first
    origin_order: tuple[str, ...] = ("user", "directive", "document", "config", "agent", "audit")
    # -- relevance ---------------------------------------------------------------------------
    relevance: str = "auto"  # memory.relevance: auto | off | manual (then ``floors``)
    floors: Floors | None = None  # the floors memory.relevance sets by hand
    calibrated_floors: Mapping[str, Floors] = field(default_factory=_default_floors)
    second_opinion: str = "auto"  # memory.second_opinion
    # the second look (a reranker, the chat model as judge; both off unless configured): a
    # margin this near its floor is a close call for the judge (memory.judge_band; margin
    # units, e5's margins span about 0.06 from p10 to p90), at most this many per judge call,
    # and the reranker's accept/reject floors until `olav memory calibrate` measures it
    judge_band: float = 0.01
    judge_close_calls: int = 6
    rerank_uncalibrated: tuple[float, float] = (0.9, 0.02)
    # -- write decisions -------------------------------------------------------------------
    write_verbs: frozenset[str] = frozenset(
        {
            "register",
            "deploy",
            "push",
            "save",
            "destroy",
            "write",
            "record",
            "emit",
            "export",
            "ingest",
            "stop",
            "create",
            "update",
            "delete",
            "exec",
        }
    )
    # olav's own memory tools write memory themselves; capturing them would only echo it
    never_capture: frozenset[str] = frozenset(
        {
            "record_reflection",
            "commit_to_memory",
            "propose_memory_draft",
            "propose_guide_draft",
            "draft_code_fix",
        }
    )
    confidence: Mapping[str, float] = field(
        default_factory=lambda: _ro(
            {
                "operational_event": 0.5,
                "query_pattern": 0.6,
                "reflection": 0.6,
                "episode": 0.7,
                "document": 0.9,  # documents and conversations imported by `olav kb import`
            }
        )
    )
    episode_every_turns: int = 10
    # a new lesson this close (squared L2) to a live one is skipped: memory.dedup_distance,
    # None = calibrated for the embedder (by name prefix), else the upstream distance
    lesson_dedup: float | None = None
    calibrated_dedup: Mapping[str, float] = field(
        default_factory=lambda: _ro({"e5:multilingual-e5-small": 0.20})
    )
    upstream_dedup: float = 0.3
    # a new fact/preference/decision this close to a live one conflicts with it
    supersede_distance: float = 0.20
    # -- conflicts ---------------------------------------------------------------------------
    conflicts: Mapping[str, str] = field(
        default_factory=lambda: _ro(
            {
                c: ("supersede" if c in ("fact", "preference", "decision") else "off")
                for c in CATEGORIES
            }
        )
    )
    # -- lifecycle ---------------------------------------------------------------------------
    ttl: Mapping[str, timedelta | None] = field(default_factory=_default_ttl)
    half_life_days: float = 30.0  # memory.half_life_days; 0 = no decay
    category_half_life: Mapping[str, float] = field(default_factory=lambda: _ro({}))
    no_decay_origins: frozenset[str] = frozenset({"user", "document"})
    # gc logs a row as decayed once its weight falls below this (lifecycle log only)
    decayed_below: float = 0.5
    capacity: Mapping[str, int | None] = field(
        default_factory=lambda: _ro(dict.fromkeys(CATEGORIES))
    )
    # never moved to the archive, whatever a capacity says (pinned rows neither)
    never_archived: frozenset[str] = frozenset({"usage_guide", "format_guide"})
    # where each value came from: "quotas.reflection" -> "default" | "<olav.yaml>: key" | ...
    sources: Mapping[str, str] = field(default_factory=lambda: _ro({}), compare=False)

    # -- what the decision points ask ----------------------------------------------------------

    def quota(self, category: str) -> int:
        return self.quotas.get(category, 0)

    def tier_total(self, tier: str) -> int:
        return self.tier_totals.get(tier, self.tier_totals["small"])

    def episode_cap(self, token_budget: int) -> int:
        """The tokens an episode may take of a block of ``token_budget``."""
        return int(token_budget * self.episode_share)

    def origin_rank(self, origin: str) -> int:
        try:
            return self.origin_order.index(origin)
        except ValueError:
            return 9

    def half_life(self, category: str) -> float:
        return self.category_half_life.get(category, self.half_life_days)

    def expiry_for(self, category: str, now: datetime | None = None) -> datetime | None:
        """When a memory of ``category`` written ``now`` expires (None: never)."""
        ttl = self.ttl.get(category)
        return None if ttl is None else (now or datetime.now(UTC)) + ttl

    def is_write_tool(self, name: str) -> bool:
        if name in self.never_capture:
            return False
        return any(part in self.write_verbs for part in name.lower().split("_"))

    def confidence_of(self, category: str) -> float:
        return self.confidence.get(category, 0.5)

    def bounded(self) -> bool:
        """Whether any category has a capacity (else nothing is ever archived)."""
        return any(v is not None for v in self.capacity.values())

    def conflict_mode(self, category: str) -> str:
        return self.conflicts.get(category, "off")

    def dedup_for(self, embedder_name: str) -> float:
        """The lesson dedup distance for this embedder."""
        if self.lesson_dedup is not None:
            return self.lesson_dedup
        for prefix, value in self.calibrated_dedup.items():
            if embedder_name.startswith(prefix):
                return value
        return self.upstream_dedup

    def default_floors(self, floors_key: str) -> Floors | None:
        """olav's floors for this floors key: the entry whose name is the longest prefix of
        it, so "e5:…+use-m3" never takes plain e5's."""
        found = [p for p in self.calibrated_floors if floors_key.startswith(p)]
        return self.calibrated_floors[max(found, key=len)] if found else None

    def floors_for(
        self, floors_key: str, workspace: Mapping[str, Floors] | None = None
    ) -> tuple[Floors | None, str]:
        """The floors recall uses for ``floors_key`` and where they come from: the floors
        ``memory.relevance`` sets, none when it is ``off``, else those calibrated in the
        workspace (``workspace``: calibration.json's entries), else olav's defaults."""
        if self.relevance == "off":
            return None, self.source("relevance")
        if self.floors is not None:
            return self.floors, self.source("relevance")
        if workspace is not None and floors_key in workspace:
            return workspace[floors_key], "calibration file"
        found = self.default_floors(floors_key)
        return found, DEFAULT_SOURCE if found is not None else "none calibrated"

    def source(self, name: str) -> str:
        return self.sources.get(name, DEFAULT_SOURCE)

    def to_json(self) -> dict[str, Any]:
        """Every value, JSON-safe (durations in days, floors as mappings)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name != "sources":
                out[f.name] = _plain(getattr(self, f.name))
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Floors):
        return dataclasses.asdict(value)
    if isinstance(value, timedelta):
        return value.total_seconds() / 86400
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    return value


DEFAULTS = MemoryPolicy()
FLOOR_FIELDS = tuple(f.name for f in dataclasses.fields(Floors))


# -- building a policy from the configuration ------------------------------------------------


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
    return _setting(config, key)


def _setting(config: Any, key: str) -> Any:
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
    """The older ``memory.*`` keys that set a policy value."""
    simple = {
        "token_budget": ("memory.token_budget", int),
        "half_life_days": ("memory.half_life_days", float),
        "judge_band": ("memory.judge_band", float),
    }
    for name, (key, kind) in simple.items():
        value = kind(_setting(config, key))
        if value != getattr(DEFAULTS, name):
            b.changes[name] = value
        b.sources[name] = _origin(config, key)
    relevance = str(_setting(config, "memory.relevance")).strip().lower()
    if relevance not in ("auto", "off"):
        b.changes["floors"] = parse_floors(relevance)
        relevance = "manual"
    b.changes["relevance"] = relevance
    b.sources["relevance"] = _origin(config, "memory.relevance")
    second = str(_setting(config, "memory.second_opinion")).strip().lower()
    b.changes["second_opinion"] = second
    b.sources["second_opinion"] = _origin(config, "memory.second_opinion")
    dedup = str(_setting(config, "memory.dedup_distance")).strip()
    if dedup != "auto":
        try:
            b.changes["lesson_dedup"] = float(dedup)
        except ValueError:
            raise ConfigError(
                f"memory.dedup_distance must be a number or auto, got {dedup!r}"
            ) from None
    b.sources["lesson_dedup"] = _origin(config, "memory.dedup_distance")


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
            b.changes[row.field] = _ro(merged)
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
    return dataclasses.replace(DEFAULTS, **b.changes, sources=_ro(b.sources))


_BUILT: dict[str, MemoryPolicy] = {}
_BUILT_LOCK = threading.Lock()
_POLICY_SETTINGS = (
    "memory.token_budget",
    "memory.half_life_days",
    "memory.relevance",
    "memory.second_opinion",
    "memory.dedup_distance",
    "memory.judge_band",
)


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
            [_setting(config, k) for k in _POLICY_SETTINGS],
            {k: origins.get(k) for k in (*_POLICY_SETTINGS, POLICY_KEY)},
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


# -- the table: each value's olav.yaml key and how it is read --------------------------------


@dataclass(frozen=True)
class PolicyKey:
    """One row of :data:`POLICY_TABLE`: the MemoryPolicy ``field``, the olav.yaml ``path``
    that sets it, how a ``memory.policy`` value is ``read`` (None: an older ``memory.*``
    setting, read with the settings), for a mapping read entry by entry the entries it takes
    (``each``, merged over the defaults), and the ``entries`` `olav memory policy` names
    (None: every entry the field has)."""

    field: str
    path: str
    read: Callable[[_Builder, str, Any], Any] | None = None
    each: tuple[str, ...] = ()
    entries: tuple[str, ...] | None = None


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


_P = POLICY_KEY
_CATS = tuple(CATEGORIES)
# the categories whose writers read the workspace's policy (imports use the defaults)
_WRITTEN = ("operational_event", "query_pattern", "reflection", "episode")

# every value olav.yaml can set, once: the parser reads memory.policy by it, `olav memory
# policy` names each value by its key, and a test writes every key back into olav.yaml. A
# field absent here (or an entry absent from a row's entries) has no key: it is built in.
POLICY_TABLE: tuple[PolicyKey, ...] = (
    PolicyKey("quotas", f"{_P}.quotas", _at_least(0), _CATS),
    PolicyKey("tier_totals", f"{_P}.tier_totals", _at_least(0), TIERS),
    PolicyKey("token_budget", "memory.token_budget"),
    PolicyKey("episode_share", f"{_P}.episode_share", _share),
    PolicyKey("candidates", f"{_P}.candidates", _at_least(1)),
    PolicyKey("recent_episodes", f"{_P}.recent_episodes", _at_least(1)),
    PolicyKey("tool_lessons", f"{_P}.tool_lessons", _at_least(1)),
    PolicyKey("relevance", "memory.relevance"),
    PolicyKey("floors", "memory.relevance"),
    PolicyKey("second_opinion", "memory.second_opinion"),
    PolicyKey("judge_band", "memory.judge_band"),
    PolicyKey("judge_close_calls", f"{_P}.second_look.close_calls", _at_least(1)),
    PolicyKey("rerank_uncalibrated", f"{_P}.second_look.uncalibrated", _accept_reject),
    PolicyKey("write_verbs", f"{_P}.capture.write_verbs", _words),
    PolicyKey("never_capture", f"{_P}.capture.never", _words),
    PolicyKey("confidence", f"{_P}.confidence", _unit, _WRITTEN, _WRITTEN),
    PolicyKey("episode_every_turns", f"{_P}.capture.episode_every_turns", _at_least(1)),
    PolicyKey("lesson_dedup", "memory.dedup_distance"),
    PolicyKey("supersede_distance", f"{_P}.dedup.supersede", lambda b, k, v: _number(b, k, v, 0.0)),
    PolicyKey("conflicts", f"{_P}.conflicts", _conflict, _CATS),
    PolicyKey("ttl", f"{_P}.ttl_days", _ttl, _CATS),
    PolicyKey("half_life_days", "memory.half_life_days"),
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
