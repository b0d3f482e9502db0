"""What a user gets from an installed olav: the templates as package data, the version, shell
completion. (Building and installing the real wheel is `.ci/wheel-smoke`, run by CI.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

from tests.helpers import clean_env, write_config

ROOT = Path(__file__).resolve().parent.parent


def _setup_config() -> tuple[list[str], dict[str, str]]:
    """The packages and package_dir that setup.py hands to setuptools."""
    code = (
        "import json, setuptools, distutils.core\n"
        "d = distutils.core.run_setup('setup.py', stop_after='init')\n"
        "print(json.dumps([d.packages, d.package_dir]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    packages, package_dir = json.loads(out.stdout.strip().splitlines()[-1])
    return packages, package_dir


def test_every_template_folder_ships_as_package_data() -> None:
    packages, package_dir = _setup_config()
    assert package_dir == {"olav._template": "workspace_template"}
    template = ROOT / "workspace_template"
    folders = {p.parent for p in template.rglob("*") if p.is_file()}
    for folder in folders:
        rel = folder.relative_to(template).parts
        assert ".".join(("olav", "_template", *rel)) in packages, folder
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["package-data"]["olav._template"] == ["**/*"]
    assert "olav" in packages and "olav.cli" in packages and "olav.memory.recall.data" in packages


def _olav_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from olav.cli.app import main; main()", *args]


def test_init_from_an_installed_layout_uses_the_packaged_template(tmp_path: Path) -> None:
    """olav laid out as a wheel installs it (templates in olav/_template, no checkout
    beside it) creates a workspace from the packaged copy."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "olav", site / "olav", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "workspace_template", site / "olav" / "_template")
    (site / "olav" / "_template" / "core" / "AGENT.md").write_text("# packaged copy\n")
    ws = tmp_path / "ws"
    write_config(ws)
    env = clean_env()
    env["PYTHONPATH"] = str(site)
    probe = "import olav.admin.setup as w; print(w.__file__); print(w.template_dir())"
    res = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.stdout.splitlines() == [
        str(site / "olav" / "admin" / "setup.py"),
        str(site / "olav" / "_template"),
    ], res.stderr
    res = subprocess.run(
        _olav_cmd("init", str(ws)), cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert (ws / "core" / "AGENT.md").read_text() == "# packaged copy\n"
    assert sorted(p.name for p in (ws / "netops" / "guides").glob("*.guide.yaml")) == sorted(
        p.name for p in (ROOT / "workspace_template/netops/guides").glob("*.guide.yaml")
    )


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    res = subprocess.run(_olav_cmd("--version"), cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"olav {version('olav')}\n"


def _shim(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has an `olav` that runs this checkout, as a shell would."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "olav"
    shim.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c 'from olav.cli.app import main; main()' \"$@\"\n"
    )
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLAV_", "_OLAV"))}
    env["PATH"] = f"{bindir}:{env['PATH']}"
    # typer otherwise guesses the shell from the parent process; the tests name it
    env["_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"] = "1"
    return env


def test_bash_completion_script_completes_subcommands(tmp_path: Path) -> None:
    env = _shim(tmp_path)
    script = subprocess.run(
        ["olav", "--show-completion", "bash"], env=env, capture_output=True, text=True
    )
    assert script.returncode == 0, script.stderr
    (tmp_path / "olav.bash").write_text(script.stdout)
    complete = (
        "source ./olav.bash\n"
        "complete -p olav\n"
        "COMP_WORDS=(olav me); COMP_CWORD=1; _olav_completion olav\n"
        'echo "top: ${COMPREPLY[*]}"\n'
        "COMP_WORDS=(olav memory st); COMP_CWORD=2; _olav_completion olav\n"
        'echo "sub: ${COMPREPLY[*]}"\n'
    )
    res = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", complete],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "complete -o default -F _olav_completion olav"
    assert lines[1] == "top: memory"
    assert lines[2] == "sub: stats"


def test_zsh_completion_script_and_protocol(tmp_path: Path) -> None:
    env = _shim(tmp_path)
    script = subprocess.run(
        ["olav", "--show-completion", "zsh"], env=env, capture_output=True, text=True
    )
    assert script.returncode == 0, script.stderr
    assert script.stdout.startswith("#compdef olav")
    assert "compdef _olav_completion olav" in script.stdout
    assert "_OLAV_COMPLETE=complete_zsh olav" in script.stdout
    # what the zsh function runs on <TAB>: the same environment protocol, answered by olav
    env.update({"_OLAV_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "olav me"})
    res = subprocess.run(["olav"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert '"memory":"Inspect and manage what is in memory."' in res.stdout
    assert '"kb"' not in res.stdout
