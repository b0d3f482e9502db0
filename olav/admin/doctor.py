"""Health checks behind ``olav doctor``. Each check returns a status and a fix hint."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def check_fragments(store: Any) -> Check:
    """Many small table fragments slow every search; compaction can get stuck behind the
    vector index of a big table until `olav memory gc` rebuilds it."""
    from olav.memory.store.table import MAX_FRAGMENTS

    frags = store.fragments()
    if frags <= 2 * MAX_FRAGMENTS:
        return Check("memory layout", "ok", f"{frags} fragment(s)")
    return Check(
        "memory layout",
        "warn",
        f"{frags} fragments: searches slow down until they are compacted",
        "Run `olav memory gc` (it compacts the table and rebuilds a stuck vector index)",
    )


def check_relevance(config: Any, embedder_name: str, workspace_dir: Path | None = None) -> Check:
    """Whether AutoRecall decides relevance, or injects the nearest memories whatever they
    are (relevance off, or an embedder nobody has calibrated floors for)."""
    from olav.memory.recall.calibration import (
        calibrated_floors,
        floors_key,
        read_workspace_calibration,
        relevance_floors,
    )

    if workspace_dir is not None:
        try:
            read_workspace_calibration(workspace_dir, strict=True)
        except OlavError as exc:
            return Check("relevance", "fail", exc.message, exc.hint or "")
    floors = relevance_floors(config, embedder_name, workspace_dir)
    key = floors_key(config, embedder_name)
    if floors is not None:
        if str(config["memory.relevance"]).strip().lower() != "auto":
            how = "memory.relevance"
        elif calibrated_floors(key) == floors:
            how = "calibrated with olav"
        else:
            how = "calibrated in this workspace by `olav memory calibrate`"
        return Check("relevance", "ok", f"floors for {key} ({how})")
    if str(config["memory.relevance"]).strip().lower() == "off":
        return Check("relevance", "ok", "off (memory.relevance): the nearest memories are sent")
    return Check(
        "relevance",
        "warn",
        f"no floors are calibrated for {key}: the nearest memories are sent to the "
        "model, relevant or not",
        "Run `olav memory calibrate` to measure floors for this embedder (a few minutes)",
    )


def check_ollama(base_url: str, model: str, timeout: float = 2.0) -> Check:
    import httpx

    from olav.core.net import tls_context

    try:
        resp = httpx.get(base_url.rstrip("/") + "/api/tags", timeout=timeout, verify=tls_context())
        resp.raise_for_status()
    except (httpx.HTTPError, ConnectionError, OSError) as exc:
        return Check(
            "ollama",
            "warn",
            f"not reachable at {base_url} ({type(exc).__name__})",
            "Start it with `ollama serve`, or set llm.base_url; memory works without it. "
            "With no model server, `olav engine start` runs a small one here (SmolLM2-135M: "
            "for trying olav, not for work)",
        )
    names = {m.get("name") for m in resp.json().get("models", [])}
    names |= {n.split(":")[0] for n in list(names) if n and n.endswith(":latest")}
    if model not in names:
        return Check(
            "ollama", "warn", f"reachable, but {model} is not pulled", f"Run `ollama pull {model}`"
        )
    return Check("ollama", "ok", f"{base_url} serves {model}")


def check_openai(config: Any, timeout: float = 2.0) -> Check:
    """An OpenAI-compatible server: it answers, and the window it reports (olav.llm.window)."""
    import httpx

    from olav.core.net import tls_context

    base = str(config["llm.base_url"]).rstrip("/")
    try:
        resp = httpx.get(base + "/models", timeout=timeout, verify=tls_context())
    except httpx.HTTPError as exc:
        return Check(
            "model server",
            "warn",
            f"not reachable at {base} ({type(exc).__name__})",
            "Start it (llama-server, vllm serve, LM Studio), or `olav engine start` for the "
            "small one olav runs itself (SmolLM2-135M: for trying olav, not for work)",
        )
    if resp.status_code != 200:
        return Check("model server", "warn", f"{base}/models answered {resp.status_code}",
                     "Check llm.base_url: it must end in /v1")  # fmt: skip
    from olav.llm.window import model_window

    window = model_window(config)
    said = (
        f"window {window.reported} tokens ({window.source})"
        if window.reported
        else f"it reports no window: llm.num_ctx ({window.requested}) is taken as its window"
    )
    return Check("model server", "ok", f"{base} answers; {said}")


def check_leftovers(memory_path: Path, *, repair: bool) -> Check:
    """A re-embed build that was interrupted leaves ``memory_reembed.lance`` beside the live
    table. It is never read (the live table is intact); --repair removes it."""
    import shutil

    from olav.memory.store.table import REEMBED_TABLE, TABLE, lock_path

    stale = memory_path / f"{REEMBED_TABLE}.lance"
    live = memory_path / f"{TABLE}.lance"
    if not (stale.is_dir() and live.is_dir()):
        return Check("leftovers", "ok", "no interrupted re-embed")
    if repair:
        from filelock import FileLock

        with FileLock(str(lock_path(memory_path)), timeout=60):
            shutil.rmtree(stale)
        return Check("leftovers", "ok", "removed the half-built table of an interrupted re-embed")
    return Check(
        "leftovers",
        "warn",
        "a half-built table from an interrupted re-embed is present",
        "Run `olav doctor --repair` to remove it (the live memory table is intact)",
    )


def check_team_table(loc: Any) -> list[Check]:
    """A memory table on object storage: the endpoint answers, the credentials are accepted,
    the bucket exists (each a one-line failure with its fix). The dimension is checked when
    the store opens."""
    import os

    from olav.memory.store.remote import s3_client, translate

    where = loc.storage_options.get("endpoint", "AWS S3")
    if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
        return [
            Check(
                "team memory",
                "fail",
                f"no credentials for {loc.uri}",
                "Export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (never put them in olav.yaml)",
            )
        ]
    bucket, key = loc.bucket_key()
    try:
        s3_client(loc).list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    except Exception as exc:
        err = translate(exc, loc)
        if err is None:
            return [Check("team memory", "fail", f"{where}: {type(exc).__name__}", str(exc)[:200])]
        return [Check("team memory", "fail", err.message, err.hint or "")]
    return [Check("team memory", "ok", f"{loc.uri} reachable at {where}, bucket {bucket}")]


def _memory_checks(ws: Any, loc: Any) -> tuple[list[Check], Any]:
    """The embedder (probed), the relevance setting and the memory table; returns the checks
    and the opened store (None when it could not be opened)."""
    checks: list[Check] = []
    store: Any = None
    try:
        from olav.memory.store.embedders import make_embedder

        embedder = make_embedder(ws.config)
        checks.append(Check("embedder", "ok", f"{embedder.name}, {embedder.dim}-d (probed)"))
        checks.append(check_relevance(ws.config, embedder.name, ws.databases))
        from olav.memory.store.table import MemoryStore

        store = MemoryStore.for_workspace(ws, embedder)
        where = loc.uri if loc.remote else ws.memory_path.name
        checks.append(
            Check("memory", "ok", f"{store.size()} rows in {where}, {embedder.dim}-d table")
        )
    except OlavError as exc:
        checks.append(Check("embedder/memory", "fail", exc.message, exc.hint or ""))
    return checks, store


def _index_checks(store: Any) -> list[Check]:
    """The FTS index and the table's fragments."""
    fts = store.index_state()["fts"]
    if fts is None:
        checks = [Check("fts index", "fail", "missing", "Run `olav kb import-guides`")]
    else:
        pending = fts.get("unindexed") or 0
        checks = [Check("fts index", "ok", f"{fts['indexed']} indexed, {pending} pending (ICU)")]
    return [*checks, check_fragments(store)]


