"""ReDoS check for every regular expression in olav/ (`make lint` runs it).

``python -m tests.redos_check olav`` collects the patterns two ways: the literals passed to
``re.*`` calls in the source (as regexploit-py finds them), and every compiled pattern a module
keeps at module level (which catches patterns glued together from pieces, such as the secret
keys in olav/core/redact.py). Each pattern then goes through two checks:

- regexploit's static analysis, which finds cubic or worse backtracking within one match
  attempt; regexploit-py itself exits 0 whatever it finds, so its verdict is read here;
- a scaling probe: text built from the pattern's own literals and character classes (a prefix
  and a long run, a fragment repeated, a fragment and a separator repeated) is scanned at two
  sizes, the way the code uses the pattern (``finditer`` for a search, sub or findall, which
  retry at every offset; one attempt for a pattern only ever matched or fullmatched).
  regexploit reports neither quadratic patterns nor the quadratic cost of a search retrying at
  every offset, and on a megabyte of text either one is an outage.

A finding fails the check unless ALLOWED names its file and exact pattern with the reason it is
safe; editing an allowed pattern drops it from the list until someone looks again.
"""

from __future__ import annotations

import ast
import importlib
import re
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as sre  # type: ignore[attr-defined]
from typing import Any

# (file relative to the repository, exact pattern text): why the finding is safe
ALLOWED: dict[tuple[str, str], str] = {}

SMALL, LARGE = 1_000, 8_000  # characters; linear cost grows 8x between them, quadratic 64x
GROWTH_LIMIT = 20.0  # LARGE/SMALL time ratio that counts as superlinear
FLOOR_S = 0.01  # below this at LARGE a ratio is noise
CEILING_S = 0.25  # any one scan of SMALL characters slower than this is a finding outright
LIMIT_S = 1.0  # a scan of LARGE characters is stopped here (and is a finding)
_FRAGMENTS = 14  # prefixes and characters tried per pattern (the probe's cost is their square)


@dataclass(frozen=True)
class Pattern:
    file: str
    where: str  # a line number or the module-level name
    pattern: str
    flags: int
    # how the probe runs it: "search" (finditer over the text: search, sub, findall and split
    # retry at every offset), "match" or "fullmatch" (one attempt at one offset), or "" for a
    # string that only looks like a pattern (regexploit reads it; the probe does not). While
    # collecting, "compile" marks a literal in re.compile, whose use its name tells.
    mode: str = "search"


@dataclass(frozen=True)
class Finding:
    pat: Pattern
    check: str
    detail: str

    def line(self) -> str:
        head = f"{self.pat.file}:{self.pat.where}: {self.check}: {self.detail}"
        return f"{head}\n    {self.pat.pattern!r}"


# --- collecting patterns ----------------------------------------------------------------------

_ANCHORED = {"match": "match", "fullmatch": "fullmatch"}
_SEVERITY = {"": 0, "fullmatch": 1, "match": 2, "search": 3}


def _literal_patterns(path: Path, rel: str) -> Iterator[Pattern]:
    """Strings passed to ``re.*`` calls, and (mode "") other strings regexploit-py would read."""
    from regexploit.languages.python_node_visitor import PythonNodeVisitor

    tree = ast.parse(path.read_bytes())
    calls = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            calls[(node.lineno, node.args[0].value)] = node.func.attr
    visitor = PythonNodeVisitor()
    visitor.visit(tree)
    for found in visitor.patterns:
        if not isinstance(found.pattern, str):
            continue
        try:
            re.compile(found.pattern, found.flags)
        except (re.error, ValueError):
            continue  # docstrings and other strings that are not regular expressions
        call = calls.get((found.lineno, found.pattern)) if found.definitely_regex else None
        mode = "" if call is None else _ANCHORED.get(call, "search")
        flags = re.compile(found.pattern, found.flags).flags & ~re.UNICODE  # (?i) and the like
        yield Pattern(
            rel, str(found.lineno), found.pattern, flags, "compile" if call == "compile" else mode
        )


