"""Workspace discovery and configuration (``olav.yaml`` overridden by ``OLAV_*`` variables)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from olav.core.errors import ConfigError, WorkspaceNotFoundError
from olav.core.settings import SETTINGS, SETTINGS_BY_KEY, Setting
from olav.core.yamltext import SafeLoader

OLAV_DIR = ".olav"
CONFIG_NAME = "olav.yaml"


def env_flag(name: str) -> bool:
    """True when a declared process variable is set to a truthy value."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def find_root(start: Path | None = None) -> Path:
    """The workspace root: ``OLAV_HOME``, or the nearest parent directory holding ``.olav/``."""
    home = os.environ.get("OLAV_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        if not (root / OLAV_DIR).is_dir():
            raise ConfigError(
                f"OLAV_HOME={home} is not an olav workspace (no .olav/ inside)",
                hint=f"Run `olav init {home}` or unset OLAV_HOME",
            )
        return root
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / OLAV_DIR).is_dir():
            return candidate
    raise WorkspaceNotFoundError(str(here))


def _coerce(setting: Setting, value: Any, source: str) -> Any:
    want = setting.type
    if value is None:
        raise ConfigError(
            f"{source}: {setting.key} is empty",
            hint=f"Give it a value or remove the line (default: {setting.default!r})",
        )
    if want is int and isinstance(value, float) and not value.is_integer():
        raise ConfigError(
            f"{source}: {setting.key} must be int, got {value!r}",
            hint=f"Use a whole number (default: {setting.default!r})",
        )
    try:
        if want is bool:
            if isinstance(value, bool):
                out: Any = value
            elif str(value).strip().lower() in {"1", "true", "yes", "on"}:
                out = True
            elif str(value).strip().lower() in {"0", "false", "no", "off"}:
                out = False
            else:
                raise ValueError(value)
        elif want is int and isinstance(value, bool):
            raise ValueError(value)
        elif want is str and isinstance(value, bool):  # YAML reads a bare off/on as a bool
            out = "on" if value else "off"
        elif want is str and isinstance(value, list):  # a YAML list of names: one a comma
            if not all(isinstance(v, str) and "," not in v for v in value):
                raise ValueError(value)
            out = ",".join(value)
        else:
            out = want(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{source}: {setting.key} must be {want.__name__}, got {value!r}",
            hint=f"Fix the value (default: {setting.default!r})",
        ) from None
    if setting.minimum is not None and out < setting.minimum:
        raise ConfigError(
            f"{source}: {setting.key} is {out!r}",
            hint=f"It must be at least {setting.minimum:g} (default: {setting.default!r})",
        )
    if setting.choices and out not in setting.choices:
        raise ConfigError(
            f"{source}: {setting.key} is {out!r}",
            hint="Use one of: " + ", ".join(setting.choices),
        )
    return out


class StrictLoader(SafeLoader):  # type: ignore[valid-type,misc]
    """Safe loading that also refuses duplicate keys: a second `embedder:` block must not
    silently replace the first."""


def _no_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _no_duplicates,
)


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, full + "."))
        else:
            flat[full] = value
    return flat


@dataclass
class Config:
    """Resolved settings. Read with ``cfg["llm.model"]``."""

    values: dict[str, Any] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the raw `memory.policy` mapping, checked when memory builds its policy from it
    # (olav.memory.policy); and where each value came from: the file (a value that differs
    # from the default) or an OLAV_* variable; a key absent here is the default (source())
    policy: Any = None
    origins: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def source(self, key: str) -> str:
        """Where a setting's value comes from, as ``olav config`` shows it: ``default``,
        ``olav.yaml`` (a value that differs from the default the template wrote) or the
        ``OLAV_*`` variable that set it."""
        got = self.origins.get(key)
        if not got:
            return "default"
        return got if got.startswith("OLAV_") else CONFIG_NAME

    @classmethod
    def load(cls, path: Path | None, *, environ: dict[str, str] | None = None) -> Config:
        env = os.environ if environ is None else environ
        raw: dict[str, Any] = {}
        if path is not None and path.exists():
            try:
                loaded = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=StrictLoader) or {}
            except UnicodeDecodeError:
                raise ConfigError(f"{path} is not UTF-8 text", hint="Save it as UTF-8") from None
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" line {mark.line + 1}" if mark else ""
                problem = getattr(exc, "problem", None)
                raise ConfigError(
                    f"{path}:{where} is not valid YAML" + (f" ({problem})" if problem else ""),
                    hint=f"Fix that line, or start again from the default with `olav init "
                    f"--reset-config` (it keeps {CONFIG_NAME} in .olav/backups/)",
                ) from None
            if not isinstance(loaded, dict):
                raise ConfigError(
                    f"{path} must hold a mapping",
                    hint="Start again from the default with `olav init --reset-config` (it "
                    "keeps a backup)",
                )
            raw = loaded
        agents = raw.pop("agents", None) or {}
        memory = raw.get("memory")
        policy = memory.pop("policy", None) if isinstance(memory, dict) else None
        origins: dict[str, str] = {"memory.policy": str(path)} if policy is not None else {}
        flat = _flatten(raw)
        values: dict[str, Any] = {}
        for key, val in flat.items():
            if key not in SETTINGS_BY_KEY:
                raise ConfigError(
                    f"{path}: unknown key '{key}'",
                    hint="Remove it; `olav config` lists every key (docs/configuration.md)",
                )
            setting = SETTINGS_BY_KEY[key]
            values[key] = _coerce(setting, val, str(path))
            # a key olav init wrote (the template holds every default) or one set back to its
            # default is the default: only a changed value is the file's
            if values[key] != setting.default:
                origins[key] = str(path)
        for setting in SETTINGS:
            if setting.env in env:
                values[setting.key] = _coerce(setting, env[setting.env], setting.env)
                origins[setting.key] = setting.env
            values.setdefault(setting.key, setting.default)
        if not isinstance(agents, dict):
            raise ConfigError(f"{path}: 'agents' must be a mapping of agent name to overrides")
        return cls(values=values, agents=agents, policy=policy, origins=origins)