def _audit_check(audit_path: Path) -> Check:
    """The audit database exists and its schema is at the latest migration."""
    try:
        from olav.audit.db import MIGRATIONS, applied_versions, connect

        if not audit_path.exists():
            raise OlavError(f"{audit_path} is missing", hint="Run `olav init` again")
        with connect(audit_path) as con:
            versions = applied_versions(con)
        latest = MIGRATIONS[-1][0]
        if versions and versions[-1] == latest:
            return Check("audit db", "ok", f"schema version {latest}")
        return Check(
            "audit db",
            "fail",
            f"schema at {versions}, expected {latest}",
            "Run `olav init` again to migrate it",
        )
    except OlavError as exc:
        return Check("audit db", "fail", exc.message, exc.hint or "")


def check_private(ws: Any, *, repair: bool) -> list[Check]:
    """The databases, logs and exports hold every operator's conversations: one warning for
    each of their folders or files that the group or others can read (olav.core.private).
    Every other command tightens what olav owns as it opens the workspace; --repair does it
    here. A folder configured outside the workspace is left to its owner."""
    import shlex

    from olav.core.private import DIR_MODE, FILE_MODE, loose_paths, secure_workspace

    if repair:
        secure_workspace(ws)
    checks = []
    for path, mode in loose_paths(ws):
        want = DIR_MODE if path.is_dir() else FILE_MODE
        checks.append(
            Check(
                "private files",
                "warn",
                f"{path} can be read by other users (mode {mode:o})",
                f"chmod {want:o} {shlex.quote(str(path))}",
            )
        )
    return checks or [Check("private files", "ok", "databases, logs and exports are private")]


