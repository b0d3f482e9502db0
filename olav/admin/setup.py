"""``olav init``: create or refresh a workspace from ``workspace_template/``."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.core.config import CONFIG_NAME, OLAV_DIR, Workspace, render_default_config
from olav.core.errors import EmbeddingDimMismatchError, OlavError
from olav.core.private import make_folders, private_dir

MANIFEST = "template-manifest.json"


def template_dir() -> Path:
    """The agent templates shipped with olav.

    An installed wheel carries the repository's ``workspace_template/`` as the package data
    ``olav/_template`` (see setup.py); an editable install or a source checkout reads the
    folder at the top of the repository.
    """
    here = Path(__file__).resolve().parents[1]  # the olav package
    for candidate in (here / "_template", here.parent / "workspace_template"):
        if candidate.is_dir():
            return candidate
    raise OlavError(
        f"olav's agent templates are missing from this installation ({here})",
        hint="Reinstall olav (`pipx install .` or a wheel); in a checkout, run `make install`",
    )


def is_vectors_file(rel: str) -> bool:
    """The shipped guide vectors (olav.admin.template_vectors) stay in the package."""
    return "/" not in rel and rel.startswith("template-vectors-") and rel.endswith(".npz")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class InitReport:
    root: Path
    created: bool
    copied: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    kept_edited: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    primed: Any = None  # ImportSummary
    reprimed_for_embedder: bool = False
    config_reset: bool = False  # olav.yaml was started again from the default


def sync_template(root: Path, report: InitReport) -> None:
    """Copy template files; refresh unedited ones; keep (and never clobber) edited ones."""
    src_root = template_dir()
    manifest_path = root / OLAV_DIR / MANIFEST
    manifest: dict[str, str] = (
        json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for src in sorted(p for p in src_root.rglob("*") if p.is_file()):
        rel = src.relative_to(src_root).as_posix()
        if "__pycache__" in rel or is_vectors_file(rel):
            continue
        dest = root / rel
        new_hash = _sha(src)
        if not dest.exists():
            if rel in manifest:  # the user deleted it on purpose
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
            report.copied.append(rel)
        else:
            current = _sha(dest)
            if current == new_hash:
                pass
            elif manifest.get(rel) == current:  # unedited copy of an older template
                backup = root / OLAV_DIR / "backups" / stamp / rel
                backup.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(dest, backup)
                shutil.copy2(src, dest)
                report.refreshed.append(rel)
                report.backups.append(str(backup.relative_to(root)))
            else:
                report.kept_edited.append(rel)
                continue  # keep the manifest's record of what we last installed
        manifest[rel] = new_hash
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))


def set_memory_settings(config_path: Path, values: dict[str, Any]) -> None:
    """Write ``memory.*`` keys (``uri``, ``storage_options.endpoint`` ...) into olav.yaml."""
    set_settings(config_path, "memory", values)


def set_settings(config_path: Path, section: str, values: dict[str, Any]) -> None:
    """Write ``section.*`` keys into olav.yaml, keeping its comments when the key's line is
    in that section's block, as ``olav init`` writes it (else the file is written anew)."""
    import re

    import yaml

    from olav.core import yamltext

    text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    for key, value in values.items():
        line = f"  {key}: {json.dumps(value)}"
        block = re.search(rf"^{re.escape(section)}:[ \t]*\n(?:(?:[ \t][^\n]*+)?\n)*+", text, re.M)
        pattern = re.compile(rf"^  {re.escape(key)}: .*$", re.M)
        found = len(pattern.findall(block.group(0))) if block is not None else -1
        if block is not None and found == 1:
            body = pattern.sub(line.replace("\\", "\\\\"), block.group(0))
            text = text[: block.start()] + body + text[block.end() :]
            continue
        if block is not None and found == 0 and "." not in key:  # a new line at its end
            body = block.group(0)
            kept = body.rstrip("\n") + "\n"
            text = (
                text[: block.start()] + kept + line + "\n" + body[len(kept) :] + text[block.end() :]
            )
            continue
        data = yamltext.safe_load(text) or {}
        part = data.setdefault(section, {})
        head, _, rest = key.partition(".")
        if rest:
            part.setdefault(head, {})[rest] = value
        else:
            part[key] = value
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    config_path.write_text(text, encoding="utf-8")


def memory_uri_settings(uri: str, endpoint: str = "") -> dict[str, Any]:
    """The olav.yaml keys for ``olav init --memory-uri URI [--memory-endpoint URL]``."""
    from olav.memory.store.remote import parse_uri

    values: dict[str, Any] = {"uri": parse_uri(uri, "--memory-uri")}
    if endpoint:
        values["storage_options.endpoint"] = endpoint
        values["storage_options.allow_http"] = endpoint.startswith("http://")
    return values


def enclosing_workspace(root: Path) -> Path | None:
    """The workspace that ``root`` lies inside (a parent folder with ``.olav/olav.yaml``)."""
    for parent in root.parents:
        if (parent / OLAV_DIR / CONFIG_NAME).is_file():
            return parent
    return None


