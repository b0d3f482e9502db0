"""`olav serve` under one client's load (issue 52, item 4): run slots per operator with a bounded
queue (429 past it), the no-JavaScript chat waiting on the event loop, console sessions capped
per operator and logins per address, the Host header, a deadline on request heads, a
connection cap, sparse logging of what a stranger can repeat, and streams that end when their
token is revoked."""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from olav.core.config import Config
from olav.core.errors import ConfigError
from olav.serve.guard import quiet_accept_errors
from olav.serve.limits import Limits, OperatorSlots, Sparse, TooMany
from tests.serve._support import Served, human, serving, session, sse_events

DEADLINE_S = 30.0


def _config(text: str) -> Callable[[Path], None]:
    """A ``prepare`` that adds ``text`` (a ``serve:`` block) to the workspace's olav.yaml."""

    def prepare(ws: Path) -> None:
        path = ws / ".olav" / "olav.yaml"
        path.write_text(path.read_text() + "\n" + text)

    return prepare


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)  # polling a condition, with a deadline


def _run(client: httpx.Client, text: str, *, wait: bool = False) -> httpx.Response:
    tid = uuid.uuid4().hex
    path = f"/threads/{tid}/runs" + ("/wait" if wait else "")
    body = {"assistant_id": "core", "input": human(text), "if_not_exists": "create"}
    return client.post(path, json=body)


# -- run slots ------------------------------------------------------------------------------------


def test_one_operator_holds_only_their_share_of_the_slots_and_past_the_queue_gets_429(
    tmp_path: Path,
) -> None:
    limits = "serve:\n  runs_per_operator: 2\n  run_queue: 1\n"
    with serving(tmp_path, prepare=_config(limits)) as served:
        with (
            served.model.hold("slow-1") as one,
            served.model.hold("slow-2") as two,
            served.http("bob") as bob,
            served.http() as alice,
        ):
            for text in ("slow-1", "slow-2", "slow-3 waits"):
                assert _run(bob, text).status_code == 200
            one.wait_held()
            two.wait_held()
            refused = _run(bob, "one too many")
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) >= 1
            detail = refused.json()["detail"]
            assert "\n" not in detail and "serve.runs_per_operator" in detail
            assert "2 running and 1 waiting" in detail
            # bob's slots are full and his queue too: alice's run goes by them all
            done = _run(alice, "hello", wait=True)
            assert done.status_code == 200, done.text
            assert "answer to hello" in done.text
        # released: bob's runs end, his waiting one too, and his runs are taken again
        with served.http("bob") as bob:
            _until(lambda: _run(bob, "again", wait=True).status_code == 200, "bob runs again")


def test_operator_slots_count_a_run_out_when_it_ends() -> None:
    slots = OperatorSlots(1, 1, workers=2)
    slots.admit("bob")
    slots.admit("bob")
    with pytest.raises(TooMany) as refused:
        slots.admit("bob")
    assert refused.value.retry_after >= 1
    slots.admit("alice")  # another operator's count is their own
    slots.release("bob")
    slots.admit("bob")
    assert slots.counted("bob") == 2 and slots.counted("alice") == 1


# -- the chat without JavaScript ----------------------------------------------------------------


def _console_frames() -> list[str]:
    """The threads whose stack is inside a console view right now."""
    found = []
    for ident, frame in sys._current_frames().items():
        f: Any = frame
        while f is not None:
            if "/olav/serve/console/" in f.f_code.co_filename.replace("\\", "/"):
                found.append(f"{ident}: {f.f_code.co_name}")
                break
            f = f.f_back
    return found