def check_agents(ws: Any) -> list[Check]:
    """Every agent's SKILL.md loads and lists only tools olav has: an agent that names an
    unknown tool fails every run it is asked to make."""
    from olav.compose import known_tools, unknown_tools
    from olav.runtime.skills import load_agent

    checks: list[Check] = []
    count = 0
    for folder in ws.agent_dirs():
        try:
            agent = load_agent(folder)
        except OlavError as exc:
            checks.append(Check("agents", "fail", exc.message, exc.hint or ""))
            continue
        count += 1
        unknown = unknown_tools(agent.spec.tools)
        if unknown:
            names = ", ".join(repr(n) for n in unknown)
            checks.append(
                Check(
                    "agents",
                    "fail",
                    f"{folder / 'SKILL.md'}: tools lists {names}, which olav does not have",
                    "Fix its tools (known: " + ", ".join(known_tools()) + f") or `olav agent "
                    f"remove {agent.name}`",
                )
            )
    return checks or [Check("agents", "ok", f"{count} agents, every tool known")]


def run_checks(start: Path | None = None, *, repair: bool = False) -> list[Check]:
    from olav.core.config import Workspace, find_root

    checks: list[Check] = []
    try:
        root = find_root(start)
        checks.append(Check("workspace", "ok", str(root)))
        ws = Workspace.open(root, tighten=False)  # report the modes as they are
        checks.append(Check("config", "ok", str(ws.config_path)))
    except OlavError as exc:
        checks.append(Check("workspace/config", "fail", exc.message, exc.hint or ""))
        return checks
    checks += check_private(ws, repair=repair)
    checks += check_agents(ws)

    try:
        from olav.memory.store.remote import memory_location

        loc = memory_location(ws)
    except OlavError as exc:
        checks.append(Check("memory.uri", "fail", exc.message, exc.hint or ""))
        return checks
    if loc.remote:
        remote = check_team_table(loc)
        checks += remote
        if remote[-1].status == "fail":
            return checks
    elif ws.memory_path.is_dir():
        checks.append(check_leftovers(ws.memory_path, repair=repair))
    memory, store = _memory_checks(ws, loc)
    checks += memory
    if store is not None:
        checks += _index_checks(store)
    checks.append(_audit_check(ws.audit_path))
    if ws.config["llm.provider"] == "ollama":
        checks.append(check_ollama(ws.config["llm.base_url"], ws.config["llm.model"]))
    elif ws.config["llm.provider"] == "openai":
        checks.append(check_openai(ws.config))
    return checks