def init_workspace(
    root: Path,
    *,
    prime: bool = True,
    memory: dict[str, Any] | None = None,
    reset_config: bool = False,
) -> InitReport:
    """Create or refresh the workspace at ``root``; ``memory`` sets memory.* keys first
    (see :func:`memory_uri_settings`); ``reset_config`` writes the default olav.yaml, the
    current one kept in .olav/backups/. A workspace is never made inside another, and a new
    one whose set-up fails leaves nothing behind."""
    root = root.expanduser().resolve()
    outer = enclosing_workspace(root)
    if outer is not None:
        raise OlavError(
            f"{root} is inside the workspace {outer}: a workspace there would nest its agents "
            "in the outer one's",
            hint=f"Run olav in {outer}, or `olav init` a folder outside it",
        )
    created = not (root / OLAV_DIR).is_dir()
    # what the folder held before: a failed first init removes everything else in it
    before = set(root.iterdir()) if root.is_dir() else None
    report = InitReport(root=root, created=created)
    try:
        return _init(root, report, prime=prime, memory=memory, reset_config=reset_config)
    except BaseException:
        if created:  # nothing of a workspace that could not be made
            _undo(root, report, before)
        raise


def _undo(root: Path, report: InitReport, before: set[Path] | None) -> None:
    """Remove what a failed first ``olav init`` made: .olav/, the template files it copied
    and the folders it created (never a file that was there before), and ``root`` itself
    when init created it."""
    shutil.rmtree(root / OLAV_DIR, ignore_errors=True)
    for rel in report.copied:
        (root / rel).unlink(missing_ok=True)
    if before is None:
        shutil.rmtree(root, ignore_errors=True)
        return
    for entry in root.iterdir():
        if (
            entry not in before
            and entry.is_dir()
            and not any(p.is_file() for p in entry.rglob("*"))
        ):
            shutil.rmtree(entry, ignore_errors=True)


def _init(
    root: Path,
    report: InitReport,
    *,
    prime: bool,
    memory: dict[str, Any] | None,
    reset_config: bool,
) -> InitReport:
    root.mkdir(parents=True, exist_ok=True)
    private_dir(root / OLAV_DIR)
    config_path = root / OLAV_DIR / CONFIG_NAME
    if reset_config and config_path.exists():
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        backup = root / OLAV_DIR / "backups" / stamp / CONFIG_NAME
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(config_path, backup)
        config_path.unlink()
        report.backups.append(str(backup.relative_to(root)))
        report.config_reset = True
    if not config_path.exists():
        config_path.write_text(render_default_config(), encoding="utf-8")
    if memory:
        set_memory_settings(config_path, memory)
    ws = Workspace.open(root)
    make_folders(ws)  # 0700: what the libraries create inside stays the owner's
    if not ws.config["memory.uri"]:
        private_dir(ws.memory_path)  # lancedb takes the empty folder as a new database
    sync_template(root, report)

    from olav.audit.db import migrate

    migrate(ws.audit_path)
    load_domain_data(ws)
    if prime:
        try:
            report.primed, report.reprimed_for_embedder = prime_guides(ws)
        except OlavError:
            raise
        except Exception as exc:
            uri = ws.config["memory.uri"]
            if not uri:
                raise
            # a remote table that cannot be reached: one line, not the storage layer's trace
            first = " ".join(str(exc).split(",")[0].split())[:200]
            raise OlavError(
                f"cannot open the memory table at {uri}: {first}",
                hint="Check the bucket name, the AWS_* credentials and --memory-endpoint",
            ) from exc
    return report


def open_store_for_priming(ws: Workspace) -> tuple[Any, bool]:
    """Open the store; if only directive rows exist and the embedder changed, rebuild it.

    Re-priming is safe then, because every row can be regenerated from the guide files. When
    any other row exists (captures, user facts ...), the mismatch error stands.
    """
    from olav.memory.store.embedders import make_embedder
    from olav.memory.store.search import SearchTuning
    from olav.memory.store.table import MemoryStore

    embedder = make_embedder(ws.config)
    try:
        return MemoryStore.for_workspace(ws, embedder), False
    except EmbeddingDimMismatchError:
        from olav.memory.store.connection import only_directives
        from olav.memory.store.remote import memory_location

        loc = memory_location(ws)
        if not only_directives(loc):
            raise
    store = MemoryStore(
        loc,
        embedder,
        tuning=SearchTuning.of(ws.config),
        allow_destructive=True,
    )
    return store, True


def prime_guides(ws: Workspace, store: Any = None) -> tuple[Any, bool]:
    from olav.memory.ingest.guides import find_guides, import_guides

    reprimed = False
    if store is None:
        store, reprimed = open_store_for_priming(ws)
    files = [f for d in ws.agent_dirs() for f in find_guides(d)]
    summary = import_guides(
        store,
        files,
        base=ws.root,
        prune_under=ws.root,
        known_vectors=shipped_vectors(store.embedder),
    )
    return summary, reprimed


def shipped_vectors(embedder: Any) -> dict[str, Any]:
    """{text hash: vector} of the template guides shipped for ``embedder`` (written by
    ``make template-vectors``); empty for any other embedder."""
    from olav.memory.store.textvectors import load_vectors, vectors_file

    return load_vectors(vectors_file(template_dir(), embedder.name), embedder.name, embedder.dim)


def load_domain_data(ws: Workspace) -> list[str]:
    """(Re)build domain.duckdb from every agent's ``data/*.csv`` (one table per file)."""
    import duckdb

    from olav.audit.db import connect

    csvs = sorted(p for d in ws.agent_dirs() for p in (d / "data").glob("*.csv"))
    loaded = []
    with connect(ws.domain_path) as con:
        for csv in csvs:
            table = csv.stem.replace("-", "_")
            try:
                con.execute(
                    f'CREATE OR REPLACE TABLE "{table}" AS SELECT * FROM read_csv_auto(?)',
                    [str(csv)],
                )
            except duckdb.Error as exc:
                raise OlavError(
                    f"{csv}: cannot be loaded as a table ({exc})",
                    hint="Fix the CSV header and rows",
                ) from None
            loaded.append(table)
    return loaded
