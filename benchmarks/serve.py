"""What ``olav serve`` adds to a run (``make bench``, section 8).

One workspace with the scripted model (each answer echoes its request, so an answer that
reached the wrong thread shows) and the hash embedder. In one process, against a server started
as a user starts it (``olav serve --port 0``, a subprocess):

- **a whole run**: ``olav ask``'s engine in process (a Session's ``ask``) against the same run
  through ``POST /threads/{id}/runs/wait``; the difference is what the server adds;
- **the first event**: from sending ``POST /threads/{id}/runs/stream`` to the first
  server-sent event (``metadata``), and to the first ``values``;
- **20 concurrent streams**: 20 threads, one streaming run each, all at once: p50/p95 of a
  whole stream, errors, and cross-talk (an answer that does not echo its own thread's
  request);
- **what the stream modes cost**: runs that call a tool and then answer, streamed with only
  ``values`` and with all nine modes agent-chat-ui and LangGraph's SDKs may ask for,
  alternating in one server: the time to the first ``values`` event and the whole stream.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.threads import echo_workspace
from benchmarks.timing import ms
from olav.serve.http import STREAM_MODES

RUNS = 30
CONCURRENT = 20
ALL_MODES = list(STREAM_MODES)  # every mode agent-chat-ui and LangGraph's SDKs may ask for


def _start(root: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from olav.cli.app import main; main()", "serve", "--port", "0"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    found = re.search(r"http://\S+", line)
    if not found:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"olav serve did not start: {line!r} {err[-500:]}")
    return proc, found.group(0)


def run_serve_bench(runs: int = RUNS, concurrent: int = CONCURRENT) -> dict[str, Any]:
    import httpx

    from olav.access.tokens import TokenStore
    from olav.compose import agent_session

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        ws = echo_workspace(root, turns=4 * runs + 4 * concurrent + 40)
        session = agent_session(ws, learn_from_failures=False)
        session.ask("warm up")
        in_process = []
        for i in range(runs):
            session.new_thread()
            started = time.perf_counter()
            session.ask(f"in process {i}")
            in_process.append(time.perf_counter() - started)
        session.close()

        _, token = TokenStore.for_workspace(ws).create("bench")
        proc, url = _start(root)
        headers = {"Authorization": f"Bearer {token}"}
        try:
            with httpx.Client(base_url=url, headers=headers, timeout=120) as client:

                def thread() -> str:
                    return str(client.post("/threads", json={}).json()["thread_id"])

                body = {"assistant_id": "core"}
                client.post(
                    f"/threads/{thread()}/runs/wait",
                    json={**body, "input": {"messages": [{"role": "user", "content": "warm"}]}},
                )
                served = []
                for i in range(runs):
                    tid = thread()
                    msg = {"messages": [{"role": "user", "content": f"served {i}"}]}
                    started = time.perf_counter()
                    res = client.post(f"/threads/{tid}/runs/wait", json={**body, "input": msg})
                    served.append(time.perf_counter() - started)
                    res.raise_for_status()
                first_event, first_values = [], []
                for i in range(runs):
                    tid = thread()
                    msg = {"messages": [{"role": "user", "content": f"stream {i}"}]}
                    started = time.perf_counter()
                    seen_event = seen_values = None
                    with client.stream(
                        "POST", f"/threads/{tid}/runs/stream", json={**body, "input": msg}
                    ) as res:
                        for line in res.iter_lines():
                            if line.startswith("event:") and seen_event is None:
                                seen_event = time.perf_counter() - started
                            if line == "event: values" and seen_values is None:
                                seen_values = time.perf_counter() - started
                    first_event.append(seen_event or 0.0)
                    first_values.append(seen_values or 0.0)
                together = _concurrent(url, headers, concurrent)
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
        modes = _modes(Path(tmp) / "modes", runs)
    added = statistics.median(served) - statistics.median(in_process)
    return {
        "runs": runs,
        "in_process": ms(in_process),
        "served": ms(served),
        "added_p50_ms": round(added * 1000, 2),
        "first_event": ms(first_event),
        "first_values": ms(first_values),
        "concurrent": together,
        "modes": modes,
        "targets": {"added_p50_ms": 15, "first_event_ms": 50, "errors": 0, "modes_added_ms": 10},
        "met": {
            "added": added * 1000 <= 15,
            "first_event": statistics.median(first_event) * 1000 <= 50,
            "errors": together["errors"] == 0 and together["cross_talk"] == 0,
            "modes": modes["added_paired_ms"] <= 10,
        },
    }


def _cpu_s(pid: int) -> float | None:
    """The CPU seconds (user and system) process ``pid`` has used, from /proc (None
    elsewhere)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _modes(root: Path, runs: int) -> dict[str, Any]:
    """Streams of a run that calls ``ls`` and then answers, with only ``values`` and with every
    mode, alternating on one server so that both see the same machine: the whole stream and
    the first ``values`` event (p50 and the median of each pair's difference), and the
    server's CPU time per run."""
    import httpx
    import yaml

    from olav.access.tokens import TokenStore

    ws = echo_workspace(root, turns=1)
    call = {"content": "", "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}
    turns = [call, {"content": "echo: ", "echo": True}] * (2 * runs + 8)
    (root / "script.yaml").write_text(yaml.safe_dump(turns))
    _, token = TokenStore.for_workspace(ws).create("bench")
    proc, url = _start(root)
    seen: dict[str, list[tuple[float, float, int]]] = {"values": [], "all": []}
    cpu = {"values": 0.0, "all": 0.0}
    try:
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120
        ) as client:

            def one(modes: list[str], i: int) -> tuple[float, float, int]:
                tid = client.post("/threads", json={}).json()["thread_id"]
                msg = {"messages": [{"role": "user", "content": f"modes {i}"}]}
                body = {"assistant_id": "core", "input": msg, "stream_mode": modes}
                started = time.perf_counter()
                first, events = 0.0, 0
                with client.stream("POST", f"/threads/{tid}/runs/stream", json=body) as res:
                    res.raise_for_status()
                    for line in res.iter_lines():
                        events += line.startswith("event:")
                        if line == "event: values" and not first:
                            first = time.perf_counter() - started
                return time.perf_counter() - started, first, events

            for i in range(2):  # warm up both paths
                one(["values"], i)
                one(ALL_MODES, i)
            for i in range(runs):
                for key, modes in (("values", ["values"]), ("all", ALL_MODES)):
                    before = _cpu_s(proc.pid)
                    seen[key].append(one(modes, i))
                    after = _cpu_s(proc.pid)
                    if before is not None and after is not None:
                        cpu[key] += after - before
    finally:
        proc.terminate()
        proc.communicate(timeout=30)

    def row(key: str) -> dict[str, Any]:
        got = seen[key]
        return {
            "whole": ms([g[0] for g in got]),
            "first_values": ms([g[1] for g in got]),
            "events": got[0][2],
            "server_cpu_ms": round(cpu[key] / runs * 1000, 2),
        }

    def paired(k: int) -> float:
        diffs = [a[k] - v[k] for v, a in zip(seen["values"], seen["all"], strict=True)]
        return round(statistics.median(diffs) * 1000, 2)

    values, every = row("values"), row("all")
    return {
        "values": values,
        "all": every,
        "added_p50_ms": round(every["whole"]["p50_ms"] - values["whole"]["p50_ms"], 2),
        "added_paired_ms": paired(0),
        "first_values_added_p50_ms": paired(1),
        "server_cpu_added_ms": round(every["server_cpu_ms"] - values["server_cpu_ms"], 2),
    }


