"""The operators' tokens of `olav serve` (olav.access.tokens) and the `olav serve` command line:
hashed storage, verification, revocation seen across processes, the file's safety, and the
refusal to bind a network address without a token."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from olav.access.tokens import (
    TOKEN_LEN,
    TokenFileError,
    TokenInfo,
    TokenStore,
    is_loopback_host,
    operator_name,
)
from olav.core.errors import OlavError
from tests.helpers import OlavCli, OlavMain, clean_env

TOKEN_RE = re.compile(r"olav_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


def _store(root: Path, **kw: Any) -> TokenStore:
    return TokenStore(root / ".olav" / "tokens.json", **kw)


def _tokens_file(root: Path) -> Path:
    return root / ".olav" / "tokens.json"


# ---- the store -----------------------------------------------------------------------------


def test_create_verify_revoke(hash_ws: Path) -> None:
    store = _store(hash_ws, touch_interval=None)
    info, token = store.create("Alice", note="open-webui")
    assert TOKEN_RE.fullmatch(token) and len(token) == TOKEN_LEN
    assert token.startswith(f"olav_{info.id}_")
    assert (info.operator, info.note, info.live) == ("alice", "open-webui", True)
    assert info.created_at.endswith("Z") and info.last_used_at is None
    assert store.verify(token) == info
    assert store.list() == [info] and store.live() == [info]

    revoked = store.revoke(info.id[:5])
    assert revoked.id == info.id and revoked.revoked_at is not None and not revoked.live
    assert store.verify(token) is None
    assert store.live() == [] and store.list() == [revoked]
    assert store.revoke(info.id) == revoked  # a second revoke changes nothing


def test_for_workspace_uses_the_olav_folder(hash_ws: Path) -> None:
    from olav.core.config import Workspace

    ws = Workspace.open(hash_ws)
    assert TokenStore.for_workspace(ws).path == _tokens_file(hash_ws)


def test_only_a_salted_hash_is_stored(hash_ws: Path) -> None:
    store = _store(hash_ws)
    _, token = store.create("alice")
    _, token2 = store.create("alice")
    text = _tokens_file(hash_ws).read_text()
    secret, secret2 = token.split("_", 2)[2], token2.split("_", 2)[2]
    assert token not in text and secret not in text and secret2 not in text
    entries = json.loads(text)["tokens"]
    assert {e["operator"] for e in entries} == {"alice"}
    assert len({e["salt"] for e in entries}) == 2  # one salt per token
    assert all(len(bytes.fromhex(e["hash"])) == 32 for e in entries)


def test_the_file_is_private(hash_ws: Path) -> None:
    store = _store(hash_ws)
    info, _ = store.create("alice")
    assert stat.S_IMODE(_tokens_file(hash_ws).stat().st_mode) == 0o600
    _tokens_file(hash_ws).chmod(0o644)
    store.revoke(info.id)
    assert stat.S_IMODE(_tokens_file(hash_ws).stat().st_mode) == 0o600  # a rewrite tightens it


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "garbage",
        "olav_",
        "Bearer olav_0123456789ab_" + "A" * 43,
        "olav_0123456789ab_" + "A" * 43,  # well formed, unknown id
        "x" * 10_000,
        "olav_" + "_" * 56,
    ],
)
def test_malformed_or_unknown_tokens_fail(hash_ws: Path, bad: str) -> None:
    store = _store(hash_ws)
    store.create("alice")
    assert store.verify(bad) is None


def test_a_wrong_secret_or_another_tokens_id_fails(hash_ws: Path) -> None:
    store = _store(hash_ws, touch_interval=None)
    a, token_a = store.create("alice")
    b, token_b = store.create("bob")
    secret_a = token_a.split("_", 2)[2]
    flipped = secret_a[:-1] + ("A" if secret_a[-1] != "A" else "B")
    assert store.verify(f"olav_{a.id}_{flipped}") is None
    assert store.verify(f"olav_{b.id}_{secret_a}") is None  # a's secret under b's id
    assert store.verify(token_a + " ") is None and store.verify(" " + token_a) is None
    assert store.verify(token_a.upper()) is None
    assert store.verify(token_a) == a and store.verify(token_b) == b


def test_a_store_opened_before_a_revoke_sees_it(hash_ws: Path, olav: OlavCli) -> None:
    """The server's TokenStore outlives CLI commands: it re-reads the file when it changes,
    even within the same second (an atomic replace gives the file a new inode)."""
    server = _store(hash_ws)  # before the file exists
    assert server.verify("olav_0123456789ab_" + "A" * 43) is None
    result = olav("serve", "token", "create", "alice", "--json")
    assert result.exit_code == 0, result.output
    created = json.loads(result.stdout)
    token = created["token"]
    assert server.verify(token) is not None
    for _ in range(3):  # revoke and re-create quickly: each change is seen
        result = olav("serve", "token", "revoke", created["id"])
        assert result.exit_code == 0, result.output
        assert server.verify(token) is None
        created = json.loads(olav("serve", "token", "create", "alice", "--json").stdout)
        token = created["token"]
        assert server.verify(token) is not None


def test_concurrent_creates_from_four_processes_all_survive(hash_ws: Path) -> None:
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from olav.access.tokens import TokenStore\n"
        "store = TokenStore(Path(sys.argv[1]))\n"
        "for i in range(5):\n"
        "    print(store.create(sys.argv[2], note=str(i))[1], flush=True)\n"
    )
    path = _tokens_file(hash_ws)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), f"op{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        for n in range(4)
    ]
    tokens: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        tokens += out.split()
    assert len(tokens) == 20
    store = _store(hash_ws, touch_interval=None)
    assert len(store.list()) == 20
    verified = [store.verify(t) for t in tokens]
    assert all(verified)
    assert {v.operator for v in verified if v} == {"op0", "op1", "op2", "op3"}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_last_used_is_recorded_in_the_background_at_most_once_a_minute(hash_ws: Path) -> None:
    _, token = _store(hash_ws).create("alice")
    eager = _store(hash_ws, touch_interval=0)
    assert eager.verify(token) is not None
    eager.wait_for_writes()
    (used,) = _store(hash_ws).list()
    assert used.last_used_at is not None

    server = _store(hash_ws)  # the default: once a minute
    before = _tokens_file(hash_ws).stat()
    for _ in range(50):
        assert server.verify(token) is not None
    server.wait_for_writes()
    after = _tokens_file(hash_ws).stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_a_failed_write_leaves_the_old_file(hash_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(hash_ws)
    info, token = store.create("alice")
    before = _tokens_file(hash_ws).read_bytes()

    def crash(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("olav.access.tokens.os.replace", crash)
    with pytest.raises(TokenFileError, match=r"cannot write .*No space left"):
        store.create("bob")
    with pytest.raises(TokenFileError):
        store.revoke(info.id)
    monkeypatch.undo()
    assert _tokens_file(hash_ws).read_bytes() == before
    assert not [p for p in _tokens_file(hash_ws).parent.iterdir() if p.name.endswith(".tmp")]
    assert _store(hash_ws).verify(token) is not None


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b'{"version": 1, "tokens": [', "Expecting value"),
        (b"[1, 2]", "expected"),
        (b'{"version": 1, "tokens": [{"id": "nothex"}]}', "is not 12 hex digits"),
        (
            b'{"version": 1, "tokens": [{"id": "0123456789ab", "operator": "a", '
            b'"created_at": "x", "salt": "00", "hash": "zz"}]}',
            "must be hex",
        ),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_corrupt_file_is_one_line_naming_it(
    hash_ws: Path, olav_main: OlavMain, content: bytes, detail: str
) -> None:
    path = _tokens_file(hash_ws)
    path.write_bytes(content)
    with pytest.raises(TokenFileError, match=re.escape(str(path))) as caught:
        _store(hash_ws).verify("olav_0123456789ab_" + "A" * 43)
    assert detail in str(caught.value) and "\n" not in str(caught.value)
    for args in (("serve", "token", "list"), ("serve", "token", "create", "bob")):
        result = olav_main(*args)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert str(path) in lines[0] and "olav serve token create" in lines[0]
    assert path.read_bytes() == content  # nothing overwrote it


def test_a_store_that_read_a_good_file_fails_closed_when_it_turns_corrupt(hash_ws: Path) -> None:
    # no last-use touch: its background rewrite could land after the corruption and undo it
    store = _store(hash_ws, touch_interval=None)
    _, token = store.create("alice")
    assert store.verify(token) is not None
    _tokens_file(hash_ws).write_text("{oops")
    with pytest.raises(TokenFileError):
        store.verify(token)


def test_operator_names_are_normalised_like_memory_scopes() -> None:
    from olav.memory.store.scopes import scope_name

    for raw in ("Alice", " Bob Smith ", "ops.team_1", "Zoë"):
        assert operator_name(raw) == scope_name(raw)
    assert operator_name("Bob Smith") == "bob-smith"
    for bad in ("", "   ", "!!!"):
        with pytest.raises(OlavError) as caught:
            operator_name(bad)
        assert "\n" not in str(caught.value) and "operator name" in str(caught.value)


def test_revoke_needs_one_match(hash_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter(["aaaaaaaaaaa1", "aaaaaaaaaaa2"])
    monkeypatch.setattr("olav.access.tokens.secrets.token_hex", lambda _n: next(ids))
    store = _store(hash_ws)
    one, token = store.create("alice")
    store.create("bob")
    monkeypatch.undo()
    with pytest.raises(OlavError, match="matches 2 tokens"):
        store.revoke("aaaa")
    with pytest.raises(OlavError, match="no token with id 'bbbb'"):
        store.revoke("bbbb")
    with pytest.raises(OlavError, match="give the id"):
        store.revoke("  ")
    assert store.revoke(token).id == one.id  # the whole token names it too
    assert store.revoke("aaaaaaaaaaa2").operator == "bob"


def test_loopback_hosts() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "LOCALHOST"):
        assert is_loopback_host(host), host
    for host in ("0.0.0.0", "::", "", "192.168.1.10", "example.com", "localhost.example.com"):
        assert not is_loopback_host(host), host


# ---- the command line ----------------------------------------------------------------------


def test_cli_create_prints_the_token_once_with_how_to_use_it(hash_ws: Path, olav: OlavCli) -> None:
    result = olav("serve", "token", "create", "Alice", "--note", "open webui")
    assert result.exit_code == 0, result.output
    (token,) = TOKEN_RE.findall(result.stdout.split("Authorization")[0])
    assert "will not be shown again" in result.stdout
    assert f"Authorization: Bearer {token}" in result.stdout
    assert "alice" in result.stdout and "open webui" in result.stdout
    assert _store(hash_ws).verify(token) is not None

    listed = olav("serve", "token", "list")
    assert listed.exit_code == 0 and "alice" in listed.stdout and "live" in listed.stdout
    assert token not in listed.stdout and token.split("_", 2)[2] not in listed.stdout
    rows = json.loads(olav("serve", "token", "list", "--json").stdout)
    assert [r["operator"] for r in rows] == ["alice"]
    assert set(rows[0]) == set(TokenInfo("x", "x", "", "").to_json())  # no hash, no salt

    made = json.loads(olav("serve", "token", "create", "bob", "--json").stdout)
    assert TOKEN_RE.fullmatch(made["token"]) and made["operator"] == "bob"
    assert "hash" not in made and "salt" not in made


def test_cli_revoke(hash_ws: Path, olav: OlavCli) -> None:
    made = json.loads(olav("serve", "token", "create", "alice", "--json").stdout)
    result = olav("serve", "token", "revoke", made["id"][:6])
    assert result.exit_code == 0 and "revoked token" in result.stdout and "401" in result.stdout
    assert _store(hash_ws).verify(made["token"]) is None
    again = olav("serve", "token", "revoke", made["id"])
    assert again.exit_code == 0 and "already revoked" in again.stdout
    listed = olav("serve", "token", "list")
    assert "revoked" in listed.stdout
    missing = olav("serve", "token", "revoke", "ffffffffffff")
    assert missing.exit_code == 1 and "no token with id" in str(missing.exception)
    empty = olav("serve", "token", "create", "!!!")
    assert empty.exit_code == 1 and "operator name" in str(empty.exception)


def test_cli_list_without_tokens(hash_ws: Path, olav: OlavCli) -> None:
    result = olav("serve", "token", "list")
    assert result.exit_code == 0 and "no tokens yet" in result.stdout
    assert json.loads(olav("serve", "token", "list", "--json").stdout) == []


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """olav.serve.app replaced by a module whose run_server records its arguments."""
    calls: list[dict[str, Any]] = []
    module = types.ModuleType("olav.serve.app")

    def run_server(ws: Any, **kw: Any) -> None:
        calls.append({"root": Path(ws.root), **kw})

    module.run_server = run_server  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "olav.serve.app", module)
    return calls


def test_a_network_address_without_tokens_refuses_before_importing_the_server(
    hash_ws: Path, olav: OlavCli, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "olav.serve.app", None)  # importing it would fail
    for host in ("0.0.0.0", "::", "192.168.1.10"):
        result = olav("serve", "--host", host)
        assert result.exit_code == 1
        assert isinstance(result.exception, OlavError), result.exception
        message = str(result.exception)
        assert f"binding {host} without tokens would let anyone on the network" in message
        assert "olav serve token create NAME" in message
    main = olav_main("serve", "--host", "0.0.0.0")
    assert main.returncode == 1 and len(main.stderr.strip().splitlines()) == 1, main.stderr

    made = json.loads(olav("serve", "token", "create", "alice", "--json").stdout)
    olav("serve", "token", "revoke", made["id"])
    result = olav("serve", "--host", "0.0.0.0")  # a revoked token is no token
    assert isinstance(result.exception, OlavError) and "without tokens" in str(result.exception)


def test_serve_passes_its_options_to_the_server(
    hash_ws: Path, olav: OlavCli, fake_server: list[dict[str, Any]]
) -> None:
    result = olav("serve")
    assert result.exit_code == 0, result.output
    assert fake_server == [
        {
            "root": hash_ws,
            "host": "127.0.0.1",
            "port": 2280,
            "auto_approve": False,
            "cors": [],
            "max_body": 1024 * 1024,
        }
    ]
    olav("serve", "token", "create", "alice")
    result = olav(
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--auto-approve",
        "--cors",
        "http://localhost:3000",
        "--cors",
        "https://chat.example.com",
        "--max-body",
        "4096",
    )
    assert result.exit_code == 0, result.output
    assert fake_server[1] == {
        "root": hash_ws,
        "host": "0.0.0.0",
        "port": 8080,
        "auto_approve": True,
        "cors": ["http://localhost:3000", "https://chat.example.com"],
        "max_body": 4096,
    }
    assert olav("serve", "token", "list").exit_code == 0
    assert len(fake_server) == 2  # a subcommand never starts the server


def test_serve_help_imports_no_server_library() -> None:
    code = (
        "import sys\n"
        "from olav.cli.app import main\n"
        "for args in (['serve', '--help'], ['serve', 'token', '--help']):\n"
        "    sys.argv = ['olav', *args]\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "heavy = ('starlette', 'uvicorn', 'sse_starlette', 'olav.serve.app', 'langgraph')\n"
        "print('LOADED', [m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60
    )
    assert "LOADED []" in out.stdout, (out.stdout[-600:], out.stderr)
