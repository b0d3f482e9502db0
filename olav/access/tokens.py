"""The operators' tokens for ``olav serve``: ``.olav/tokens.json``.

A token is ``olav_<id>_<secret>``: a 12-hex-digit id, which names it in listings and audit rows,
and a secret of 32 random bytes (``secrets.token_urlsafe(32)``, 43 characters). The file keeps,
for each token, its operator, a note, its dates, a 16-byte random salt and
``sha256(salt + secret)``; the secret itself is shown once, by :meth:`TokenStore.create`, and
never written anywhere.

Why a plain salted SHA-256 and not a slow password hash (scrypt, argon2): a slow hash protects
secrets a person chose, which an attacker can guess. These secrets are 256 random bits; nobody
can enumerate them, however fast each guess is, so a slow hash would add nothing but its cost,
and :meth:`TokenStore.verify` runs on every HTTP request. The salt keeps two stores' hashes
unrelated; the comparison is constant-time (:func:`hmac.compare_digest`).

Several processes share the file (the server and ``olav serve token ...``): every change is a
read-modify-write under a file lock, written whole to a temporary file (mode 0600) and renamed
over the old one, so a crash mid-write leaves the old file as it was and a reader never sees
half of one. A :class:`TokenStore` re-reads the file when it changes (one ``stat`` per
``verify``), so a token revoked from the command line fails on the server's next request
without a restart. A successful ``verify`` records ``last_used_at`` at most once a minute per
token, from a background thread, so a request never waits for a write.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.core.errors import NotFoundError, OlavError
from olav.core.fsutil import atomic_write_text
from olav.memory.store.roles import OPERATOR, TOKEN_ROLES
from olav.memory.store.scopes import scope_name

log = logging.getLogger(__name__)

TOKENS_FILE = "tokens.json"
FILE_VERSION = 1
FILE_MODE = 0o600
LOCK_TIMEOUT_S = 10.0
TOUCH_INTERVAL_S = 60.0  # last_used_at is recorded at most this often per token
TOUCH_LOCK_TIMEOUT_S = 5.0  # a background touch gives up rather than queue behind a long lock
ID_HEX = 12
SECRET_BYTES = 32
SALT_BYTES = 16
MAX_NOTE = 200
_TOKEN = re.compile(rf"olav_([0-9a-f]{{{ID_HEX}}})_([A-Za-z0-9_-]{{43}})")
TOKEN_LEN = len("olav_") + ID_HEX + 1 + 43
_ID = re.compile(rf"[0-9a-f]{{{ID_HEX}}}")
_DUMMY_SALT = bytes(SALT_BYTES)  # hashed against for an unknown id, so both paths cost the same


class TokenFileError(OlavError):
    """tokens.json cannot be read, parsed or written: no token can be checked until it is
    fixed (the server refuses every request rather than guess)."""


@dataclass(frozen=True)
class TokenInfo:
    """What may be shown about a token: never its secret or its hash. Dates are ISO 8601 UTC
    strings (``2025-01-31T12:00:00Z``)."""

    id: str
    operator: str
    note: str
    created_at: str
    last_used_at: str | None = None
    revoked_at: str | None = None
    role: str = OPERATOR  # operator, or admin: may write shared memory (olav.memory.store.roles)

    @property
    def live(self) -> bool:
        return self.revoked_at is None

    @property
    def display(self) -> str:
        """How the token looks with its secret elided: ``olav_<id>_…``."""
        return f"olav_{self.id}_…"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "operator": self.operator,
            "note": self.note,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
            "revoked_at": self.revoked_at,
            "role": self.role,
        }


@dataclass(frozen=True)
class _Record:
    info: TokenInfo
    salt: bytes
    digest: bytes
    used_ts: float | None  # last_used_at as a timestamp, for the touch throttle

    def to_json(self) -> dict[str, Any]:
        return {**self.info.to_json(), "salt": self.salt.hex(), "hash": self.digest.hex()}


_Snapshot = tuple[tuple[int, int, int, int] | None, dict[str, _Record]]


def operator_name(raw: str) -> str:
    """An operator's name as memory scopes spell it (``user:<name>``): lower case, other
    characters than ``[a-z0-9_.-]`` become ``-``."""
    name = scope_name(raw or "")
    if not name:
        raise OlavError(
            f"{raw!r} is not an operator name",
            hint="Give a name with at least one letter or digit, e.g. `olav serve token create "
            "alice`",
        )
    return name


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` reaches only this machine: ``localhost``, 127.0.0.0/8, ::1.
    Any other name counts as reachable from the network."""
    host = host.strip().strip("[]").lower()
    if host in {"localhost", "localhost."}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, store: TokenStore) -> None:
    """Refuse to serve a non-loopback address while no live token exists."""
    if is_loopback_host(host) or store.live():
        return
    raise OlavError(
        f"binding {host} without tokens would let anyone on the network run your agents",
        hint="Create one with `olav serve token create NAME`, or bind 127.0.0.1",
    )