def _concurrent(url: str, headers: dict[str, str], n: int) -> dict[str, Any]:
    import httpx

    def one(i: int) -> tuple[float, bool, bool]:
        with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
            tid = client.post("/threads", json={}).json()["thread_id"]
            said = f"concurrent request {i} on {tid}"
            body = {
                "assistant_id": "core",
                "input": {"messages": [{"role": "user", "content": said}]},
                "stream_mode": ["values"],
            }
            started = time.perf_counter()
            last: dict[str, Any] = {}
            event = ""
            ok = True
            with client.stream("POST", f"/threads/{tid}/runs/stream", json=body) as res:
                ok = res.status_code == 200
                for line in res.iter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                        ok = ok and event != "error"
                    elif line.startswith("data:") and event == "values":
                        last = json.loads(line[5:])
            took = time.perf_counter() - started
            messages = last.get("messages") or []
            answer = str(messages[-1].get("content", "")) if messages else ""
            own = answer.endswith(said)
            others = any(
                f"concurrent request {j} on" in str(m.get("content", ""))
                for m in messages
                for j in range(n)
                if j != i
            )
            return took, ok, own and not others

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(one, range(n)))
    wall = time.perf_counter() - started
    return {
        "streams": n,
        **ms([r[0] for r in results]),
        "wall_s": round(wall, 2),
        "errors": sum(1 for r in results if not r[1]),
        "cross_talk": sum(1 for r in results if not r[2]),
    }


