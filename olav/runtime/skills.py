"""Agent folders: ``AGENT.md`` (the role) and ``SKILL.md`` (YAML front matter + notes)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from olav.errors import OlavError

ORCHESTRATOR = "core"
TOOL_CAP_ORCHESTRATOR = 7
TOOL_CAP_SUBAGENT = 5
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.S)


class SkillError(OlavError):
    pass


class OnIntent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keywords: list[str]
    file: str


class SkillSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str
    tools: list[str] = []
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
        data = yaml.safe_load(match.group(1)) or {}
        spec = SkillSpec.model_validate(data)
    except yaml.YAMLError:
        raise SkillError(f"{skill}: front matter is not valid YAML") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise SkillError(f"{skill}: field '{loc}': {err['msg']}") from None
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
