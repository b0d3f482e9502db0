"""``execute_skill_script``: run a script from the agent's own scripts/ folder."""

from __future__ import annotations

import json
import subprocess
import sys

from pydantic import Field

from olav.runtime.tools.base import ToolArgs, ToolContext, tool_error


class ScriptArgs(ToolArgs):
    script: str = Field(description="Script name in the agent's scripts/ folder, e.g. check.py")
    input_json: str = Field(default="{}", description="JSON object passed on stdin.")


def execute_skill_script(
    ctx: ToolContext, script: str, input_json: str = "{}", timeout: float = 60.0
) -> str:
    if ctx.agent_dir is None:
        return tool_error("this agent has no scripts/ folder")
    folder = (ctx.agent_dir / "scripts").resolve()
    target = (folder / script).resolve()
    if not target.is_relative_to(folder) or target.suffix != ".py" or not target.is_file():
        available = sorted(p.name for p in folder.glob("*.py")) if folder.is_dir() else []
        return tool_error(f"no script {script!r}; available: {', '.join(available) or 'none'}")
    try:
        json.loads(input_json)
    except json.JSONDecodeError:
        return tool_error("input_json must be a JSON object")
    try:
        proc = subprocess.run(
            [sys.executable, str(target)],
            input=input_json,
            text=True,
            capture_output=True,
            timeout=timeout,
            cwd=ctx.agent_dir,
        )
    except subprocess.TimeoutExpired:
        return tool_error(f"{script} timed out after {timeout:.0f}s")
    if proc.returncode != 0:
        return tool_error(f"{script} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return proc.stdout.strip()[:8000]