@dataclass
class Workspace:
    root: Path
    config: Config

    @classmethod
    def open(cls, root: Path | None = None, *, tighten: bool = True) -> Workspace:
        """The workspace at ``root`` (else found from the cwd). Its databases, logs and
        exports are made private as it opens (olav.core.private); ``tighten=False`` leaves
        the modes as they are (``olav doctor`` reports them)."""
        root = root.resolve() if root else find_root()
        ws = cls(root=root, config=Config.load(root / OLAV_DIR / CONFIG_NAME))
        ws._check_agent_overrides()
        if tighten:
            from olav.core.private import secure_workspace

            secure_workspace(ws)
        return ws

    def _check_agent_overrides(self) -> None:
        from olav.core.settings import AGENT_OVERRIDE_KEYS

        known = {p.name for p in self.agent_dirs()}
        for name, override in self.config.agents.items():
            if name not in known:
                raise ConfigError(
                    f"{self.config_path}: agents.{name} names no agent in this workspace",
                    hint="Agents: " + ", ".join(sorted(known)),
                )
            if not isinstance(override, dict):
                raise ConfigError(f"{self.config_path}: agents.{name} must be a mapping")
            for key in override:
                if key not in AGENT_OVERRIDE_KEYS:
                    raise ConfigError(
                        f"{self.config_path}: unknown key 'agents.{name}.{key}'",
                        hint="Per-agent keys: " + ", ".join(AGENT_OVERRIDE_KEYS),
                    )

    @property
    def olav_dir(self) -> Path:
        return self.root / OLAV_DIR

    @property
    def config_path(self) -> Path:
        return self.olav_dir / CONFIG_NAME

    def _path(self, key: str) -> Path:
        p = Path(self.config[key]).expanduser()
        return p if p.is_absolute() else self.root / p

    @property
    def databases(self) -> Path:
        return self._path("paths.databases")

    @property
    def memory_path(self) -> Path:
        return self.databases / "memory.lance"

    @property
    def audit_path(self) -> Path:
        return self.databases / "audit.duckdb"

    @property
    def domain_path(self) -> Path:
        return self.databases / "domain.duckdb"

    @property
    def logs(self) -> Path:
        return self._path("paths.logs")

    @property
    def exports(self) -> Path:
        return self._path("paths.exports")

    def agent_dirs(self) -> list[Path]:
        """Agent folders: direct children holding a SKILL.md."""
        return sorted(p for p in self.root.iterdir() if (p / "SKILL.md").is_file())


def render_default_config() -> str:
    """The commented olav.yaml written by ``olav init``; generated from the settings registry."""
    lines = [
        "# olav workspace configuration.",
        "# Every key can be overridden by an environment variable: llm.model -> OLAV_LLM_MODEL.",
        "# Reference: docs/configuration.md",
        "",
    ]
    section = None
    for s in SETTINGS:
        head, name = s.key.split(".", 1)
        if head != section:
            if section is not None:
                lines.append("")
            lines.append(f"{head}:")
            section = head
        lines.append(f"  # {s.doc} ({s.env})")
        lines.append(f"  {name}: {json.dumps(s.default)}")
    lines += [
        "",
        "# Per-agent overrides of the chat model, e.g.:",
        "# agents:",
        "#   netops:",
        "#     model: qwen3:30b-a3b",
        "",
    ]
    return "\n".join(lines)
