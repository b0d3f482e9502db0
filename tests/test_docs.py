"""Every runnable command shown in the README and docs/ is run, so the docs cannot rot.

``console`` blocks hold commands prefixed by ``$ ``; they run in order, in this process, in a
fresh workspace made with the bundled embedder. ``bash`` blocks are illustrative (they need a
model server or reinstall the project) and are only checked to name real make targets / olav
commands.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import OlavCli

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
def test_console_commands_run(e5_ws: Path, olav: OlavCli) -> None:
    """Every ``$ olav ...`` line, in order, through the CLI app in this process: one start-up
    (lancedb, the embedder) for all of them instead of one per command. The entry point as a
    separate process (start-up, one-line errors, no heavy import for --help) is
    tests/test_cli.py's subject."""
    ran = 0
    for doc, body in blocks("console"):
        for line in body.splitlines():
            if not line.startswith("$ "):
                continue
            cmd = line[2:].split(" #")[0].strip()
            args = shlex.split(cmd)
            if args[0] == "cd":
                continue  # the workspace is already the cwd
            assert args[0] == "olav", f"{doc.name}: `{cmd}` is not an olav command"
            if args[:2] == ["olav", "init"]:
                args = ["olav", "init", str(e5_ws)]
            res = olav(*args[1:])
            assert res.exit_code == 0, (
                f"{doc.name}: `{cmd}` failed:\n{res.output}\n{res.exception!r}"
            )
            ran += 1
    assert ran >= 6