def _compiled(value: Any, depth: int = 0) -> Iterator[re.Pattern[str]]:
    if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
        yield value
    elif depth < 3 and isinstance(value, tuple | list | frozenset | set):
        for item in value:
            yield from _compiled(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _compiled(item, depth + 1)


def _usage(name: str, value: Any, source: str) -> str:
    """ "match" or "fullmatch" when every use of the module-level ``name`` in its module is a
    call of that method, else "search"."""
    if not isinstance(value, re.Pattern):
        return "search"  # inside a container: used however the code iterating it likes
    methods = re.findall(rf"\b{re.escape(name)}\.(\w+)\(", source)
    uses = len(re.findall(rf"\b{re.escape(name)}\b", source)) - 1  # less the assignment
    modes = {_ANCHORED.get(m, "search") for m in methods}
    if len(methods) == uses and len(modes) == 1:
        return modes.pop()
    return "search"


def _module_patterns(path: Path, rel: str, root: Path, source: str) -> Iterator[Pattern]:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    module = importlib.import_module(name.removesuffix(".__init__"))
    for attr, value in vars(module).items():
        for pat in _compiled(value):
            mode = _usage(attr, value, source)
            yield Pattern(rel, attr, pat.pattern, pat.flags & ~re.UNICODE, mode)


def collect(package: Path) -> list[Pattern]:
    """Every pattern under ``package``, once per (pattern, flags): where it is scanned the
    hardest (a search before a match before a fullmatch). A literal in ``re.compile`` takes
    its mode from the module-level name it is bound to; one compiled elsewhere is searched."""
    root = package.resolve().parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    seen: dict[tuple[str, int], Pattern] = {}
    compiled_literals: list[Pattern] = []
    for path in sorted(package.resolve().rglob("*.py")):
        rel = str(path.relative_to(root))
        source = path.read_text(encoding="utf-8")
        found = []
        for pat in _literal_patterns(path, rel):
            (compiled_literals if pat.mode == "compile" else found).append(pat)
        if "re.compile" in source:
            found += _module_patterns(path, rel, root, source)
        for pat in found:
            key = (pat.pattern, pat.flags)
            if key not in seen or _SEVERITY[pat.mode] > _SEVERITY[seen[key].mode]:
                seen[key] = pat
    for pat in compiled_literals:  # compiled inside a function, or kept under no module name
        seen.setdefault((pat.pattern, pat.flags), replace(pat, mode="search"))
    return list(seen.values())


# --- regexploit ---------------------------------------------------------------------------------


def _parser() -> Any:
    from regexploit.ast.sre import SreOpParser

    class Parser(SreOpParser):  # type: ignore[misc]
        """regexploit 1.0 predates Python 3.11's atomic groups and possessive repeats. Neither
        gives back what it matched, so neither is a backtracking point: an atomic group is
        read as its contents and a possessive repeat as one instance of what it repeats
        (the scaling probe measures what that reading misses)."""

        def from_ATOMIC_GROUP(self, data: Any) -> Any:
            return self.sequence_or_singleton(data)

        def from_POSSESSIVE_REPEAT(self, data: Any) -> Any:
            minimum, _maximum, elements = data
            one = self.sequence_or_singleton(elements)
            return one if minimum else self.from_MAX_REPEAT((0, 1, elements))

    return Parser()


def regexploit_findings(pat: Pattern) -> list[Finding]:
    """regexploit-py's verdict: a redos of starriness 3 or more (cubic or worse)."""
    from regexploit.redos import find

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parsed = _parser().parse_sre(pat.pattern, pat.flags)
            found = [r for r in find(parsed) if r.starriness > 2] if parsed is not None else []
        except Exception as exc:  # a construct regexploit cannot read is looked at, not passed
            return [Finding(pat, "regexploit", f"cannot read it ({type(exc).__name__}: {exc})")]
    return [
        Finding(pat, "regexploit", f"starriness {r.starriness}, e.g. {r.example()}")
        for r in found[:1]
    ]


# --- the scaling probe --------------------------------------------------------------------------

_SPARE = "a A 1 - . _ : = / @ < > \" ' \n"  # candidates for a negated class or literal
_CATEGORY = {
    C.CATEGORY_DIGIT: "1",
    C.CATEGORY_NOT_DIGIT: "a",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_NOT_SPACE: "a",
    C.CATEGORY_WORD: "a",
    C.CATEGORY_NOT_WORD: " ",
    C.CATEGORY_LINEBREAK: "\n",
    C.CATEGORY_NOT_LINEBREAK: "a",
}


_CATEGORY_RE = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}