def markdown_serve(r: dict[str, Any]) -> str:
    c = r["concurrent"]
    ok = {True: "yes", False: "**no**"}
    return "\n".join(
        [
            "The scripted model (each answer echoes its request), the hash embedder, "
            f"{r['runs']} runs per row; the server is `olav serve --port 0` in its own process.",
            "",
            "| | p50 ms | p95 ms |",
            "|---|---|---|",
            f"| a run in process (`Session.ask`) | {r['in_process']['p50_ms']} | "
            f"{r['in_process']['p95_ms']} |",
            f"| the same run through `POST /threads/{{id}}/runs/wait` | {r['served']['p50_ms']} | "
            f"{r['served']['p95_ms']} |",
            f"| request to the first server-sent event | {r['first_event']['p50_ms']} | "
            f"{r['first_event']['p95_ms']} |",
            f"| request to the first `values` event | {r['first_values']['p50_ms']} | "
            f"{r['first_values']['p95_ms']} |",
            f"| {c['streams']} concurrent streams on {c['streams']} threads, whole stream | "
            f"{c['p50_ms']} | {c['p95_ms']} |",
            "",
            "| target | measured | met |",
            "|---|---|---|",
            f"| serve adds ≤ 15 ms p50 to a run | {r['added_p50_ms']} ms | "
            f"{ok[r['met']['added']]} |",
            f"| ≤ 50 ms to the first event | {r['first_event']['p50_ms']} ms | "
            f"{ok[r['met']['first_event']]} |",
            f"| 0 errors and no cross-talk at {c['streams']} concurrent streams | "
            f"{c['errors']} errors, {c['cross_talk']} cross-talk ({c['wall_s']} s in all) | "
            f"{ok[r['met']['errors']]} |",
            "",
            *_markdown_modes(r),
        ]
    )


def _markdown_modes(r: dict[str, Any]) -> list[str]:
    m = r.get("modes")
    if not m:
        return []
    ok = {True: "yes", False: "**no**"}
    v, a = m["values"], m["all"]
    return [
        "**What the stream modes cost.** A run that calls `ls` and then answers, streamed "
        f"{r['runs']} times with only `values` and {r['runs']} times with all nine modes "
        f"({', '.join(f'`{x}`' for x in ALL_MODES)}), alternating on one server. The added time "
        "is the median of each pair's difference, which the machine's noise moves less than a "
        "difference of medians; the server's CPU time per run is read from /proc.",
        "",
        "| stream_mode | events | first `values` p50 ms | whole stream p50 ms | p95 ms | "
        "server CPU ms per run |",
        "|---|---|---|---|---|---|",
        f"| `values` | {v['events']} | {v['first_values']['p50_ms']} | "
        f"{v['whole']['p50_ms']} | {v['whole']['p95_ms']} | {v['server_cpu_ms']} |",
        f"| all nine | {a['events']} | {a['first_values']['p50_ms']} | "
        f"{a['whole']['p50_ms']} | {a['whole']['p95_ms']} | {a['server_cpu_ms']} |",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| all modes add ≤ 10 ms p50 to a run | {m['added_paired_ms']} ms (difference of "
        f"medians {m['added_p50_ms']} ms; first `values` {m['first_values_added_p50_ms']} ms; "
        f"server CPU {m['server_cpu_added_ms']} ms) | {ok[r['met']['modes']]} |",
        "",
        "With only `values` requested the run takes the path it took before the other modes "
        "existed: `Run.graph_modes()` asks LangGraph for nothing more.",
        "",
    ]


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run_serve_bench(), indent=2))
