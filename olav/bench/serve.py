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
  request).
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

from olav.bench.threads import echo_workspace
from olav.bench.timing import ms

RUNS = 30
CONCURRENT = 20


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

    from olav.compose import agent_session
    from olav.serve.tokens import TokenStore

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
    added = statistics.median(served) - statistics.median(in_process)
    return {
        "runs": runs,
        "in_process": ms(in_process),
        "served": ms(served),
        "added_p50_ms": round(added * 1000, 2),
        "first_event": ms(first_event),
        "first_values": ms(first_values),
        "concurrent": together,
        "targets": {"added_p50_ms": 15, "first_event_ms": 50, "errors": 0},
        "met": {
            "added": added * 1000 <= 15,
            "first_event": statistics.median(first_event) * 1000 <= 50,
            "errors": together["errors"] == 0 and together["cross_talk"] == 0,
        },
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
        ]
    )


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run_serve_bench(), indent=2))
