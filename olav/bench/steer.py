"""``olav bench steer``: what memory does to *your* model.

Small models often announce work ("I will now write the script...") without emitting the tool
call. olav's answer is memory: AutoRecall puts the relevant guides next to the user's message.
This benchmark measures that effect on the user's own model and hardware. It runs a set of
scenarios (vague requests, EN and ZH) against the workspace's configured model twice over: with
memory (AutoRecall on) and without it (AutoRecall off; the same agent, tools, prompt and
memory store otherwise), ``runs`` times each. Per scenario and mode it reports the share of
runs that called the expected tool, the mean number of tool calls, the share that left the
expected artifact (a glob under the workspace, holding ``expect_contains`` when given), and the
mean and p95 time of the agent turn; then a summary of memory on against memory off.

With a real Ollama this reproduces the "memory flips narration into a working script"
experiment::

    ollama serve &
    ollama pull qwen3:8b
    cd my-workspace && olav bench steer --runs 5

Isolation: every run happens in a throwaway workspace in a temporary folder: copies of the
agent folders, of ``memory.lance`` and of ``domain.duckdb``, with an empty ``exports/`` and a
fresh audit log. Runs therefore see neither each other's artifacts nor the memories that L1
capture stores after each run, nor each other's access-count bumps, and the real workspace is
left untouched (no bench runs in its audit log for the trace learner to learn from, no files
in its exports/). Merely switching capture off would still leave the artifacts, the audit rows
and the access counts shared. Trace learning is off, and dangerous tools are denied, as in
``olav ask`` without ``--auto-approve``. "Memory off" replaces the recall of each agent's
recaller with an empty result, so no ``<relevant-memories>`` block is injected; the run then
checks that none was. The two modes alternate in order from run to run, so a model that
loads slowly on its first call does not penalise one mode only.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from olav.bench.steer_stats import MODES as MODES
from olav.bench.steer_stats import markdown_steer as markdown_steer
from olav.bench.steer_stats import scenario_blocks, summarize
from olav.core.config import Config, Workspace
from olav.core.errors import ModelError, OlavError

DEFAULT_SCENARIOS = Path(__file__).resolve().parent / "data" / "steer" / "scenarios.yaml"
HINT = "See docs/steer.md for the scenario format"
ANSWER_CHARS = 300


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)
    agent: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    prompt: str = Field(pattern=r"\S")
    expect_tool: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    expect_artifact: str | None = Field(default=None, pattern=r"\S")
    expect_contains: str | None = Field(default=None, min_length=1)
    # a question whose answer is in memory: any of these in the answer (case aside) is right
    expect_answer: list[str] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _expects_something(self) -> Scenario:
        if self.expect_tool is None and self.expect_artifact is not None:
            raise ValueError("'expect_artifact' needs 'expect_tool', the tool that makes it")
        if self.expect_artifact is None and self.expect_tool is not None:
            raise ValueError("'expect_tool' needs 'expect_artifact', the file it leaves")
        if self.expect_answer is None and self.expect_tool is None:
            raise ValueError("give 'expect_tool' and 'expect_artifact', or 'expect_answer'")
        if self.expect_answer is not None and not all(a.strip() for a in self.expect_answer):
            raise ValueError("expect_answer: every answer must hold text")
        return self

    @field_validator("expect_artifact")
    @classmethod
    def _relative_glob(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = PurePosixPath(value.strip().replace("\\", "/"))
        if path.is_absolute() or ".." in path.parts or ":" in path.parts[0]:
            raise ValueError("must be a glob relative to the workspace, e.g. exports/*.py")
        return path.as_posix()


class _ScenarioFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    scenarios: list[Scenario] = Field(min_length=1)


def _validation_error(path: Path, raw: Any, err: ValidationError) -> OlavError:
    first = err.errors()[0]
    loc = list(first["loc"])
    where = ""
    if len(loc) >= 2 and loc[0] == "scenarios" and isinstance(loc[1], int):
        item = raw["scenarios"][loc[1]]
        name = item.get("id") if isinstance(item, dict) else None
        where = f"scenario {name!r}: " if isinstance(name, str) else f"scenario #{loc[1] + 1}: "
        loc = loc[2:]
    field = ".".join(str(x) for x in loc) or "(the whole entry)"
    msg = " ".join(str(first["msg"]).split())
    return OlavError(f"{path}: {where}field '{field}': {msg}", hint=HINT)


def load_scenarios(path: Path | str = DEFAULT_SCENARIOS) -> list[Scenario]:
    """Read and strictly validate a scenario file; a bad one raises a one-line OlavError that
    names the file, the scenario and the field."""
    from olav.core.config import StrictLoader  # refuses duplicate keys

    path = Path(path)
    if not path.is_file():
        raise OlavError(
            f"scenario file {path} does not exist",
            hint="Pass --scenarios FILE, or leave it out for the shipped set",
        )
    try:
        raw = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=StrictLoader)
    except UnicodeDecodeError:
        raise OlavError(f"{path} is not UTF-8 text", hint="Save it as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", "") or "").split())
        raise OlavError(f"{path}:{where} is not valid YAML ({problem})", hint=HINT) from None
    if not isinstance(raw, dict):
        raise OlavError(f"{path}: expected a mapping with a 'scenarios' list", hint=HINT)
    try:
        scenarios = _ScenarioFile.model_validate(raw).scenarios
    except ValidationError as exc:
        raise _validation_error(path, raw, exc) from None
    seen: set[str] = set()
    for s in scenarios:
        if s.id in seen:
            raise OlavError(f"{path}: scenario {s.id!r}: field 'id': duplicate id", hint=HINT)
        seen.add(s.id)
    return scenarios


def check_scenarios(ws: Workspace, scenarios: Sequence[Scenario]) -> None:
    """Every scenario names an agent of the workspace and a tool that agent can reach."""
    from olav.runtime.builder import load_agents
    from olav.runtime.skills import ORCHESTRATOR

    agents = load_agents(ws)
    for s in scenarios:
        if s.agent not in agents:
            raise OlavError(
                f"scenario {s.id!r}: field 'agent': no agent named {s.agent!r} in {ws.root}",
                hint="Agents: " + ", ".join(sorted(agents)),
            )
        reach = set(agents[s.agent].spec.tools)
        if s.agent == ORCHESTRATOR:  # the orchestrator delegates to every other agent
            reach |= {"task"}.union(*(a.spec.tools for a in agents.values()))
        if s.expect_tool is not None and s.expect_tool not in reach:
            raise OlavError(
                f"scenario {s.id!r}: field 'expect_tool': {s.agent} cannot call {s.expect_tool!r}",
                hint="Its tools: " + ", ".join(sorted(reach)),
            )


def _bench_config(ws: Workspace, model: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    values = dict(ws.config.values)
    agents = {name: dict(over) for name, over in ws.config.agents.items()}
    if model:  # --model wins over per-agent overrides in olav.yaml
        values["llm.model"] = model
        agents = {
            name: {k: v for k, v in over.items() if k != "model"} for name, over in agents.items()
        }
    script = values.get("llm.script")
    if script and not Path(script).expanduser().is_absolute():
        values["llm.script"] = str(ws.root / script)
    return values, agents


def _sandbox(
    ws: Workspace, root: Path, values: dict[str, Any], agents: dict[str, Any], logs: Path
) -> Workspace:
    """A throwaway copy of the workspace: agents, memory and domain data; empty exports."""
    from olav.memory.store.table import REEMBED_TABLE

    databases = root / ".olav" / "databases"
    databases.mkdir(parents=True)
    for folder in ws.agent_dirs():
        shutil.copytree(folder, root / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
    if ws.memory_path.is_dir():
        shutil.copytree(
            ws.memory_path,
            databases / "memory.lance",
            ignore=shutil.ignore_patterns(f"{REEMBED_TABLE}.lance"),
        )
    if ws.domain_path.is_file():
        shutil.copy2(ws.domain_path, databases / "domain.duckdb")
    paths = {
        "paths.databases": str(databases),
        "paths.exports": str(root / "exports"),
        "paths.logs": str(logs),
    }
    return Workspace(root=root, config=Config(values={**values, **paths}, agents=agents))


def _artifacts(root: Path, s: Scenario) -> tuple[list[str], bool | None]:
    if s.expect_artifact is None:
        return [], None  # a question: no file is expected
    found = sorted(p for p in root.glob(s.expect_artifact) if p.is_file())
    ok = bool(found)
    if ok and s.expect_contains is not None:
        needle = s.expect_contains
        ok = any(needle in p.read_text(encoding="utf-8", errors="replace") for p in found)
    return [p.relative_to(root).as_posix() for p in found], ok


def _one_run(box: Workspace, store: Any, s: Scenario, mode: str) -> dict[str, Any]:
    from olav.compose import agent_session
    from olav.llm.models import translate_model_error
    from olav.runtime.hooks import Callbacks
    from olav.runtime.runner import RunCancelled

    session = agent_session(
        box,
        agent=s.agent,
        callbacks=Callbacks(approver=lambda name, args: False),
        store=store,
        learn_from_failures=False,
        recall=mode != "off",  # memory off: every recall finds nothing
    )
    built = session.build()  # build the graph before the clock starts
    answer, error, outcome, rescue = "", None, "failed", {}
    started = time.perf_counter()
    try:
        turn = session.ask(s.prompt)
        answer, outcome, rescue = turn.answer, turn.outcome, turn.rescue
    except RunCancelled:
        raise
    except ModelError as exc:
        cause = exc.__cause__
        if cause is not None and translate_model_error(cause, box.config, built.model_name):
            raise  # the server is down or lacks the model: no point in more runs
        error = exc.one_line()
    except OlavError as exc:
        error = exc.one_line()
    seconds = time.perf_counter() - started
    # the run's captures and maintenance finish before its sandbox is removed (else they
    # write into a folder being deleted, and the removal can fail)
    session.wait_background()
    if mode == "off" and any(r.block for r in session.run.recalls):
        raise OlavError("memory off still injected a <relevant-memories> block (a bench bug)")
    tools = [e.tool for e in session.run.tool_events]
    files, artifact = _artifacts(box.root, s)
    return {
        "mode": mode,
        "model": built.model_name,
        "status": "error" if error else "completed",
        "outcome": outcome,
        "error": error,
        "salvaged": [c["family"] for c in rescue.get("salvaged", [])],
        "nudged": bool(rescue.get("nudged")),
        "seconds": round(seconds, 3),
        "tool_called": s.expect_tool in tools if s.expect_tool else None,
        "answered": answered(answer, s.expect_answer),
        "tool_calls": len(tools),
        "tools": tools,
        "artifact": artifact,
        "artifacts": files,
        "recalled": sorted({i for r in session.run.recalls for i in r.injected_ids}),
        "answer": " ".join(answer.split())[:ANSWER_CHARS],
    }


def answered(answer: str, expected: list[str] | None) -> bool | None:
    """Whether ``answer`` holds one of the expected answers (None: the scenario asks none)."""
    if expected is None:
        return None
    said = " ".join(answer.split()).casefold()
    return any(" ".join(e.split()).casefold() in said for e in expected)


def _drop_log_handlers(folder: Path) -> None:
    """Session attaches a file handler for the sandbox logs; detach it with the sandbox."""
    import logging

    logger = logging.getLogger("olav")
    for handler in list(logger.handlers):
        name = getattr(handler, "baseFilename", "")
        if name and Path(name).is_relative_to(folder):
            logger.removeHandler(handler)
            handler.close()


def run_steer(
    workspace: Workspace,
    scenarios: Sequence[Scenario],
    *,
    runs: int = 3,
    model: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every scenario ``runs`` times with memory on and off; a JSON-safe report."""
    from olav.memory.store.embedders import make_embedder
    from olav.memory.store.table import MemoryStore

    if runs < 1:
        raise OlavError(f"runs must be at least 1, got {runs}")
    if not scenarios:
        raise OlavError("no scenarios to run", hint=HINT)
    check_scenarios(workspace, scenarios)
    values, agents = _bench_config(workspace, model)
    embedder = make_embedder(workspace.config)  # loaded once, shared by every run
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {
        s.id: {m: [] for m in MODES} for s in scenarios
    }
    total, done = len(scenarios) * runs * len(MODES), 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="olav-steer-") as tmp:
        base = Path(tmp).resolve()
        try:
            for s in scenarios:
                for i in range(runs):
                    for mode in MODES if i % 2 == 0 else MODES[::-1]:
                        done += 1
                        if progress is not None:
                            progress(f"[{done}/{total}] {s.id}: memory {mode}, run {i + 1}/{runs}")
                        box = _sandbox(
                            workspace, base / f"run{done}", values, agents, base / "logs"
                        )
                        store = MemoryStore.for_workspace(box, embedder=embedder)
                        rows[s.id][mode].append(_one_run(box, store, s, mode))
                        shutil.rmtree(box.root, ignore_errors=True)
        finally:
            _drop_log_handlers(base)
    everything = {m: [r for s in scenarios for r in rows[s.id][m]] for m in MODES}
    report = {
        "benchmark": "steer",
        "provider": values["llm.provider"],
        "models": sorted({r["model"] for m in MODES for r in everything[m]}),
        "runs": runs,
        "isolation": "a throwaway copy of the workspace per run",
        "scenarios": scenario_blocks(scenarios, rows),
        "summary": summarize(everything),
        "seconds": round(time.perf_counter() - started, 2),
    }
    json.dumps(report)  # JSON-safe by construction; fail here rather than in a caller
    return report