def _in_class(items: list[Any], ch: str) -> bool:
    for op, av in items:
        if op is C.LITERAL and ch == chr(av):
            return True
        if op is C.RANGE and av[0] <= ord(ch) <= av[1]:
            return True
        if op is C.CATEGORY and av in _CATEGORY_RE and re.match(_CATEGORY_RE[av], ch):
            return True
    return False


def _class_chars(items: list[Any]) -> list[str]:
    """A few characters a character class matches."""
    if items and items[0][0] is C.NEGATE:
        return [c for c in [*_SPARE.split(" "), " "] if not _in_class(items[1:], c)][:2]
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.RANGE:
            out.append(chr(av[0]))
        elif op is C.CATEGORY and av in _CATEGORY:
            out.append(_CATEGORY[av])
    return out


def _chars(tree: Any, out: list[str]) -> None:
    for op, av in tree:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append("a" if chr(av) != "a" else "b")
        elif op is C.ANY:
            out.append("a")
        elif op is C.IN:
            out.extend(_class_chars(av))
        elif op is C.BRANCH:
            for branch in av[1]:
                _chars(branch, out)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            _chars(av[2], out)
        elif op is C.SUBPATTERN:
            _chars(av[3], out)
        elif op is C.ATOMIC_GROUP:
            _chars(av, out)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            _chars(av[1], out)


def _example(tree: Any) -> str:
    """A short string shaped like ``tree`` (lookarounds and anchors ignored)."""
    out = []
    for op, av in tree:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op in (C.NOT_LITERAL, C.ANY, C.IN):
            chars: list[str] = []
            _chars([(op, av)], chars)
            out.append(chars[0] if chars else "a")
        elif op is C.BRANCH:
            out.append(_example(av[1][0]))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            out.append(_example(av[2]) * min(av[0], 16))
        elif op is C.SUBPATTERN:
            out.append(_example(av[3]))
        elif op is C.ATOMIC_GROUP:
            out.append(_example(av))
    return "".join(out)


def _flat(tree: Any) -> list[Any]:
    out = []
    for op, av in tree:
        if op is C.SUBPATTERN:
            out += _flat(av[3])
        elif op is C.ATOMIC_GROUP:
            out += _flat(av)
        else:
            out.append((op, av))
    return out


