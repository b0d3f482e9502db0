"""Text shaped to hurt olav's redaction patterns, and how fast ``redact_text`` reads it.

``redaction_rates()`` is a benchmark row (``python -m benchmarks hostile`` and
tests/test_redact_linear.py use these shapes): seconds and MB/s on ordinary prose and log lines, and
on the hostile mix, at a few sizes. Light on purpose: only olav.core.redact is imported, and only
when timed.
"""

from __future__ import annotations

import time
from typing import Any

# (name, the unit repeated, or (head, unit): head once, then unit repeated). Each is a shape
# some pattern once read in quadratic or worse time: long runs of a key's characters, a key
# word over and over with no separator, a separator with no value, openers with no closers.
SHAPES: tuple[tuple[str, str | tuple[str, str]], ...] = (
    ("letters", "a"),
    ("word and digits", "abc123_"),
    ("key word chain", "password."),
    ("key words glued", "token"),
    ("key= chain", "key="),
    ("token= chain", "token="),
    ("token token", "token "),
    ("key: gap", ("password:", " ")),
    ("base64", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo+/="),
    ("double quotes", '"'),
    ("nested quotes", "\"'"),
    ("quoted key, no close", '"password": "'),
    ("dashes", "-"),
    ("flag chain", "--password-"),
    ("spaces", " "),
    ("colons", ":"),
    ("equals", "="),
    ("separators", " : = ："),
    ("url", ("a://", "a")),
    ("url chain", "a://"),
    ("curl -u", ("-u ", "a")),
    ("curl -u chain", " -u "),
    ("pem headers, no end", "-----BEGIN RSA PRIVATE KEY-----\n"),
    ("pem header, long label", ("-----BEGIN ", "A ")),
    ("bearer run", ("bearer ", "a")),
    ("bearer chain", "bearer "),
    ("eyJ run", "eyJ"),
    ("eyJ dashes", "eyJ-"),
    ("eyJ dots", "eyJab."),
    ("sk chain", "sk-"),
    ("CJK key run", "密码"),
    ("CJK keys, fullwidth colon", "密钥令牌："),
    ("snmp words", "snmp "),
    ("snmp, no -c", ("snmpwalk", " x")),
    ("psk, open quote", 'pre-shared-key ascii-text "'),
    ("secret words", "secret "),
)


# the same for the memory injection scan: openers with nothing after them, so that every
# pattern reads the whole text (a match would end the scan at once)
INJECTION_SHAPES: tuple[tuple[str, str | tuple[str, str]], ...] = (
    ("ignore all", "ignore all "),
    ("ignore", "ignore "),
    ("ignore, many alls", "ignore all all all all all all all all all "),
    ("role tag, no close", "<user "),
    ("lt spaces", "< "),
    ("lt then spaces", ("<", " ")),
    ("lt slash spaces", ("< /", " ")),
    ("zh override, no end", "忽略之前所有"),
    ("new instructions, no colon", ("new instructions", " ")),
    ("[INST", "[INST "),
    ("<<", ("<<", " ")),
    ("persona words", "you are from now on you "),
)


def shape_text(unit: str | tuple[str, str], size: int) -> str:
    head, body = unit if isinstance(unit, tuple) else ("", unit)
    return (head + body * (size // len(body) + 1))[:size]


def adversarial(size: int) -> str:
    """Every shape in turn, an equal share of ``size`` characters each."""
    share = max(1, size // len(SHAPES))
    return "".join(shape_text(unit, share) + "\n" for _, unit in SHAPES)[:size]


_PROSE = (
    "2026-11-04 10:12:33 INFO runner: run r812 finished in 3.2 s (tools: ssh_exec, "
    "show_interfaces); the operator asked why BGP neighbour 10.0.0.2 went Idle at 04:00.\n"
    "The session ended after the hold timer expired; the previous config had a typo in the "
    "neighbour's remote-as, fixed by change CHG-1204 (see https://wiki.example.com/bgp).\n"
    "user: please back up the router configs before tonight's window and tell me which "
    "devices still run the old image.\n"
)


def prose(size: int) -> str:
    """Ordinary log lines and chat text, no secrets."""
    return (_PROSE * (size // len(_PROSE) + 1))[:size]


def redaction_rates(sizes: tuple[int, ...] = (1_000, 64_000, 1_000_000)) -> list[dict[str, Any]]:
    """``[{size, kind, seconds, mb_per_s}]`` for ``redact_text`` on prose and on the
    adversarial mix at each size (one call each, after one warm-up call)."""
    from olav.core.redact import redact_text

    redact_text(prose(1_000) + adversarial(1_000))
    rows = []
    for kind, make in (("prose", prose), ("adversarial", adversarial)):
        for size in sizes:
            text = make(size)
            start = time.perf_counter()
            redact_text(text)
            seconds = time.perf_counter() - start
            rows.append(
                {
                    "size": size,
                    "kind": kind,
                    "seconds": round(seconds, 4),
                    "mb_per_s": round(size / 1e6 / seconds, 2) if seconds else None,
                }
            )
    return rows
