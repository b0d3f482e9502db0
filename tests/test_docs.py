"""Every runnable command shown in the README and docs/ is run, so the docs cannot rot.

``console`` blocks hold commands prefixed by ``$ ``; they run in order in a fresh workspace
made with the bundled embedder. ``bash`` blocks are illustrative (they need a model server or
reinstall the project) and are only checked to name real make targets / olav commands.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import clean_env

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(console|bash)\n(.*?)```", re.S)


def blocks(kind: str) -> list[tuple[Path, str]]:
    out = []
    for doc in DOCS:
        for lang, body in BLOCK.findall(doc.read_text(encoding="utf-8")):
            if lang == kind:
                out.append((doc, body))
    return out


def test_readme_opens_with_make_run_and_make_test() -> None:
    first = blocks("bash")[0]
    assert first[0].name == "README.md"
    cmds = [ln.split("#")[0].strip() for ln in first[1].splitlines() if ln.strip()]
    assert cmds == ["make run", "make test"]


def test_make_targets_named_in_docs_exist() -> None:
    for _, body in blocks("bash"):
        for target in re.findall(r"^make (\w+)", body, re.M):
            res = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True)
            assert res.returncode == 0, target


@pytest.mark.slow
def test_console_commands_run(e5_ws: Path, tmp_path: Path) -> None:
    env = clean_env()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "olav"
    shim.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c 'from olav.cli.app import main; main()' \"$@\"\n"
    )
    shim.chmod(0o755)
    env["PATH"] = f"{bindir}:{env['PATH']}"
    cwd = e5_ws
    ran = 0
    for doc, body in blocks("console"):
        for line in body.splitlines():
            if not line.startswith("$ "):
                continue
            cmd = line[2:].split(" #")[0].strip()
            args = shlex.split(cmd)
            if args[0] == "cd":
                continue  # the workspace is already the cwd
            if args[:2] == ["olav", "init"]:
                args = ["olav", "init", str(cwd)]
            res = subprocess.run(
                args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
            )
            assert res.returncode == 0, f"{doc.name}: `{cmd}` failed:\n{res.stdout}\n{res.stderr}"
            ran += 1
    assert ran >= 6