def _now_ts() -> float:
    return time.time()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(value: str | None) -> float | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _digest(salt: bytes, secret: str) -> bytes:
    return hashlib.sha256(salt + secret.encode("ascii")).digest()


def _clean_note(note: str) -> str:
    note = " ".join((note or "").split())  # one line in a listing
    return note if len(note) <= MAX_NOTE else note[: MAX_NOTE - 1] + "…"


class TokenStore:
    """The tokens of one workspace. Safe to share between threads; several processes may use
    the same file at once."""

    def __init__(self, path: Path, *, touch_interval: float | None = TOUCH_INTERVAL_S) -> None:
        """``touch_interval``: how often a verified token's ``last_used_at`` is written (at most
        once per this many seconds per token and process); None never writes it."""
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.touch_interval = touch_interval
        self._snapshot: _Snapshot = (None, {})
        self._loaded = False
        self._read_mu = threading.Lock()
        self._touch_mu = threading.Lock()
        self._touched: dict[str, float] = {}  # id -> when this process last queued a touch
        self._pending: dict[str, float] = {}  # id -> the use to record
        self._writer: threading.Thread | None = None

    @classmethod
    def for_workspace(cls, ws: Any, **kw: Any) -> TokenStore:
        return cls(Path(ws.olav_dir) / TOKENS_FILE, **kw)

    # ---- reading ----------------------------------------------------------------------------

    def _fix_hint(self) -> str:
        return (
            f"Repair the JSON by hand, or move the file aside (`mv {self.path} "
            f"{self.path}.bad`) and create new tokens with `olav serve token create NAME` "
            "(the old ones stop working); until then the server accepts no token"
        )

    def _bad(self, detail: str) -> TokenFileError:
        return TokenFileError(f"{self.path} is corrupt ({detail})", hint=self._fix_hint())

    def _read_disk(self) -> _Snapshot:
        """The file as it is now, and the stat it was read under (None: there is none)."""
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                data = fh.read()
        except FileNotFoundError:
            return None, {}
        except OSError as exc:
            raise TokenFileError(
                f"cannot read {self.path}: {exc.strerror or exc}",
                hint="Check the file's owner and permissions (it should be mode 0600, yours)",
            ) from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        return stamp, self._parse(data)

    def _parse(self, data: bytes) -> dict[str, _Record]:
        if not data.strip():
            return {}
        try:
            doc = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise self._bad("not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise self._bad(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("tokens"), list):
            raise self._bad('expected {"version": 1, "tokens": [...]}')
        if doc.get("version") != FILE_VERSION:
            raise TokenFileError(
                f"{self.path} has version {doc.get('version')!r}; this olav reads version "
                f"{FILE_VERSION}",
                hint="Upgrade olav, or move the file aside and create new tokens",
            )
        records: dict[str, _Record] = {}
        for n, entry in enumerate(doc["tokens"]):
            rec = self._record(n, entry)
            if rec.info.id in records:
                raise self._bad(f"token {rec.info.id} appears twice")
            records[rec.info.id] = rec
        return records

    def _record(self, n: int, entry: Any) -> _Record:
        where = f"token #{n + 1}"
        if not isinstance(entry, dict):
            raise self._bad(f"{where} is not an object")

        def text(key: str, *, optional: bool = False) -> str | None:
            value = entry.get(key)
            if value is None and optional:
                return None
            if not isinstance(value, str):
                raise self._bad(f"{where}: '{key}' must be a string")
            return value

        token_id = text("id") or ""
        if not _ID.fullmatch(token_id):
            raise self._bad(f"{where}: id {token_id!r} is not {ID_HEX} hex digits")
        try:
            salt = bytes.fromhex(text("salt") or "")
            digest = bytes.fromhex(text("hash") or "")
        except ValueError:
            raise self._bad(f"token {token_id}: 'salt' and 'hash' must be hex") from None
        if len(digest) != hashlib.sha256().digest_size or not salt:
            raise self._bad(f"token {token_id}: 'hash' must be a SHA-256 digest")
        last_used = text("last_used_at", optional=True)
        role = text("role", optional=True) or OPERATOR  # a file from before roles: operators
        if role not in TOKEN_ROLES:
            raise self._bad(f"token {token_id}: role {role!r} is not one of {TOKEN_ROLES}")
        info = TokenInfo(
            id=token_id,
            operator=text("operator") or "",
            note=text("note", optional=True) or "",
            created_at=text("created_at") or "",
            last_used_at=last_used,
            revoked_at=text("revoked_at", optional=True),
            role=role,
        )
        return _Record(info, salt, digest, _parse_ts(last_used))

    def _current(self) -> dict[str, _Record]:
        """The records, re-read only when the file changed since the last read (its inode,
        mtime, ctime or size differ: an atomic replace always makes a new inode)."""
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int, int] | None = (
                st.st_ino,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_size,
            )
        except FileNotFoundError:
            stamp = None
        except OSError:  # unreadable: never the cached stamp, so _read_disk says why
            stamp = (-1, -1, -1, -1)
        cached_stamp, records = self._snapshot
        if self._loaded and stamp == cached_stamp:
            return records
        with self._read_mu:
            cached_stamp, records = self._snapshot
            if not self._loaded or stamp != cached_stamp:
                self._snapshot = self._read_disk()
                self._loaded = True
            return self._snapshot[1]

    def list(self) -> builtins.list[TokenInfo]:
        """Every token, revoked ones included, oldest first."""
        return sorted(
            (r.info for r in self._current().values()), key=lambda i: (i.created_at, i.id)
        )

    def live(self) -> builtins.list[TokenInfo]:
        """The tokens that are not revoked."""
        return [info for info in self.list() if info.live]

    def find(self, id_or_prefix: str) -> TokenInfo:
        """The token whose id is, or starts with, ``id_or_prefix`` (a whole token works too)."""
        return _match(self._current(), id_or_prefix).info

    def verify(self, presented: str) -> TokenInfo | None:
        """The live token ``presented`` is, or None. Malformed strings fail before any lookup;
        otherwise one dict lookup and one hash, compared in constant time. Raises
        :class:`TokenFileError` if tokens.json is corrupt (no token can be checked)."""
        if not isinstance(presented, str) or len(presented) != TOKEN_LEN:
            return None
        m = _TOKEN.fullmatch(presented)
        if m is None:
            return None
        rec = self._current().get(m.group(1))
        digest = _digest(rec.salt if rec is not None else _DUMMY_SALT, m.group(2))
        if rec is None or not hmac.compare_digest(digest, rec.digest) or not rec.info.live:
            return None
        self._maybe_touch(rec)
        return rec.info

    # ---- writing ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _editing(self, timeout: float = LOCK_TIMEOUT_S) -> Iterator[dict[str, _Record]]:
        """The records read fresh under the file lock; written back if the block changed
        them."""
        from filelock import FileLock, Timeout

        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.lock_path), timeout=timeout, mode=FILE_MODE)
        try:
            lock.acquire()
        except Timeout:
            raise TokenFileError(
                f"{self.path} stayed locked by another process for {timeout:.0f} s",
                hint=f"Retry; if nothing else is running, delete {self.lock_path}",
            ) from None
        try:
            _, before = self._read_disk()
            records = dict(before)
            yield records
            if records != before:
                self._write(records)
        finally:
            lock.release()

    def _write(self, records: dict[str, _Record]) -> None:
        ordered = sorted(records.values(), key=lambda r: (r.info.created_at, r.info.id))
        text = json.dumps(
            {"version": FILE_VERSION, "tokens": [r.to_json() for r in ordered]},
            ensure_ascii=False,
            indent=2,
        )
        try:
            atomic_write_text(self.path, text + "\n", file_mode=FILE_MODE)
        except OSError as exc:
            raise TokenFileError(
                f"cannot write {self.path}: {exc.strerror or exc}",
                hint="Check the free space and the folder's permissions; the old file is intact",
            ) from None

    def create(
        self, operator: str, note: str = "", *, role: str = OPERATOR
    ) -> tuple[TokenInfo, str]:
        """A new token for ``operator`` (``role``: operator, or admin, who may also write
        shared memory): its info, and the token itself, which is not kept and cannot be shown
        again."""
        if role not in TOKEN_ROLES:
            raise OlavError(f"role {role!r} is not one of {', '.join(TOKEN_ROLES)}")
        name = operator_name(operator)
        secret = secrets.token_urlsafe(SECRET_BYTES)
        salt = secrets.token_bytes(SALT_BYTES)
        with self._editing() as records:
            token_id = secrets.token_hex(ID_HEX // 2)
            while token_id in records:
                token_id = secrets.token_hex(ID_HEX // 2)
            info = TokenInfo(
                id=token_id,
                operator=name,
                note=_clean_note(note),
                created_at=_iso(_now_ts()),
                role=role,
            )
            records[token_id] = _Record(info, salt, _digest(salt, secret), None)
        return info, f"olav_{token_id}_{secret}"

    def revoke(self, id_or_prefix: str) -> TokenInfo:
        """Revoke the token whose id is, or starts with, ``id_or_prefix``; a token already
        revoked is returned as it is (its ``revoked_at`` unchanged)."""
        with self._editing() as records:
            rec = _match(records, id_or_prefix)
            if rec.info.live:
                rec = replace(rec, info=replace(rec.info, revoked_at=_iso(_now_ts())))
                records[rec.info.id] = rec
        return rec.info

    # ---- last_used_at -----------------------------------------------------------------------

    def _maybe_touch(self, rec: _Record) -> None:
        if self.touch_interval is None:
            return
        now = _now_ts()
        token_id = rec.info.id
        last = max(self._touched.get(token_id, 0.0), rec.used_ts or 0.0)
        if now - last < self.touch_interval:
            return
        with self._touch_mu:
            self._touched[token_id] = now
            self._pending[token_id] = now
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._flush_touches, name="olav-token-touch", daemon=True
                )
                self._writer.start()

    def _flush_touches(self) -> None:
        while True:
            with self._touch_mu:
                batch, self._pending = self._pending, {}
                if not batch:
                    self._writer = None
                    return
            try:
                with self._editing(timeout=TOUCH_LOCK_TIMEOUT_S) as records:
                    for token_id, ts in batch.items():
                        rec = records.get(token_id)
                        if rec is not None and (rec.used_ts or 0.0) < ts:
                            info = replace(rec.info, last_used_at=_iso(ts))
                            records[token_id] = replace(rec, info=info, used_ts=ts)
            except Exception as exc:  # a missed last_used_at must never fail a request
                log.debug("could not record token use: %s", exc)

    def wait_for_writes(self, timeout: float = 10.0) -> None:
        """Wait until the queued ``last_used_at`` writes are on disk (tests, shutdown)."""
        writer = self._writer
        if writer is not None:
            writer.join(timeout)


def _match(records: dict[str, _Record], id_or_prefix: str) -> _Record:
    key = (id_or_prefix or "").strip()
    m = _TOKEN.fullmatch(key)
    if m is not None:  # a whole token pasted
        key = m.group(1)
    elif key.startswith("olav_"):  # the listing's olav_<id>_… form
        key = key[len("olav_") :].split("_", 1)[0]
    key = key.lower()
    listing = "See the ids with `olav serve token list`"
    if not key:
        raise OlavError("give the id of a token", hint=listing)
    if key in records:
        return records[key]
    matches = sorted(token_id for token_id in records if token_id.startswith(key))
    if not matches:
        raise NotFoundError(f"no token with id {key!r}", hint=listing)
    if len(matches) > 1:
        raise OlavError(
            f"{key!r} matches {len(matches)} tokens ({', '.join(matches)})",
            hint="Give more characters of the id",
        )
    return records[matches[0]]
