"""Redaction and the memory injection scan cost time linear in their text.

``redact_text`` runs in olav serve's audit thread (holding the GIL, so a slow pattern freezes
the whole server), in the log formatter and in every export, on text a client or a model
chose; the injection scan reads everything written to memory. Each hostile shape
(benchmarks.hostile) is timed at two sizes 16x apart: linear cost grows about 16x, while the
patterns these replaced grew 256x or more (8,000 letters took over a minute). These are time
ratios, not speed targets; ``redaction_rates()`` reports the speeds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.hostile import INJECTION_SHAPES, SHAPES, adversarial, shape_text
from olav.core.redact import REDACTED, redact_text
from olav.memory.ingest.injection import scan
from tests.redos_check import Pattern, TooSlow, deadline, probe_findings, regexploit_findings
from tests.secret_corpus import CORPUS

T = TypeVar("T")
GROWTH_LIMIT = 40.0  # time ratio for 16x the text: linear is about 16, quadratic 256


def _within(limit: float, fn: Callable[[str], T], text: str) -> T:
    try:
        with deadline(limit):
            return fn(text)
    except TooSlow:
        pytest.fail(f"{fn.__name__} took over {limit} s on {len(text):,} characters")


def _seconds(fn: Callable[[str], object], text: str, limit: float) -> float:
    """The CPU time of this thread for ``fn(text)``: what the text costs, which a busy machine
    does not stretch (wall-clock would, for one size and not the other)."""
    start = time.thread_time()
    _within(limit, fn, text)
    return time.thread_time() - start


def _growth(fn: Callable[[str], object], make: Callable[[int], str], small: int) -> str | None:
    """None when ``fn`` on 16x ``small`` characters takes under GROWTH_LIMIT times as long as
    on ``small``, else what it took. A failing ratio is measured again, up to twice, in case the
    machine was busy."""
    little, big = make(small), make(16 * small)
    for _ in range(3):
        small_s = min(_seconds(fn, little, 5.0) for _ in range(3))
        large_s = min(_seconds(fn, big, 60.0) for _ in range(2))
        if large_s < GROWTH_LIMIT * small_s:
            return None
    return f"{small_s * 1e3:.1f} ms on {small:,} characters, {large_s * 1e3:.0f} ms on 16x"


@pytest.mark.parametrize(("unit"), [u for _, u in SHAPES], ids=[n for n, _ in SHAPES])
def test_redaction_grows_linearly_on_each_hostile_shape(unit: str | tuple[str, str]) -> None:
    assert _growth(redact_text, lambda n: shape_text(unit, n), 8_000) is None


def test_a_megabyte_of_the_hostile_mix_is_redacted_in_linear_time() -> None:
    text = adversarial(1_000_000)
    assert _seconds(redact_text, text, 10.0) < 10.0  # minutes for the old patterns
    assert _growth(redact_text, adversarial, 64_000) is None


@pytest.mark.parametrize(
    ("unit"), [u for _, u in INJECTION_SHAPES], ids=[n for n, _ in INJECTION_SHAPES]
)
def test_the_injection_scan_grows_linearly_on_each_hostile_shape(
    unit: str | tuple[str, str],
) -> None:
    assert scan(shape_text(unit, 1_000)) is None  # nothing matches: the whole text is read
    assert _growth(scan, lambda n: shape_text(unit, n), 8_000) is None


# the characters and words the patterns turn on, glued in runs of up to 100
_FRAGMENTS = [
    *"aZ09_.-=:：;,&\"'}] \t\n@/+",
    "password",
    "token",
    "passwd",
    "api-key",
    "x-api-key",
    "DB_PASSWORD",
    "auth",
    "author",
    "community",
    "密码",
    "令牌",
    "--password",
    " -c ",
    "snmpwalk",
    "-u ",
    "://",
    "bob:pw@",
    "Bearer ",
    "eyJ",
    "eyJhbGciOi.",
    "sk-",
    "AIza",
    "AKIA",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "pre-shared-key ascii-text ",
    "enable secret 5 ",
    "is",
    REDACTED,
]
_HOSTILE = st.lists(st.tuples(st.sampled_from(_FRAGMENTS), st.integers(1, 100)), max_size=10).map(
    lambda parts: "".join(fragment * n for fragment, n in parts)
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_HOSTILE)
def test_redacting_hostile_text_is_quick_and_changes_nothing_the_second_time(text: str) -> None:
    once = _within(2.0, redact_text, text)  # a few KB: milliseconds (the old patterns: seconds)
    assert redact_text(once) == once


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CORPUS), _HOSTILE, _HOSTILE)
def test_a_secret_in_hostile_surroundings_stays_masked(
    entry: tuple[str, str, list[str], str | None], before: str, after: str
) -> None:
    """The corpus line sits between lines holding only ";", which ends any value (a value
    stops at ";" and at whitespace): what comes before cannot take the line's key as its own
    value, so whatever ``before`` and ``after`` hold, the secret must go."""
    _, text, needles, _ = entry
    out = _within(2.0, redact_text, f"{before}\n;\n{text}\n;\n{after}")
    assert [n for n in needles if n in out] == []


# the patterns the ReDoS check was written for: the secret key (cubic on "token" * n), the
# injection scan's tag (quadratic on "<" and spaces) and a rescue block (regexploit's find)
_OLD_KV = (
    r"(?i)(?P<key>[\"']?[\w.\-]*(?:token|password|secret)[\w.\-]*[\"']?)(?P<sep>\s*[=:]\s*)"
    r"(?P<val>\"[^\"\n]*\"|[^\s,;&\"'}\]]+)"
)
_OLD_TAG = r"<\s*/?\s*relevant-memories\s*>"
_OLD_BLOCK = r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)"


def test_the_redos_check_flags_the_patterns_it_was_written_for() -> None:
    def pattern(text: str, flags: int = 0) -> Pattern:
        return Pattern("olav/x.py", "1", text, re.compile(text, flags).flags & ~re.UNICODE)

    assert probe_findings(pattern(_OLD_KV))
    assert probe_findings(pattern(_OLD_TAG, re.I))
    assert regexploit_findings(pattern(_OLD_BLOCK, re.S))
    fixed = [pattern(r"<\s*+/?\s*+relevant-memories\s*+>", re.I), pattern(r"(?<!\w)(\w++)=")]
    assert [f for p in fixed for f in probe_findings(p) + regexploit_findings(p)] == []
