"""Every olav command shown in docs/cli.md and the README names a real command, and every
option it names is one of that command's options (issue 38: the docs had drifted from the
commands). The commands are not run (tests/test_docs.py runs the `console` examples): the
command path and its flags are checked against typer's click command tree, which is fast.

A command is a line in a fenced block that starts with ``olav `` (or is ``olav``), a
``$ olav`` line, or a ``Usage: olav`` line; in a ``console`` block only the ``$`` lines are
commands (the rest is output)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "docs" / "cli.md", ROOT / "README.md")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
# where a shell line stops being olav's arguments
SHELL = {"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "2>&1", "(", ")"}


def command_lines(doc: Path) -> list[tuple[int, str]]:
    """(line number, command) for every olav command in the fenced blocks of ``doc``."""
    out: list[tuple[int, str]] = []
    lang: str | None = None
    for number, raw in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(raw)
        if fence:
            lang = None if lang is not None else fence.group(2)
            continue
        if lang is None:
            continue
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:].strip()
        elif lang == "console":
            continue  # output
        line = line.removeprefix("Usage: ").strip()
        if line == "olav" or line.startswith("olav "):
            out.append((number, line))
    return out


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for word in lexer:
        if word in SHELL or set(word) <= set("|&;<>()"):
            break
        words.append(word)
    return words


# typer's own click (typer._click in typer 0.29) or click: read by duck typing
Command = Any


def _options(command: Command) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for param in command.params:
        if param.param_type_name == "option":
            for name in (*param.opts, *param.secondary_opts):
                found[name] = param
    return found


def _is_group(command: Command) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def problem(root: Command, line: str) -> str | None:
    """What is wrong with the command ``line`` (None: its command and flags all exist)."""
    words = _tokens(line)
    assert words and words[0] == "olav", line
    command, path = root, ["olav"]
    i = 1
    while i < len(words):
        word = words[i]
        flag = word.strip("[]")
        if flag.startswith("-") and not re.fullmatch(r"-\d[\d.]*|-|--", flag):
            name = flag.split("=", 1)[0]
            options = _options(command)
            if name != "--help" and name not in options:
                shown = ", ".join(sorted(o for o in options if o.startswith("--"))) or "none"
                return f"`{' '.join(path)}` has no option {name} (its options: {shown})"
            param = options.get(name)
            takes_value = param is not None and not getattr(param, "is_flag", False)
            if takes_value and "=" not in flag and _is_group(command):
                i += 1  # the option's value, before a subcommand's name
        elif _is_group(command):
            if word.startswith(("[", "{", "<")) or word.isupper() or word.endswith("..."):
                return None  # a placeholder: COMMAND [ARGS]...
            sub = command.commands.get(word)
            if sub is None:
                known = ", ".join(sorted(command.commands))
                return f"`{' '.join(path)}` has no command {word!r} (its commands: {known})"
            command, path = sub, [*path, word]
        i += 1
    return None


@pytest.fixture(scope="module")
def root() -> Command:
    from olav.cli.app import app

    return typer.main.get_command(app)


def test_every_command_in_the_docs_exists_with_its_flags(root: Command) -> None:
    wrong, checked = [], 0
    for doc in DOCS:
        for number, line in command_lines(doc):
            checked += 1
            found = problem(root, line)
            if found:
                wrong.append(f"{doc.relative_to(ROOT)}:{number}: {line}\n    {found}")
    assert not wrong, "\n".join(wrong)
    assert checked > 100  # the parser found the examples


def inline_commands(doc: Path) -> list[tuple[int, str]]:
    """(line number, command) for every ``olav ...`` code span in the prose and tables of
    ``doc`` (`olav me<TAB>`, a completion being typed, is not a command)."""
    text = doc.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in re.finditer(r"`(olav(?: [^`\n]*)?)`", text)
        if "<TAB>" not in m.group(1)
    ]


def test_every_olav_code_span_names_a_real_command(root: Command) -> None:
    wrong, checked = [], 0
    for doc in DOCS:
        for number, span in inline_commands(doc):
            checked += 1
            found = problem(root, span)
            if found:
                wrong.append(f"{doc.relative_to(ROOT)}:{number}: `{span}`\n    {found}")
    assert not wrong, "\n".join(wrong)
    assert checked > 100


def _resolve(root: Command, words: list[str]) -> Command | None:
    command = root
    for word in words[1:]:
        if not _is_group(command) or word not in command.commands:
            return None
        command = command.commands[word]
    return command


def _every_option(command: Command) -> set[str]:
    """A command's options, and for a group those of its commands too (a section such as
    `olav memory archive` documents `list` and `restore` in one table)."""
    found = {*_options(command), "--help"}
    for sub in getattr(command, "commands", {}).values():
        found |= _every_option(sub)
    return found


def test_every_option_in_an_option_table_is_the_command_s(root: Command) -> None:
    """Under each `## olav ...` heading, the options its tables list (first column)."""
    wrong, checked = [], 0
    command: Command | None = None
    heading = ""
    lines = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        found = re.match(r"#{2,3} (olav(?: [a-z][\w-]*)*)\s*$", line)
        if found:
            heading = found.group(1)
            command = _resolve(root, heading.split())
            if command is None:
                wrong.append(f"docs/cli.md:{number}: {line}\n    no such command")
            continue
        if line.startswith("#"):
            command = None  # a section that is not a command's
        if command is None or not line.startswith("|"):
            continue
        for flag in re.findall(r"`(-{1,2}[A-Za-z][\w-]*)", line.split("|")[1]):
            checked += 1
            if flag not in _every_option(command):
                wrong.append(f"docs/cli.md:{number}: {heading}: no option {flag}")
    assert not wrong, "\n".join(wrong)
    assert checked > 50


def test_the_check_catches_a_wrong_command_and_a_wrong_flag(root: Command) -> None:
    """The check itself: each of these lines is wrong in one way, and says how."""
    assert problem(root, "olav memory search 'bgp' --agent netops -k 2") is None
    assert problem(root, "olav log export -f sharegpt --min-turns 2 | head -c 120") is None
    assert problem(root, "olav --debug memory stats --json") is None
    assert "has no command 'serach'" in (problem(root, "olav memory serach bgp") or "")
    assert "has no option --limt" in (problem(root, "olav log list --limt 5") or "")
    assert "has no option --outcomes" in (problem(root, "olav log export [--outcomes X]") or "")
    assert problem(root, "olav kb drafts [OPTIONS] COMMAND [ARGS]...") is None


def test_the_parser_reads_usage_lines_commands_and_not_output(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "```console\n$ olav memory stats\nolav 0.1.0\n```\n"
        "```text\nUsage: olav memory policy [OPTIONS]\n```\n"
        "```bash\nolav chat --agent netops   # a comment\nmake test\n```\n"
        "olav outside a block\n",
        encoding="utf-8",
    )
    assert command_lines(doc) == [
        (2, "olav memory stats"),
        (6, "olav memory policy [OPTIONS]"),
        (9, "olav chat --agent netops   # a comment"),
    ]


# the project's own benchmarks, which left olav's commands for `python -m benchmarks` in a
# checkout: the docs that name them, checked against that command the same way
HARNESS_DOCS = (
    ROOT / "docs" / "benchmarks-harness.md",
    ROOT / "docs" / "benchmark-notes.md",
    ROOT / "docs" / "cli.md",
    ROOT / "README.md",
)
HARNESS = re.compile(r"(?:\.venv/bin/)?python -m benchmarks(?=[ `\n]|$)([^`\n#]*)")


def test_every_benchmarks_command_in_the_docs_exists_with_its_flags() -> None:
    from benchmarks.cli import app as harness

    root = typer.main.get_command(harness)
    wrong, checked = [], 0
    for doc in HARNESS_DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in HARNESS.finditer(text):
            checked += 1
            number = text.count("\n", 0, m.start()) + 1
            found = problem(root, "olav" + m.group(1))  # `problem` reads a line from its word
            if found:
                wrong.append(f"{doc.relative_to(ROOT)}:{number}: {m.group(0)}\n    {found}")
    assert not wrong, "\n".join(wrong)
    assert checked > 10
