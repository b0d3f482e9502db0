"""``olav serve`` fair under one client's load (``python -m benchmarks fairness``).

One server as a user starts it (``olav serve --port 0``, its own process, its stderr in a file),
on the scripted model: a request that says ``slow`` takes ``SLOW_S`` seconds, any other is
answered at once. Two operators: alice, who measures, and bob, who loads the server. For each
load below, alice's ``GET /info`` p95 (``INFO_SAMPLES`` answers on one connection) and a
one-line run's latency (``/runs/wait``) are measured idle, then under the load, with how many
bytes the server's log (its stderr and ``.olav/logs``) grew meanwhile. Targets: under load
within 2x of idle (or 20 ms more, whichever is larger: idle p95s of a few ms are noise on a
busy machine), the log <= 1 MB.

The loads: 45 console chat posts without JavaScript (each poster posts again as soon as it is
answered; a 429 after the Retry-After it names), 40 slow runs at once by bob (the same), and
``HEADS`` sockets that
each send a partial request head (fewer when the process's file limit is lower: the table
says how many).
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

SLOW_S = 10.0
INFO_SAMPLES = 200
RUN_SAMPLES = 5
HEADS = 20_000
CHAT_POSTS = 45
SLOW_RUNS = 40
LOG_TARGET = 1 << 20
SETTLE_S = 3.0  # how long a load runs before alice measures


def _workspace(root: Path) -> Any:
    import yaml

    from olav.admin.setup import init_workspace
    from olav.core.config import Workspace

    (root / ".olav").mkdir(parents=True)
    slow = {"content": "slow: ", "echo": True, "delay_s": SLOW_S}
    turn = {"when": "slow", **slow, "otherwise": {"content": "echo: ", "echo": True}}
    (root / "script.yaml").write_text(yaml.safe_dump([turn] * 20_000))
    (root / ".olav" / "olav.yaml").write_text(
        "llm:\n  provider: scripted\n  script: script.yaml\nruntime:\n  nudge: false\n"
    )
    init_workspace(root)
    return Workspace.open(root)


def _start(root: Path, err: Path) -> tuple[subprocess.Popen[str], str]:
    with err.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from olav.cli.app import main; main()", "serve", "--port", "0"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    line = proc.stdout.readline() if proc.stdout else ""
    found = re.search(r"http://\S+", line)
    if not found:
        proc.kill()
        raise RuntimeError(f"olav serve did not start: {line!r} {err.read_text()[-500:]}")
    return proc, found.group(0)


def _log_bytes(root: Path, err: Path) -> int:
    logs = root / ".olav" / "logs"
    kept = sum(p.stat().st_size for p in logs.rglob("*") if p.is_file()) if logs.exists() else 0
    return err.stat().st_size + kept


def _measure(url: str, token: str) -> dict[str, Any]:
    """Alice's /info p95 and one-line run latency (ms), with the errors she met."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    info: list[float] = []
    runs: list[float] = []
    errors: list[str] = []
    body = {"assistant_id": "core", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        for _ in range(INFO_SAMPLES):
            started = time.perf_counter()
            try:
                got = client.get("/info")
                if got.status_code != 200:
                    errors.append(str(got.status_code))
            except httpx.HTTPError as exc:
                errors.append(type(exc).__name__)
            info.append((time.perf_counter() - started) * 1000)
        for _ in range(RUN_SAMPLES):
            started = time.perf_counter()
            try:
                got = client.post("/runs/wait", json=body)
                if got.status_code != 200:
                    errors.append(f"run {got.status_code}")
            except httpx.HTTPError as exc:
                errors.append(f"run {type(exc).__name__}")
            runs.append((time.perf_counter() - started) * 1000)
    return {
        "info_p95_ms": round(float(np.percentile(info, 95)), 2),
        "run_ms": round(float(np.median(runs)), 1),
        "errors": sorted(set(errors)),
        "error_count": len(errors),
    }


# -- the loads: each runs until ``stop`` is set ---------------------------------------------------


def _back_off(response: Any, stop: threading.Event) -> None:
    """A refused request's poster waits the Retry-After it was given, as a client does (one
    that ignores it floods the server with requests: section 10 measures those)."""
    if response.status_code == 429:
        stop.wait(float(response.headers.get("retry-after") or 1))


def _chat_posts(url: str, token: str, stop: threading.Event) -> Iterator[threading.Thread]:
    import httpx

    client = httpx.Client(base_url=url, timeout=SLOW_S * 4)
    got = client.post("/login", data={"token": token}, headers={"Origin": url})
    assert got.status_code == 303, got.text
    page = client.get("/chat").text
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]

    def post(i: int) -> None:
        while not stop.is_set():
            form = {"csrf": csrf, "text": f"slow chat {i}", "agent": "core"}
            with contextlib.suppress(httpx.HTTPError):
                _back_off(client.post("/chat/send", data=form, headers={"Origin": url}), stop)

    for i in range(CHAT_POSTS):
        yield threading.Thread(target=post, args=(i,), daemon=True)


