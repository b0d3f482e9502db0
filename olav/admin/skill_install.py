"""``olav agent install``'s machinery, for a skill is untrusted input (docs/reliability.md,
"Skills are untrusted input"); the command (olav/cli/agent.py) only shows what it did.

Refused: a name of a workspace folder (``.olav``, the exports, databases and logs folders, any
name starting with ``.``); replacing a folder olav did not install (``MARKER``, or a template
agent of ``olav init``); a link out of the skill, to a folder or nowhere, and any pipe or
device; an archive past ``MAX_SKILL_FILES`` entries, ``MAX_SKILL_BYTES`` or ``MAX_RATIO`` times
its size (past ``RATIO_FROM_BYTES``), counted as it is written. The agent is built in a staging
folder in the workspace root (``.olav-install-PID-START-*``) and renamed in, the old one aside
and put back on failure; the next install removes a staging folder whose process is gone.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import socket
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from olav.core.errors import OlavError
from olav.core.procs import process_gone, this_process

MARKER = ".olav-agent"  # in each agent folder installed: --force replaces only those (or templates)
MAX_SKILL_FILES = 2_000
MAX_SKILL_BYTES = 50 * 1024 * 1024
MAX_RATIO = 100
RATIO_FROM_BYTES = 1024 * 1024  # a small archive of text may well unpack to 100 times its size
STAGING_PREFIX = ".olav-install-"
_OWNER = "owner.json"  # in a staging folder: the pid, host and mark of the install
_CHUNK = 1 << 16


@dataclass
class Installed:
    """What one install did: the agent, its guides primed, and what it found left over."""

    agent: Any  # olav.runtime.skills.Agent
    summary: Any  # olav.memory.ingest.guides.ImportSummary
    reprimed: bool  # the embedder changed, so the template guides were primed again
    cleared: list[Path] = field(default_factory=list)  # staging folders of killed installs
    restored: list[Path] = field(default_factory=list)  # old agents they held aside, put back


def install_skill(ws: Any, source: Path, *, force: bool = False) -> Installed:
    """Install the skill folder or .tar.gz ``source`` into workspace ``ws``: built and
    validated in a staging folder, renamed into place, its guides primed; on any failure the
    workspace is left as it was."""
    from olav.admin.setup import open_store_for_priming, prime_guides

    cleared, restored = clear_stale_staging(ws)
    staging = _stage(ws)
    try:
        built, shown = _build(source, staging)
        try:
            agent = _validate(ws, built)
        except OlavError as exc:
            raise _shown(exc, built, shown) from None
        dest = ws.root / agent.name
        exists = os.path.lexists(dest)
        if exists and not installed_by_olav(ws, dest):
            hint = "olav replaces only the agents it installed; rename the skill, or move the "
            hint += "folder away first"
            raise _unsafe(dest, f"is not an agent olav installed (it has no {MARKER} file)", hint)
        if exists and not force:
            raise OlavError(f"agent {agent.name} already exists", hint="Use --force to replace it")
        _write_marker(built, agent.name, Path(os.path.abspath(source)))
        store, reprimed = open_store_for_priming(ws)
        aside = staging / "old" / dest.name if exists else None
        summary = _swap_in(ws, store, built, dest, aside)
    finally:
        _discard(staging)
    if reprimed:
        prime_guides(ws, store)
    return Installed(agent, summary, reprimed, cleared, restored)


def _stage(ws: Any) -> Path:
    """A new staging folder in the workspace root, named for this process (and its host)."""
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{this_process()}-", dir=ws.root))
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "mark": this_process()}
    (staging / _OWNER).write_text(json.dumps(owner) + "\n", encoding="utf-8")
    return staging


def _abandoned(staging: Path) -> bool:
    """Whether the install that made ``staging`` is gone; unknown (another host's) is not."""
    try:
        owner = json.loads((staging / _OWNER).read_text(encoding="utf-8"))
        return process_gone(int(owner["pid"]), str(owner["host"]), str(owner["mark"]))
    except (OSError, ValueError, TypeError, KeyError):
        return False


def clear_stale_staging(ws: Any) -> tuple[list[Path], list[Path]]:
    """Remove the staging folders of installs that were killed: the folders removed, and the
    agents put back that such an install had renamed aside (a kill between its two renames)."""
    cleared, restored = list[Path](), list[Path]()
    for staging in sorted(ws.root.glob(STAGING_PREFIX + "*")):
        if staging.is_symlink() or not staging.is_dir() or not _abandoned(staging):
            continue
        old = staging / "old"
        for agent in sorted(old.iterdir()) if old.is_dir() and not old.is_symlink() else []:
            dest = ws.root / agent.name  # killed between its renames: the new one never came
            if _AGENT_NAME.fullmatch(agent.name) and not os.path.lexists(dest):
                agent.rename(dest)
                restored.append(dest)
        _discard(staging)
        cleared.append(staging)
    return cleared, restored


def _check_tools(folder: Path, tools: list[str]) -> None:
    """An agent that lists a tool olav does not have would fail every run it is asked to
    make: refused at install, naming the tools there are."""
    from olav.compose import known_tools, unknown_tools

    unknown = unknown_tools(tools)
    if unknown:
        names = ", ".join(repr(n) for n in unknown)
        raise OlavError(
            f"{folder / 'SKILL.md'}: tools lists {names}, which olav does not have",
            hint="Known tools: " + ", ".join(known_tools()),
        )


class UnsafeSkillError(OlavError):
    """A skill that would reach outside its folder, outgrow the bounds or overwrite what is
    not an agent olav installed."""


def _unsafe(what: Path | str, problem: str, hint: str) -> UnsafeSkillError:
    return UnsafeSkillError(f"{what}: {problem}", hint=hint)


_BOUNDS_HINT = (
    f"olav installs a skill of at most {MAX_SKILL_FILES:,} files and folders and "
    f"{MAX_SKILL_BYTES // (1024 * 1024)} MB; check the archive came from whom you think"
)


def _too_large(source: Path) -> UnsafeSkillError:
    mb = MAX_SKILL_BYTES // (1024 * 1024)  # read when raised: a test lowers the bound
    return _unsafe(source, f"unpacks to more than {mb} MB", _BOUNDS_HINT)


class _Budget:
    """What one copy or one unpacking may write: entries and bytes, counted as they are
    written (never after)."""

    def __init__(self, source: Path) -> None:
        self.source, self.entries, self.bytes = source, 0, 0

    def entry(self) -> None:
        self.entries += 1
        if self.entries > MAX_SKILL_FILES:
            raise _unsafe(
                self.source, f"holds more than {MAX_SKILL_FILES:,} files and folders", _BOUNDS_HINT
            )

    def reserve(self, size: int, name: str) -> None:
        """Refuse a member whose header says it would pass the bound, before writing it."""
        if self.bytes + size > MAX_SKILL_BYTES:
            past = f"takes it past {MAX_SKILL_BYTES // (1024 * 1024)} MB"
            raise _unsafe(self.source, f"{name} ({size:,} bytes) {past}", _BOUNDS_HINT)

    def take(self, n: int) -> None:
        self.bytes += n
        if self.bytes > MAX_SKILL_BYTES:
            raise _too_large(self.source)


def _copy_stream(src: IO[bytes], dest: Path, budget: _Budget) -> None:
    """Copy into a new file ``dest``; each chunk is counted before it is written."""
    with open(dest, "xb") as out:
        while chunk := src.read(_CHUNK):
            budget.take(len(chunk))
            out.write(chunk)


def _open_nofollow(path: Path) -> IO[bytes]:
    return os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb")


_LINK_HINT = "Replace the link with the file itself"
_REMOVE = "Remove it from the skill"


def _link_target(link: Path, root: Path) -> Path:
    """The regular file inside ``root`` that ``link`` leads to; anything else is refused."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        raise _unsafe(link, "a symbolic link that points nowhere (or loops)", _LINK_HINT) from None
    if not target.is_relative_to(root):
        problem = f"a symbolic link to {target}, outside the skill folder {root}"
        raise _unsafe(link, problem, "olav follows no link out of a skill. " + _LINK_HINT)
    if target.is_dir():
        raise _unsafe(link, f"a symbolic link to the folder {target}", "Copy the folder instead")
    if not stat.S_ISREG(os.stat(target).st_mode):
        raise _unsafe(link, f"a symbolic link to {target}, which is not a regular file", _LINK_HINT)
    return target


def _copy_skill(src: Path, dest: Path, budget: _Budget) -> None:
    """Copy the skill folder ``src`` into the new folder ``dest``: regular files, folders,
    and links to regular files inside ``src`` (as the file's content). A link that leads out,
    to a folder or nowhere, and any other kind of file, is refused, naming it."""
    root = src.resolve()

    def fail(err: OSError) -> None:
        raise err

    dest.mkdir()
    for dirpath, dirnames, filenames in os.walk(root, onerror=fail):
        here = Path(dirpath)
        out = dest / here.relative_to(root)
        for name in dirnames:  # a link to a folder is listed here and never walked into
            budget.entry()
            if (here / name).is_symlink():
                _link_target(here / name, root)  # raises: outside, or a folder
            (out / name).mkdir()
        for name in filenames:
            if here == root and name == MARKER:
                continue  # the marker is olav's to write
            budget.entry()
            path = here / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                path = _link_target(path, root)
            elif not stat.S_ISREG(mode):
                raise _unsafe(path, "not a regular file (a pipe, socket or device)", _REMOVE)
            with _open_nofollow(path) as fh:
                _copy_stream(fh, out / name, budget)
            os.chmod(out / name, os.stat(path).st_mode & 0o755)


class _Metered:
    """The unpacked stream of an archive, read by tarfile: every byte counted, so neither the
    content nor the headers can pass the bounds, whatever a header says."""

    def __init__(self, fh: gzip.GzipFile, archive: Path) -> None:
        self.fh, self.archive = fh, archive
        self.packed = max(archive.stat().st_size, 1)
        self.read_bytes = 0
        # the content bound, plus the headers and padding of the most members allowed
        self.cap = MAX_SKILL_BYTES + (MAX_SKILL_FILES + 2) * 2048 + RATIO_FROM_BYTES

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n if n >= 0 else _CHUNK)
        self.read_bytes += len(data)
        if self.read_bytes > self.cap:
            raise _too_large(self.archive)
        if self.read_bytes > RATIO_FROM_BYTES and self.read_bytes > MAX_RATIO * self.packed:
            problem = f"unpacks to more than {MAX_RATIO} times its size of {self.packed:,} bytes"
            hint = "That is a compression bomb, not a skill. " + _BOUNDS_HINT
            raise _unsafe(self.archive, problem, hint)
        return data


def _member_error(archive: Path, member: tarfile.TarInfo, exc: Exception) -> UnsafeSkillError:
    name = member.name
    if isinstance(exc, tarfile.SpecialFileError):
        problem = f"member {name} is a device file or pipe"
    elif isinstance(exc, tarfile.AbsoluteLinkError | tarfile.LinkOutsideDestinationError):
        problem = f"member {name} is a link to {member.linkname}, outside the archive"
    else:
        problem = f"member {name} would be written outside the archive's folder"
    return _unsafe(archive, problem, "olav unpacks only files and folders inside the skill")


def _unpack_member(
    tar: tarfile.TarFile, member: tarfile.TarInfo, into: Path, archive: Path, budget: _Budget
) -> None:
    budget.entry()
    try:
        safe = tarfile.data_filter(member, str(into))
    except tarfile.FilterError as exc:
        raise _member_error(archive, member, exc) from None
    path = into / safe.name
    if os.path.lexists(path) and not path.is_dir():
        path.unlink()  # a later member of the same name wins, as tar has it
    if safe.isdir():
        path.mkdir(parents=True, exist_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if safe.isreg():
        budget.reserve(safe.size, safe.name)
        src = tar.extractfile(member)
        assert src is not None  # a regular member always has content
        _copy_stream(src, path, budget)
    elif safe.issym():
        os.symlink(safe.linkname, path)  # inside (the filter said); _copy_skill copies its file
        return
    elif safe.islnk():
        target = into / safe.linkname
        if not stat.S_ISREG(os.lstat(target).st_mode):
            raise _unsafe(archive, f"member {safe.name} is a hard link to no file", _LINK_HINT)
        budget.reserve(target.stat().st_size, safe.name)
        with _open_nofollow(target) as fh:
            _copy_stream(fh, path, budget)
    else:
        raise _unsafe(archive, f"member {safe.name} is not a file, folder or link", _REMOVE)
    if safe.mode is not None:
        os.chmod(path, safe.mode & 0o755)


def _unpack(archive: Path, into: Path) -> Path:
    """Unpack the .tar.gz ``archive`` into ``into`` within the bounds; the folder holding its
    one SKILL.md."""
    budget = _Budget(archive)
    try:
        with (
            open(archive, "rb") as raw,
            gzip.GzipFile(fileobj=raw) as gz,
            tarfile.open(fileobj=_Metered(gz, archive), mode="r|") as tar,  # type: ignore[call-overload]
        ):
            for member in tar:
                _unpack_member(tar, member, into, archive, budget)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise OlavError(
            f"{archive}: not a readable .tar.gz ({exc})", hint="Pass a skill folder or a .tar.gz"
        ) from None
    found = [Path(d) for d, _, files in os.walk(into) if "SKILL.md" in files]
    if len(found) != 1 or found[0] == into:
        raise OlavError(
            f"{archive} must hold exactly one folder with a SKILL.md",
            hint="Pack the skill's folder: tar czf NAME.tar.gz NAME/",
        )
    return found[0]


def _shown(exc: OlavError, built: Path, shown: Path) -> OlavError:
    """An error about the copy being built, naming where the skill came from instead."""
    exc.message = exc.message.replace(str(built), str(shown))
    exc.args = (exc.one_line(),)
    return exc


def _validate(ws: Any, folder: Path) -> Any:
    """The agent of the built folder, checked as before plus: its name is no workspace
    folder's, and every file SKILL.md refers to lies inside the folder."""
    from olav.memory.ingest.guides import find_guides, load_guide
    from olav.runtime.skills import load_agent

    agent = load_agent(folder)
    _check_name(ws, agent.name)
    _check_tools(folder, agent.spec.tools)
    for guide in find_guides(folder):
        load_guide(guide)
    for rel in [*agent.spec.static_context, *(o.file for o in agent.spec.on_intent)]:
        if not (folder / rel).resolve().is_relative_to(folder.resolve()):
            raise _unsafe(
                folder / "SKILL.md",
                f"referenced file {rel} is outside the skill folder",
                "Refer to files inside the skill, e.g. references/notes.md",
            )
    return agent


def _reserved(ws: Any) -> dict[str, Path]:
    """The workspace folders no agent may be named after: .olav and the first folder of each
    configured path inside the workspace (exports/ by default)."""
    from olav.core.config import OLAV_DIR

    names = {OLAV_DIR.casefold(): ws.olav_dir}
    for path in (ws.exports, ws.databases, ws.logs):
        rel = Path(os.path.relpath(os.path.abspath(path), ws.root))
        if rel.parts and rel.parts[0] not in ("..", "."):
            names[rel.parts[0].casefold()] = ws.root / rel.parts[0]
    names.setdefault("exports", ws.root / "exports")
    return names


_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9_\-]*")  # a guide's agent: field (guides.py)


def _check_name(ws: Any, name: str) -> None:
    hint = "Rename the skill: its folder and the name in SKILL.md"
    reserved = _reserved(ws).get(name.casefold())
    if reserved is not None:
        raise _unsafe(f"agent name {name!r}", f"is the workspace folder {reserved}", hint)
    if name.startswith("."):
        raise _unsafe(f"agent name {name!r}", "starts with '.', which workspace folders do", hint)
    if not _AGENT_NAME.fullmatch(name):
        problem = "is not lowercase letters, digits, '_' or '-' (as a guide's agent: field)"
        raise _unsafe(f"agent name {name!r}", problem, hint)


def _template_agents(ws: Any) -> set[str]:
    """The agents ``olav init`` copied from the template: the folders its manifest names,
    and the template's own agent folders."""
    from olav.admin.setup import MANIFEST, template_dir

    names: set[str] = set()
    try:
        manifest = json.loads((ws.olav_dir / MANIFEST).read_text(encoding="utf-8"))
        names |= {rel.split("/")[0] for rel in manifest if rel.endswith("/SKILL.md")}
    except (OSError, ValueError, AttributeError):
        pass
    with contextlib.suppress(OlavError):
        names |= {p.parent.name for p in template_dir().glob("*/SKILL.md")}
    return names


def installed_by_olav(ws: Any, folder: Path) -> bool:
    """Whether ``folder`` is an agent olav installed: its marker, or a template agent."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    marker = folder / MARKER
    if marker.is_file() and not marker.is_symlink():
        return True
    return folder.name in _template_agents(ws) and (folder / "SKILL.md").is_file()


def _write_marker(folder: Path, name: str, source: Path) -> None:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    record = {"name": name, "source": str(source), "installed_at": now}
    (folder / MARKER).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _discard(folder: Path) -> None:
    """Remove the staging folder of an install (what it built, or the old agent replaced)."""
    shutil.rmtree(folder, ignore_errors=True)


def _build(source: Path, staging: Path) -> tuple[Path, Path]:
    """Copy (or unpack) ``source`` into ``staging``: the built agent folder and the path to
    name in errors about it."""
    origin = Path(os.path.abspath(source))
    built_root = staging / "build"
    built_root.mkdir()
    try:
        if source.is_dir():
            folder, shown = origin, origin
        elif source.name.endswith((".tar.gz", ".tgz")) and source.is_file():
            into = staging / "unpacked"
            into.mkdir()
            folder = _unpack(origin, into)
            shown = origin / folder.relative_to(into)
        else:
            raise OlavError(
                f"{source} is not a skill folder or .tar.gz", hint="Pass a folder or archive"
            )
        built = built_root / folder.name
        try:
            _copy_skill(folder, built, _Budget(origin))
        except OlavError as exc:  # name the skill as given, not the unpacked copy
            raise _shown(_shown(exc, folder.resolve(), shown), folder, shown) from None
    except OSError as exc:
        raise OlavError(f"cannot copy the skill {source}: {exc}", hint="Check the disk") from exc
    return built, shown


def _swap_in(ws: Any, store: Any, built: Path, dest: Path, aside: Path | None) -> Any:
    """Rename ``built`` to ``dest`` (the old ``dest`` renamed to ``aside`` first) and prime its
    guides; on any failure the new folder goes and the old one, and its guides, come back."""
    from olav.core.fsutil import fsync_dir
    from olav.memory.ingest.guides import find_guides, import_guides

    moved_old = moved_new = False
    try:
        if aside is not None:
            aside.parent.mkdir(exist_ok=True)
            dest.rename(aside)
            moved_old = True
        built.rename(dest)
        moved_new = True
        summary = import_guides(store, find_guides(dest), base=ws.root, prune_under=dest)
    except BaseException:
        if moved_new:
            dest.rename(built)
        if moved_old and aside is not None:
            aside.rename(dest)
        if moved_new:  # memory as the folder now is: the old agent's guides, or none
            try:
                restored = find_guides(dest) if moved_old else []
                import_guides(store, restored, base=ws.root, prune_under=dest)
            except Exception:  # the first failure is the one to report
                pass
        raise
    fsync_dir(ws.root)
    return summary
