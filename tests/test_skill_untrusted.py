"""``olav agent install`` treats a skill as untrusted input (docs/reliability.md, "Skills are
untrusted input"): each harm a hostile skill could do is tried for real, on a real workspace,
and the test checks the harm is absent (the files, not only the exit status)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from olav.core.errors import OlavError
from tests.helpers import OlavCli, OlavMain
from tests.reliability._support import assert_one_line_error

SKILL = """---
name: {name}
description: "A test agent."
tools:
  - db_query
{extra}---

# {name}
"""
GUIDE = """schema_version: 1
intent: count_pelicans
agent: {name}
category: usage_guide
keywords: [pelican]
body: |
  Count the pelicans before answering.
"""
CANARY = "canary-7f3a-not-for-the-prompt"


def _skill(parent: Path, name: str, extra: str = "") -> Path:
    folder = parent / name
    (folder / "guides").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL.format(name=name, extra=extra))
    (folder / "guides" / "pelicans.guide.yaml").write_text(GUIDE.format(name=name))
    return folder


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, a link's target, a folder's mark."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _top(ws: Path) -> set[str]:
    return {p.name for p in ws.iterdir()}


def _no_leftovers(ws: Path, before: set[str]) -> None:
    assert _top(ws) == before, _top(ws) ^ before  # no agent, no .olav-install-* staging


def _targz(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _skill_members(name: str) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    d = tarfile.TarInfo(name)
    d.type = tarfile.DIRTYPE
    return [
        (d, None),
        _file(f"{name}/SKILL.md", SKILL.format(name=name, extra="").encode()),
        _file(f"{name}/guides/pelicans.guide.yaml", GUIDE.format(name=name).encode()),
    ]


def _zeros_bomb(path: Path, name: str, megabytes: int) -> Path:
    """A .tar.gz whose one member is ``megabytes`` MB of zeros: concatenated gzip members (one
    compressed MB repeated), so the test never compresses more than 1 MB."""
    info = tarfile.TarInfo(f"{name}/references/zeros.bin")
    info.size = megabytes * 1024 * 1024
    head = b""
    for member, data in _skill_members(name):
        member.size = len(data or b"")
        head += member.tobuf(format=tarfile.GNU_FORMAT) + (data or b"")
        head += b"\0" * (-len(data or b"") % 512)
    mb = gzip.compress(b"\0" * (1024 * 1024), compresslevel=9)
    with path.open("wb") as fh:
        fh.write(gzip.compress(head + info.tobuf(format=tarfile.GNU_FORMAT)))
        for _ in range(megabytes):
            fh.write(mb)
        fh.write(gzip.compress(b"\0" * 1024))
    return path


@pytest.fixture
def staged(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The bytes each install had written into its staging folder when it was discarded."""
    import olav.admin.skill_install as agent_mod

    sizes: list[int] = []
    real = agent_mod._discard

    def measure(folder: Path) -> None:
        sizes.append(
            sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        )
        real(folder)

    monkeypatch.setattr(agent_mod, "_discard", measure)
    yield sizes


# -- names of workspace folders ------------------------------------------------------------