def test_a_chat_form_without_javascript_waits_on_the_loop_and_counts_against_the_slots(
    tmp_path: Path,
) -> None:
    limits = "serve:\n  runs_per_operator: 1\n  run_queue: 0\n"
    with (
        serving(tmp_path, prepare=_config(limits)) as served,
        served.model.hold("slow chat") as gate,
        session(served, "bob") as bob,
    ):
        csrf = bob.get("/chat", params={"format": "json"})
        assert csrf.status_code == 200
        page = bob.get("/chat").text
        token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        form = {"csrf": token, "text": "slow chat", "agent": "core"}
        got: list[httpx.Response] = []
        poster = threading.Thread(
            target=lambda: got.append(
                bob.post("/chat/send", data=form, headers={"Origin": served.url})
            ),
            daemon=True,
        )
        poster.start()
        gate.wait_held()
        # the form's request waits for its run, and no thread is inside the console for it
        _until(lambda: not _console_frames(), "no thread inside a console view")
        again = bob.post(
            "/chat/send",
            data={**form, "text": "a second chat", "format": "json"},
            headers={"Origin": served.url},
        )
        assert again.status_code == 429, again.text
        assert "serve.runs_per_operator" in again.json()["detail"]
        assert again.headers["retry-after"]
        assert not got
        gate.release.set()
        poster.join(DEADLINE_S)
        assert got and got[0].status_code == 303
        assert got[0].headers["location"].startswith("/chat?thread=")


# -- console sessions and logins -----------------------------------------------------------------


def _login(served: Served, operator: str) -> httpx.Response:
    return httpx.post(
        served.url + "/login",
        data={"token": served.tokens[operator]},
        headers={"Origin": served.url},
        timeout=30,
    )


def _logged_in(served: Served, response: httpx.Response) -> bool:
    cookie = response.cookies.get("olav_console")
    got = httpx.get(
        served.url + "/", params={"format": "json"}, cookies={"olav_console": cookie or ""}
    )
    return got.status_code == 200


def test_logins_end_the_operators_own_oldest_sessions_never_anothers(tmp_path: Path) -> None:
    limits = "serve:\n  sessions_per_operator: 2\n  logins_per_minute: 1000\n"
    with serving(tmp_path, prepare=_config(limits)) as served:
        alice = _login(served, served.alice)
        bobs = [_login(served, "bob") for _ in range(6)]
        assert all(r.status_code == 303 for r in [alice, *bobs])
        assert _logged_in(served, alice)
        assert [_logged_in(served, r) for r in bobs] == [False] * 4 + [True] * 2


def test_logins_from_one_address_are_rate_limited(tmp_path: Path) -> None:
    with serving(tmp_path, prepare=_config("serve:\n  logins_per_minute: 3\n")) as served:
        assert [_login(served, "bob").status_code for _ in range(3)] == [303] * 3
        refused = _login(served, served.alice)  # even with a right token
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert "serve.logins_per_minute" in refused.text


# -- the Host header -----------------------------------------------------------------------------


def test_a_request_for_another_host_is_refused(tmp_path: Path) -> None:
    extra = "serve:\n  allowed_hosts: [olav.example.org, 10.1.2.3:2280]\n"
    with serving(tmp_path, prepare=_config(extra)) as served:
        port = served.url.rsplit(":", 1)[1]
        with served.http() as client:
            for host, status in [
                ("evil.example", 421),
                ("10.1.2.3:9999", 421),
                (f"localhost:{port}", 200),
                ("olav.example.org:443", 200),
                ("10.1.2.3:2280", 200),
            ]:
                got = client.get("/info", headers={"Host": host})
                assert got.status_code == status, (host, got.text)
            refused = client.get("/ok", headers={"Host": "evil.example"})
            assert refused.status_code == 421
            assert "serve.allowed_hosts" in refused.json()["detail"]


# -- connections ---------------------------------------------------------------------------------