def _slow_runs(url: str, token: str, stop: threading.Event) -> Iterator[threading.Thread]:
    import httpx

    client = httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=SLOW_S * 4
    )

    def run(i: int) -> None:
        while not stop.is_set():
            body = {
                "assistant_id": "core",
                "input": {"messages": [{"role": "user", "content": f"slow run {i}"}]},
                "if_not_exists": "create",
            }
            with contextlib.suppress(httpx.HTTPError):
                _back_off(client.post(f"/threads/{uuid.uuid4().hex}/runs/wait", json=body), stop)

    for i in range(SLOW_RUNS):
        yield threading.Thread(target=run, args=(i,), daemon=True)


def heads_possible() -> int:
    """The partial heads this process can hold open: HEADS, or fewer below its file limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return int(min(HEADS, soft - 300))


def _partial_heads(url: str, count: int, stop: threading.Event) -> Iterator[threading.Thread]:
    host, port = url.removeprefix("http://").rsplit(":", 1)

    def churn() -> None:
        held: list[socket.socket] = []
        while not stop.is_set():
            if len(held) >= count:  # the oldest go, new ones come: the server sees no end
                for sock in held[:500]:
                    sock.close()
                del held[:500]
            try:
                sock = socket.create_connection((host, int(port)), timeout=5)
                sock.sendall(b"GET /info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                held.append(sock)
            except OSError:
                time.sleep(0.01)  # the backlog is full: a moment, then again
        for sock in held:
            sock.close()

    yield threading.Thread(target=churn, daemon=True)


def _under(
    root: Path, err: Path, url: str, alice: str, load: Callable[[threading.Event], Any]
) -> dict[str, Any]:
    stop = threading.Event()
    before = _log_bytes(root, err)
    workers = list(load(stop))
    for w in workers:
        w.start()
    time.sleep(SETTLE_S)  # a benchmark's load builds up: not a test's synchronisation
    measured = _measure(url, alice)
    stop.set()
    measured["log_bytes"] = _log_bytes(root, err) - before
    for w in workers:
        w.join(SLOW_S * 4)
    return measured


def run_fairness_bench(progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    from olav.access.tokens import TokenStore

    say = progress or (lambda _m: None)
    heads = heads_possible()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        ws = _workspace(root)
        store = TokenStore.for_workspace(ws)
        _, alice = store.create("alice")
        _, bob = store.create("bob")
        err = Path(tmp) / "serve.stderr"
        proc, url = _start(root, err)
        try:
            _measure(url, alice)  # warm up: the agent's session is built
            loads: list[tuple[str, Callable[[threading.Event], Any]]] = [
                (f"{CHAT_POSTS} chat posts without JavaScript", lambda s: _chat_posts(url, bob, s)),
                (f"{SLOW_RUNS} slow runs by one operator", lambda s: _slow_runs(url, bob, s)),
                (f"{heads:,} partial request heads", lambda s: _partial_heads(url, heads, s)),
            ]
            for what, load in loads:
                say(f"fairness: idle, then {what}")
                idle = _measure(url, alice)
                loaded = _under(root, err, url, alice, load)
                rows.append(_row(what, idle, loaded))
        finally:
            proc.terminate()
            proc.communicate(timeout=60)
    return {
        "heads": heads,
        "heads_wanted": HEADS,
        "slow_s": SLOW_S,
        "rows": rows,
        "met": all(r["met"] for r in rows),
    }


def _row(what: str, idle: dict[str, Any], loaded: dict[str, Any]) -> dict[str, Any]:
    def within(base: float, now: float) -> bool:
        return now <= max(2 * base, base + 20)

    met = (
        within(idle["info_p95_ms"], loaded["info_p95_ms"])
        and within(idle["run_ms"], loaded["run_ms"])
        and loaded["log_bytes"] <= LOG_TARGET
        and not loaded["error_count"]
    )
    return {"load": what, "idle": idle, "loaded": loaded, "met": met}


def markdown_fairness(r: dict[str, Any]) -> str:
    fewer = (
        ""
        if r["heads"] >= r["heads_wanted"]
        else f" The process's file limit allowed {r['heads']:,} partial heads of the "
        f"{r['heads_wanted']:,} wanted."
    )
    lines = [
        "`olav serve --port 0` in its own process, on the scripted model (a request that says "
        f"`slow` takes {r['slow_s']:.0f} s). Bob loads the server; alice asks `GET /info` "
        f"{INFO_SAMPLES} times and runs a one-line request {RUN_SAMPLES} times, idle and then "
        "under the load (bob's posters post again once answered, after the Retry-After of a "
        "429; the heads churn: the oldest 500 closed, new ones opened); targets: within 2x "
        "of idle, or 20 ms more where idle is a few ms; "
        f"the server's log grows <= 1 MB.{fewer}",
        "",
        "| load | `/info` p95 idle ms | under load ms | one-line run idle ms | under load ms "
        "| log growth bytes | alice's errors | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        idle, got = row["idle"], row["loaded"]
        lines.append(
            f"| {row['load']} | {idle['info_p95_ms']} | {got['info_p95_ms']} | {idle['run_ms']} "
            f"| {got['run_ms']} | {got['log_bytes']:,} | {got['error_count']} "
            f"| {'yes' if row['met'] else '**no**'} |"
        )
    lines.append("")
    return "\n".join(lines)