def test_a_skill_named_dot_olav_with_force_leaves_olav_intact(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    before, top = _tree(hash_ws / ".olav"), _top(hash_ws)
    source = _skill(hash_ws.parent / "evil", ".olav")
    res = olav_main("agent", "install", "--force", str(source))
    assert_one_line_error(res, "'.olav'", "workspace folder")
    assert _tree(hash_ws / ".olav") == before
    assert (hash_ws / ".olav" / "olav.yaml").is_file()
    _no_leftovers(hash_ws, top)


def test_a_skill_named_exports_is_refused_and_exports_untouched(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    (hash_ws / "exports").mkdir(exist_ok=True)
    (hash_ws / "exports" / "report.csv").write_text("mine\n")
    before, top = _tree(hash_ws / "exports"), _top(hash_ws)
    source = _skill(hash_ws.parent / "evil", "exports")
    for args in (["--force"], []):
        res = olav_main("agent", "install", *args, str(source))
        assert_one_line_error(res, "'exports'", "workspace folder")
    assert _tree(hash_ws / "exports") == before
    assert not (hash_ws / "exports" / "SKILL.md").exists()
    _no_leftovers(hash_ws, top)


def test_hidden_names_and_folders_olav_did_not_install_are_refused(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    res = olav_main("agent", "install", str(_skill(hash_ws.parent / "a", ".hidden")))
    assert_one_line_error(res, "'.hidden'", "starts with '.'")
    notes = hash_ws / "notes"
    notes.mkdir()
    (notes / "todo.md").write_text("keep me\n")
    top = _top(hash_ws)
    res = olav_main("agent", "install", "--force", str(_skill(hash_ws.parent / "b", "notes")))
    assert_one_line_error(res, str(notes), "not an agent olav installed", ".olav-agent")
    assert _tree(notes) == {"todo.md": hashlib.sha256(b"keep me\n").hexdigest()}
    _no_leftovers(hash_ws, top)


def test_force_replaces_a_template_agent_and_an_installed_one(hash_ws: Path, olav: OlavCli) -> None:
    """A template agent of ``olav init`` (no marker) is recognised; every install leaves the
    marker, so a second --force replaces the first install."""
    assert not (hash_ws / "admin" / ".olav-agent").exists()
    copy = hash_ws.parent / "src" / "admin"
    shutil.copytree(hash_ws / "admin", copy)  # the template agent as a skill folder
    (copy / "AGENT.md").write_text("# admin, reinstalled\n")
    res = olav("agent", "install", "--force", str(copy))
    assert res.exit_code == 0, res.output
    assert (hash_ws / "admin" / "AGENT.md").read_text() == "# admin, reinstalled\n"
    marker = json.loads((hash_ws / "admin" / ".olav-agent").read_text())
    assert marker["name"] == "admin" and marker["source"] == str(copy)
    res = olav("agent", "install", "--force", str(copy))
    assert res.exit_code == 0, res.output
    assert not list(hash_ws.glob(".olav-install-*"))


# -- symbolic links and special files ------------------------------------------------------


def test_a_link_to_a_file_outside_is_refused_naming_it(
    hash_ws: Path, olav_main: OlavMain, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(CANARY)
    source = _skill(hash_ws.parent / "src", "spy", "static_context:\n  - references/ctx.md\n")
    (source / "references").mkdir()
    link = source / "references" / "ctx.md"
    link.symlink_to(secret)
    top = _top(hash_ws)
    res = olav_main("agent", "install", str(source))
    assert_one_line_error(res, str(link), "outside the skill folder")
    _no_leftovers(hash_ws, top)
    hits = [p for p in hash_ws.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert hits == []
    if Path("/etc/hostname").is_file():
        link.unlink()
        link.symlink_to("/etc/hostname")
        assert_one_line_error(olav_main("agent", "install", str(source)), str(link))
        _no_leftovers(hash_ws, top)


def test_a_link_to_a_parent_folder_is_refused_and_nothing_is_left(
    hash_ws: Path, olav_main: OlavMain, staged: list[int]
) -> None:
    source = _skill(hash_ws.parent / "src", "loop")
    (source / "up").symlink_to("..", target_is_directory=True)
    (source / "self").symlink_to(".", target_is_directory=True)
    top = _top(hash_ws)
    res = olav_main("agent", "install", str(source))
    line = assert_one_line_error(res, "symbolic link")
    assert str(source / "up") in line or str(source / "self") in line
    _no_leftovers(hash_ws, top)
    assert staged and max(staged) < 64 * 1024  # no recursive half-copy was made


def test_a_link_inside_the_skill_is_copied_as_its_file(hash_ws: Path, olav: OlavCli) -> None:
    source = _skill(hash_ws.parent / "src", "linked", "static_context:\n  - ctx.md\n")
    (source / "notes.md").write_text("pelicans are birds\n")
    (source / "ctx.md").symlink_to("notes.md")
    res = olav("agent", "install", str(source))
    assert res.exit_code == 0, res.output
    copied = hash_ws / "linked" / "ctx.md"
    assert not copied.is_symlink() and copied.read_text() == "pelicans are birds\n"


def test_a_pipe_and_a_referenced_path_outside_are_refused(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    top = _top(hash_ws)
    source = _skill(hash_ws.parent / "src", "piped")
    os.mkfifo(source / "pipe")  # reading it would hang the install
    assert_one_line_error(olav_main("agent", "install", str(source)), str(source / "pipe"))
    source = _skill(
        hash_ws.parent / "src2", "peek", "static_context:\n  - ../../../.olav/olav.yaml\n"
    )
    assert_one_line_error(
        olav_main("agent", "install", str(source)), str(source / "SKILL.md"), "outside"
    )
    _no_leftovers(hash_ws, top)


def test_archive_links_out_hard_links_out_and_devices_are_refused(
    hash_ws: Path, olav_main: OlavMain, tmp_path: Path
) -> None:
    top = _top(hash_ws)
    cases: list[tuple[tarfile.TarInfo, str]] = []
    for linkname, kind in (("/etc/hostname", tarfile.SYMTYPE), ("../../../x", tarfile.SYMTYPE)):
        info = tarfile.TarInfo("bad/references/ctx.md")
        info.type, info.linkname = kind, linkname
        cases.append((info, "outside the archive"))
    hard = tarfile.TarInfo("bad/references/h.md")
    hard.type, hard.linkname = tarfile.LNKTYPE, "../outside.md"
    cases.append((hard, "outside"))
    dev = tarfile.TarInfo("bad/null")
    dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 3
    cases.append((dev, "device file"))
    for i, (member, needle) in enumerate(cases):
        archive = _targz(tmp_path / f"bad{i}.tar.gz", [*_skill_members("bad"), (member, None)])
        res = olav_main("agent", "install", str(archive))
        assert_one_line_error(res, str(archive), member.name, needle)
    _no_leftovers(hash_ws, top)
    assert not (tmp_path / "x").exists()


# -- archive bombs -------------------------------------------------------------------------


def test_a_200_mb_member_is_refused_from_its_header(
    hash_ws: Path, olav_main: OlavMain, tmp_path: Path, staged: list[int]
) -> None:
    archive = _zeros_bomb(tmp_path / "bomb.tar.gz", "bomb", 200)
    assert archive.stat().st_size < 1024 * 1024
    top = _top(hash_ws)
    res = olav_main("agent", "install", str(archive))
    assert_one_line_error(res, str(archive), "zeros.bin", "50 MB")
    _no_leftovers(hash_ws, top)
    assert staged == [staged[0]] and staged[0] < 64 * 1024  # nothing of the 200 MB written


def test_a_compression_bomb_under_the_size_bound_is_stopped_by_the_ratio(
    hash_ws: Path, olav_main: OlavMain, tmp_path: Path, staged: list[int]
) -> None:
    archive = _zeros_bomb(tmp_path / "ratio.tar.gz", "ratio", 30)
    top = _top(hash_ws)
    res = olav_main("agent", "install", str(archive))
    assert_one_line_error(res, str(archive), "100 times its size")
    _no_leftovers(hash_ws, top)
    bound = max(100 * archive.stat().st_size, 1024 * 1024)
    assert staged[0] <= bound + 64 * 1024  # counted as written, stopped at the bound


def test_too_many_files_are_refused(hash_ws: Path, olav_main: OlavMain, tmp_path: Path) -> None:
    many = [_file(f"many/references/{i}.md", b"") for i in range(2_001)]
    archive = _targz(tmp_path / "many.tar.gz", [*_skill_members("many"), *many])
    top = _top(hash_ws)
    res = olav_main("agent", "install", str(archive))
    assert_one_line_error(res, str(archive), "more than 2,000 files")
    _no_leftovers(hash_ws, top)


def test_the_total_size_bound_counts_every_member(
    hash_ws: Path,
    olav_main: OlavMain,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    staged: list[int],
) -> None:
    """Members each under the bound, together over it (the bound lowered to 1 MB here)."""
    import olav.admin.skill_install as agent_mod

    monkeypatch.setattr(agent_mod, "MAX_SKILL_BYTES", 1024 * 1024)
    chunk = os.urandom(400 * 1024)  # incompressible: the ratio does not stop it first
    parts = [_file(f"big/references/{i}.bin", chunk) for i in range(4)]
    archive = _targz(tmp_path / "big.tar.gz", [*_skill_members("big"), *parts])
    top = _top(hash_ws)
    res = olav_main("agent", "install", str(archive))
    assert_one_line_error(res, str(archive), "big/references/2.bin", "1 MB")
    _no_leftovers(hash_ws, top)
    assert staged[0] <= 1024 * 1024


# -- atomic install ------------------------------------------------------------------------


def test_a_failure_mid_copy_leaves_nothing(
    hash_ws: Path, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    import olav.admin.skill_install as agent_mod

    source = _skill(hash_ws.parent / "src", "half")
    for i in range(5):
        (source / f"f{i}.md").write_text("x" * 1000)
    real, calls = agent_mod._copy_stream, []

    def full_disk(src: object, dest: Path, budget: object) -> None:
        calls.append(dest)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(src, dest, budget)  # type: ignore[arg-type]

    monkeypatch.setattr(agent_mod, "_copy_stream", full_disk)
    top = _top(hash_ws)
    res = olav_main("agent", "install", str(source))
    assert_one_line_error(res, str(source), "No space left")
    _no_leftovers(hash_ws, top)


def test_a_failure_while_priming_keeps_the_old_agent_and_its_guides(
    hash_ws: Path, olav: OlavCli, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    import olav.memory.ingest.guides as guides_mod

    before, top = _tree(hash_ws / "netops"), _top(hash_ws)
    found = olav("memory", "list", "--json", "--category", "usage_guide").output
    old_guides = sorted(set(w for w in found.split('"') if w.startswith("guide_netops_")))
    assert old_guides
    source = _skill(hash_ws.parent / "src", "netops")  # a new netops with one guide
    real, calls = guides_mod.import_guides, []

    def failing(*args: object, **kw: object) -> object:
        calls.append(args)
        if len(calls) == 1:
            raise OlavError("the memory table went away")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(guides_mod, "import_guides", failing)
    res = olav_main("agent", "install", "--force", str(source))
    assert_one_line_error(res, "the memory table went away")
    assert _tree(hash_ws / "netops") == before  # byte for byte, and no marker added
    _no_leftovers(hash_ws, top)
    monkeypatch.setattr(guides_mod, "import_guides", real)
    found = olav("memory", "list", "--json", "--category", "usage_guide").output
    assert sorted(set(w for w in found.split('"') if w.startswith("guide_netops_"))) == old_guides


def _staging(ws: Path, pid: int, host: str, tag: str) -> Path:
    """A staging folder as an install with ``pid`` on ``host`` leaves it when it is killed."""
    folder = ws / f".olav-install-{pid}-u0-{tag}"
    (folder / "build").mkdir(parents=True)
    owner = {"pid": pid, "host": host, "mark": f"{pid}-u0"}
    (folder / "owner.json").write_text(json.dumps(owner))
    return folder


def test_the_next_install_clears_what_a_killed_one_left_and_puts_its_old_agent_back(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    """A kill -9 between an install's two renames leaves the old agent in its staging folder:
    the next install puts it back and removes the folder; one whose process lives, or on
    another host, stays."""
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    here = socket.gethostname()
    before = _tree(hash_ws / "netops")
    dead = _staging(hash_ws, gone.pid, here, "dead")
    (dead / "old").mkdir()
    (hash_ws / "netops").rename(dead / "old" / "netops")
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            live = _staging(hash_ws, alive.pid, here, "live")
            other = _staging(hash_ws, gone.pid, "another-host", "other")
            res = olav_main("agent", "install", str(_skill(hash_ws.parent / "src", "herons")))
            assert res.returncode == 0, res.stderr
        finally:
            alive.kill()
    assert "put back" in res.stdout and "netops" in res.stdout
    assert "removed 1 staging folder" in res.stdout
    assert not dead.exists()
    assert _tree(hash_ws / "netops") == before
    assert live.is_dir() and other.is_dir()
    assert (hash_ws / "herons" / "SKILL.md").is_file()