def _partial(served: Served) -> socket.socket:
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=DEADLINE_S)
    sock.sendall(b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return sock


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_a_connection_that_never_sends_a_whole_head_is_closed(tmp_path: Path) -> None:
    with serving(tmp_path, prepare=_config("serve:\n  head_timeout_s: 0.3\n")) as served:
        sock = _partial(served)
        with sock:
            assert _closed(sock)  # recv waits until the server closes it (or DEADLINE_S)
        with served.http(None) as client:  # a whole head, and a keep-alive's next one
            assert client.get("/ok").status_code == 200
            assert client.get("/ok").status_code == 200


def test_past_the_connection_cap_the_oldest_partial_heads_make_room(tmp_path: Path) -> None:
    with serving(tmp_path, prepare=_config("serve:\n  max_connections: 16\n")) as served:
        socks = [_partial(served) for _ in range(40)]
        try:
            with served.http() as alice:
                assert alice.get("/info").status_code == 200
            assert _closed(socks[0]) and _closed(socks[1])
        finally:
            for sock in socks:
                sock.close()


def test_a_repeated_warning_is_one_line_with_a_count() -> None:
    lines: list[str] = []

    class Log:
        def warning(self, fmt: str, *args: Any) -> None:
            lines.append(fmt % args)

    sparse = Sparse(Log(), every_s=3600)
    assert sparse.note("accept", "accept failed")
    for _ in range(999):
        assert not sparse.note("accept", "accept failed")
    assert sparse.note("other", "another kind")
    assert len(lines) == 2 and "accept failed (1 " in lines[0]
    sparse.every_s = 0
    sparse.note("accept", "accept failed")
    assert "(1000 " in lines[-1]


def test_accept_errors_out_of_files_are_logged_sparsely() -> None:
    lines: list[str] = []

    class Log:
        def warning(self, fmt: str, *args: Any) -> None:
            lines.append(fmt % args)

    loop = asyncio.new_event_loop()
    try:
        others: list[Any] = []
        loop.set_exception_handler(lambda _loop, context: others.append(context))
        quiet_accept_errors(loop, Sparse(Log(), every_s=3600))
        for _ in range(500):
            failed = OSError(errno.EMFILE, "Too many open files")
            loop.call_exception_handler({"message": "accept", "exception": failed})
        loop.call_exception_handler({"message": "something else"})
    finally:
        loop.close()
    assert len(lines) == 1 and "Too many open files" in lines[0]
    assert [c["message"] for c in others] == ["something else"]


# -- revoked tokens ------------------------------------------------------------------------------


def test_revoking_a_token_ends_its_open_stream(tmp_path: Path) -> None:
    from olav.access.tokens import TokenStore
    from olav.core.config import Workspace

    with serving(tmp_path) as served, served.model.hold("long stream") as gate:
        tid = uuid.uuid4().hex
        body = {
            "assistant_id": "core",
            "input": human("long stream"),
            "if_not_exists": "create",
            "stream_mode": ["values"],
        }
        seen: list[str] = []
        with (
            served.http("bob") as bob,
            bob.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response,
        ):
            assert response.status_code == 200
            for _, event, data in sse_events(response):
                seen.append(event)
                if event == "metadata":
                    gate.wait_held()
                    TokenStore.for_workspace(Workspace.open(served.ws)).revoke(
                        served.token_ids["bob"]
                    )
                if event == "error":
                    assert "revoked" in data["message"]
        assert seen[0] == "metadata" and seen[-1] == "error"
        assert not gate.release.is_set()  # the stream ended while the run was still held


# -- configuration -------------------------------------------------------------------------------


def test_serve_keys_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "olav.yaml"
    path.write_text("serve:\n  runs_per_operator: 0\n")
    with pytest.raises(ConfigError, match=r"serve\.runs_per_operator"):
        Config.load(path, environ={})
    path.write_text("serve:\n  runs_per_slot: 3\n")
    with pytest.raises(ConfigError, match=r"unknown key 'serve\.runs_per_slot'"):
        Config.load(path, environ={})
    path.write_text("serve:\n  allowed_hosts: [a.example, 'b.example:80']\n")
    limits = Limits.of(Config.load(path, environ={}))
    assert limits.allowed_hosts == ("a.example", "b.example:80")
    path.write_text("serve:\n  allowed_hosts: 'http://a.example/'\n")
    with pytest.raises(ConfigError, match=r"serve\.allowed_hosts"):
        Limits.of(Config.load(path, environ={}))