def attacks(pattern: str, flags: int, size: int) -> Iterator[tuple[str, str]]:
    """(description, text of ``size`` characters) to scan with ``pattern``: each character the
    pattern names, repeated; and for each leading part of the pattern (every alternative of a
    branch on the way), an example of it repeated, followed by a long run of a character the
    next parts accept, and repeated with such a character after it. Each comes twice, the
    second time with a different last character."""
    flat = _flat(sre.parse(pattern, flags))
    everything: list[str] = []
    _chars(flat, everything)
    seen: set[str] = set()

    def once(what: str, text: str) -> Iterator[tuple[str, str]]:
        if what not in seen:
            seen.add(what)
            yield what, text
            # and with a last character unlike the run's, which fails what would have matched
            # at the end of the text and makes the engine try every other way first
            killer = "!" if text[-1].isalnum() else "a"
            yield f"{what} + {killer!r}", text[:-1] + killer

    for c in dict.fromkeys([*everything, " ", "a"]):
        yield from once(f"{c!r} * n", c * size)
    heads = [""]
    for k, (op, av) in enumerate(flat):
        parts = [_example(b) for b in av[1]] if op is C.BRANCH else [_example([(op, av)])]
        heads = list(dict.fromkeys(h + p for h in heads for p in parts))[:_FRAGMENTS]
        after: list[str] = []
        _chars(flat[k + 1 : k + 4], after)
        after = list(dict.fromkeys([*after, " ", "a"]))
        for h in heads:
            if not h:
                continue
            yield from once(f"{h!r} * n", (h * (size // len(h) + 1))[:size])
            for c in after:
                yield from once(f"{h!r} + {c!r} * n", h + c * (size - len(h)))
                unit = h + c
                yield from once(f"({h!r} + {c!r}) * n", (unit * (size // len(unit) + 1))[:size])


class TooSlow(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise TooSlow


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise TooSlow in the main thread once ``seconds`` have passed. The re engine polls for
    signals, so this stops a runaway match; an alarm already set (pytest-timeout's) is put back
    with what was left of it."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    pending, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pending:
            left = max(pending - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


def _scan_seconds(compiled: re.Pattern[str], text: str, limit: float, mode: str) -> float:
    """CPU seconds of this thread for one scan (in "search" mode a full ``finditer`` pass,
    what ``sub`` costs), or ``inf`` past ``limit`` (wall-clock). The thread's own CPU time: a
    busy machine (the suite's other workers) stretches the wall-clock of one size and not the
    other, and a ratio of those says nothing about the pattern."""
    start = time.thread_time()
    try:
        with deadline(limit):
            if mode == "search":
                for _ in compiled.finditer(text):
                    pass
            elif mode == "match":
                compiled.match(text)
            else:
                compiled.fullmatch(text)
    except TooSlow:
        return float("inf")
    return time.thread_time() - start


def probe_findings(pat: Pattern) -> list[Finding]:
    """A finding when some attack text takes GROWTH_LIMIT times as long at LARGE as at SMALL
    (and long enough to be more than noise), or is too slow at SMALL already."""
    if not pat.mode:
        return []
    compiled = re.compile(pat.pattern, pat.flags)
    large = dict(attacks(pat.pattern, pat.flags, LARGE))
    for what, text in attacks(pat.pattern, pat.flags, SMALL):
        small_s = _scan_seconds(compiled, text, CEILING_S, pat.mode)
        if small_s > CEILING_S:
            return [Finding(pat, "probe", f"{what}: over {CEILING_S} s on {SMALL} characters")]
        if small_s < 1e-4 or what not in large:
            continue  # too fast to be quadratic at this size
        big = large[what]
        large_s = _scan_seconds(compiled, big, LIMIT_S, pat.mode)
        if large_s > FLOOR_S and large_s > GROWTH_LIMIT * small_s and large_s < LIMIT_S:
            # once more, in case the machine was busy
            small_s = min(small_s, _scan_seconds(compiled, text, CEILING_S, pat.mode))
            large_s = min(large_s, _scan_seconds(compiled, big, LIMIT_S, pat.mode))
        if large_s > FLOOR_S and large_s > GROWTH_LIMIT * small_s:
            took = f"over {LIMIT_S} s" if large_s > LIMIT_S else f"{large_s * 1e3:.1f} ms"
            detail = (
                f"{pat.mode} {what}: {small_s * 1e3:.2f} ms on {SMALL} characters, "
                f"{took} on {LARGE} (8x the text)"
            )
            return [Finding(pat, "probe", detail)]
    return []


# --- the check ----------------------------------------------------------------------------------


def check(
    patterns: list[Pattern], checks: tuple[Callable[[Pattern], list[Finding]], ...] | None = None
) -> list[Finding]:
    out: list[Finding] = []
    for pat in patterns:
        for one in checks or (regexploit_findings, probe_findings):
            out += one(pat)
    return out


def main(argv: list[str]) -> int:
    packages = [Path(a) for a in argv] or [Path("olav")]
    patterns = [p for pkg in packages for p in collect(pkg)]
    findings = check(patterns)
    failed = [f for f in findings if (f.pat.file, f.pat.pattern) not in ALLOWED]
    stale = set(ALLOWED) - {(f.pat.file, f.pat.pattern) for f in findings}
    for f in failed:
        print(f.line())
    for file, pattern in sorted(stale):
        print(f"{file}: allowed but no longer flagged, drop it from ALLOWED: {pattern!r}")
    print(f"redos-check: {len(patterns)} patterns, {len(failed)} findings, {len(stale)} stale")
    return 1 if failed or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
