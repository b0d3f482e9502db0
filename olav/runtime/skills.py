"""Agent folders: ``AGENT.md`` (the role) and ``SKILL.md`` (YAML front matter + notes).

An entry of ``tools`` is a tool name, or ``{name: <tool>, capture: true|false}`` to say whether
L1 capture stores the tool's successful calls as precedents (undeclared: the write-verb rule
of :mod:`olav.memory.ingest.capture`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError

from olav.core import yamltext
from olav.core.errors import OlavError

ORCHESTRATOR = "core"
TOOL_CAP_ORCHESTRATOR = 7
TOOL_CAP_SUBAGENT = 5
_FRONT = re.compile(r"\A---[^\S\n]*+\n(.*?)\n---[^\S\n]*+(?:\n|\Z)", re.S)


class SkillError(OlavError):
    pass


class OnIntent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keywords: list[str]
    file: str


class ToolEntry(BaseModel):
    """The mapping form of a ``tools`` entry."""

    model_config = ConfigDict(extra="forbid")
    name: str
    capture: StrictBool | None = None


class SkillSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str
    tools: list[str] = []
    capture: dict[str, StrictBool] = {}  # filled from the tools entries that declare it
    static_context: list[str] = []
    on_intent: list[OnIntent] = []
    model: str | None = None


class Agent(BaseModel):
    spec: SkillSpec
    folder: Path
    role: str

    @property
    def name(self) -> str:
        return self.spec.name


def load_agent(folder: Path) -> Agent:
    """Validate an agent folder; errors name the file and field."""
    skill = folder / "SKILL.md"
    if not skill.is_file():
        raise SkillError(f"{folder}: SKILL.md is missing", hint="An agent folder needs SKILL.md")
    match = _FRONT.match(skill.read_text(encoding="utf-8"))
    if not match:
        raise SkillError(f"{skill}: no YAML front matter", hint="Start the file with --- lines")
    try:
        data = yamltext.safe_load(match.group(1)) or {}
    except yaml.YAMLError:
        raise SkillError(f"{skill}: front matter is not valid YAML") from None
    try:
        spec = SkillSpec.model_validate(_tool_entries(skill, data))
    except ValidationError as exc:
        raise field_error(skill, exc) from None
    if spec.name != folder.name:
        raise SkillError(
            f"{skill}: field 'name' is {spec.name!r} but the folder is {folder.name!r}",
            hint="Make them equal",
        )
    cap = TOOL_CAP_ORCHESTRATOR if spec.name == ORCHESTRATOR else TOOL_CAP_SUBAGENT
    if len(spec.tools) > cap:
        raise SkillError(
            f"agent {spec.name} has {len(spec.tools)} tools; small models need at most {cap}",
            hint="Split it into sub-agents or drop tools in SKILL.md",
        )
    for rel in [*spec.static_context, *(o.file for o in spec.on_intent)]:
        if not (folder / rel).is_file():
            raise SkillError(f"{skill}: referenced file {rel} does not exist")
    agent_md = folder / "AGENT.md"
    role = agent_md.read_text(encoding="utf-8") if agent_md.is_file() else spec.description
    return Agent(spec=spec, folder=folder, role=role)


def field_error(skill: Path, exc: ValidationError, prefix: str = "") -> SkillError:
    """One line naming the file, the field and the bad value."""
    err = exc.errors()[0]
    loc = prefix + ".".join(str(p) for p in err["loc"])
    if loc.endswith("capture"):
        return SkillError(
            f"{skill}: field '{loc}' is {err['input']!r}", hint="Write capture: true or false"
        )
    return SkillError(f"{skill}: field '{loc}': {err['msg']}")


def _tool_entries(skill: Path, data: Any) -> Any:
    """Turn mapping entries of ``tools`` into names, their capture choices into ``capture``."""
    entries = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return data
    if "capture" in data:
        raise SkillError(
            f"{skill}: field 'capture' belongs on a tool",
            hint="Write tools: [{name: <tool>, capture: true}]",
        )
    names: list[Any] = []
    capture: dict[str, bool] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            names.append(entry)
            continue
        try:
            decl = ToolEntry.model_validate(entry)
        except ValidationError as exc:
            raise field_error(skill, exc, f"tools.{i}.") from None
        names.append(decl.name)
        if decl.capture is not None:
            capture[decl.name] = decl.capture
    return {**data, "tools": names, "capture": capture}


def capture_choices(agents: list[Agent]) -> dict[tuple[str, str], bool]:
    """``(agent, tool) -> capture`` for every tool whose SKILL.md entry declares it."""
    return {(a.name, tool): choice for a in agents for tool, choice in a.spec.capture.items()}


def load_agents(ws: Any) -> dict[str, Agent]:
    """Every agent of the workspace by name; the workspace must have the orchestrator."""
    agents = {a.name: a for a in (load_agent(d) for d in ws.agent_dirs())}
    if ORCHESTRATOR not in agents:
        raise OlavError(
            f"the workspace {ws.root} has no {ORCHESTRATOR}/ agent",
            hint="Run `olav init` to restore it",
        )
    return agents
