"""Memory on object storage: where the table lives, leases in the bucket, one-line errors.

A workspace's memory is either the local ``memory.lance`` folder or a LanceDB table under an
``s3://bucket/prefix`` URI that a team shares. Credentials come only from the standard
``AWS_*`` variables, which LanceDB and boto3 read themselves: they are never part of the
location, the configuration, the logs or the audit.

Every writer on object storage is on another machine, so the local file lock protects nothing.
LanceDB commits with conditional PUTs, but two processes that ``merge_insert`` the same new ids
both insert them (measured on a local S3 server: 60 rows for 50 ids from three writers). So a
write takes a short :class:`Lease` in the bucket (a conditional PUT of a lock object with an
expiry) for its read-check-write, and maintenance takes a long one, so that ten machines'
nightly jobs do not compact at once.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from olav.core.errors import MemoryStoreError, OlavError

SCHEMES = ("s3://",)
LEASE_DIR = "_olav_leases"
WRITE_LEASE = "write"
MAINTENANCE_LEASE = "maintenance"
WRITE_TTL = 60.0  # a crashed writer blocks the others this long at most
MAINTENANCE_TTL = 3600.0
# the longest pause between two tries for a held lease: a write holds it for about 0.1-0.3 s,
# so a longer pause leaves the lease idle while writers sleep (two requests per try)
WAIT_CAP = 0.25


# this process's leases in use: a lease in the bucket that names this process but is not in
# use here was left behind by a release the object store never received (it was down)
_IN_USE: set[tuple[str, str]] = set()
_PROCESS: dict[int, str] = {}
_THREADS = threading.Lock()


def process_owner() -> str:
    """host:pid:token of this process (the token tells a reused pid apart)."""
    pid = os.getpid()
    if pid not in _PROCESS:
        _PROCESS[pid] = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
    return _PROCESS[pid]


class LeaseHeldError(MemoryStoreError):
    """Another process holds a lease in the bucket."""


@dataclass(frozen=True)
class MemoryLocation:
    """Where the memory table lives: a local folder, or a URI plus LanceDB storage options
    (endpoint, region, allow_http; never credentials)."""

    uri: str
    storage_options: dict[str, str] = field(default_factory=dict)
    # how long a read may reuse the table version it saw (remote tables; see writes)
    refresh_seconds: float = 0.0

    @property
    def remote(self) -> bool:
        return "://" in self.uri

    @property
    def path(self) -> Path:
        return Path(self.uri)

    def bucket_key(self, *parts: str) -> tuple[str, str]:
        """The bucket and the object key of ``parts`` under the table's prefix."""
        rest = self.uri.split("://", 1)[1]
        bucket, _, prefix = rest.partition("/")
        key = "/".join(p for p in (prefix.strip("/"), *parts) if p)
        return bucket, key

    def __str__(self) -> str:
        return self.uri


def parse_uri(uri: str, source: str = "memory.uri") -> str:
    """Check a memory URI; returns it without a trailing slash."""
    uri = uri.strip()
    if "://" not in uri:
        return uri
    if not uri.startswith(SCHEMES):
        raise MemoryStoreError(
            f"{source}: {uri!r} is not supported",
            hint="Use s3://bucket/prefix (AWS S3 or any S3-compatible store), or leave it empty",
        )
    rest = uri.split("://", 1)[1]
    if "@" in rest.split("/", 1)[0]:
        raise MemoryStoreError(
            f"{source}: the URI holds credentials",
            hint="Remove them; olav reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        )
    bucket = rest.split("/", 1)[0]
    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]", bucket):
        raise MemoryStoreError(
            f"{source}: {bucket!r} is not a valid bucket name",
            hint="Use s3://bucket/prefix with a lower-case bucket name",
        )
    return uri.rstrip("/")


def location(path: Path | str | MemoryLocation) -> MemoryLocation:
    if isinstance(path, MemoryLocation):
        return path
    return MemoryLocation(str(path))


def memory_location(ws: Any) -> MemoryLocation:
    """The workspace's memory table: ``memory.uri``, or ``memory.lance`` under the databases."""
    cfg = ws.config
    uri = parse_uri(cfg["memory.uri"])
    if not uri:
        return MemoryLocation(str(ws.memory_path))
    options: dict[str, str] = {}
    if cfg["memory.storage_options.endpoint"]:
        options["endpoint"] = cfg["memory.storage_options.endpoint"]
    region = cfg["memory.storage_options.region"] or os.environ.get("AWS_REGION", "")
    region = region or os.environ.get("AWS_DEFAULT_REGION", "")
    if region:
        options["region"] = region
    if cfg["memory.storage_options.allow_http"]:
        options["allow_http"] = "true"
    return MemoryLocation(uri, options, float(cfg["memory.refresh_seconds"]))


# -- errors --------------------------------------------------------------------------------

_CAUSES = (
    (
        ("NoSuchBucket",),
        "the bucket of {uri} does not exist",
        "Create it (`aws s3 mb`, `mc mb`) or fix memory.uri",
    ),
    (
        ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "status: 403"),
        "the object store refused the credentials for {uri}",
        "Check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and the bucket policy)",
    ),
    (
        ("NoCredentials", "Unable to locate credentials", "credential"),
        "no credentials for {uri}",
        "Export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    ),
    (
        ("may or may not have been applied",),
        "the object store of {uri} ({endpoint}) went away while a write was committing",
        "Run it again once the store is back: writes are idempotent, so a write that did "
        "land is not stored twice",
    ),
    (
        (
            "ConnectionRefused",
            "Connection refused",
            "tcp connect error",
            "Connect",
            "timed out",
            "error sending request",
        ),
        "cannot reach the object store of {uri} ({endpoint})",
        "Check that it is running and memory.storage_options.endpoint; the table is unchanged",
    ),
)


def translate(exc: BaseException, loc: MemoryLocation) -> OlavError | None:
    """A one-line error for an object-store failure, or None when it is not one."""
    if isinstance(exc, OlavError) or not loc.remote:
        return None
    text = f"{type(exc).__name__}: {exc}"
    endpoint = loc.storage_options.get("endpoint", "AWS S3")
    for needles, message, hint in _CAUSES:
        if any(n in text for n in needles):
            return MemoryStoreError(message.format(uri=loc.uri, endpoint=endpoint), hint=hint)
    return None


@contextmanager
def remote_errors(loc: MemoryLocation) -> Iterator[None]:
    """Turn object-store failures inside the block into one-line errors."""
    try:
        yield
    except Exception as exc:
        err = translate(exc, loc)
        if err is None:
            raise
        raise err from None


def refuse_if_nothing_listens(loc: MemoryLocation, timeout: float = 5.0) -> None:
    """One TCP connection to the location's endpoint before LanceDB's: an endpoint that
    refuses it (nothing listens on that port) is the one-line error at once, where LanceDB
    retries with back-off for about five seconds first. A timeout or a name that does not
    resolve is left to LanceDB, which retries those and reports them."""
    from urllib.parse import urlsplit

    endpoint = loc.storage_options.get("endpoint", "")
    if not loc.remote or not endpoint:
        return
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return
    if not host:
        return
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except ConnectionRefusedError:
        raise MemoryStoreError(
            f"cannot reach the object store of {loc.uri} ({endpoint}): nothing listens there",
            hint="Check that it is running and memory.storage_options.endpoint; "
            "the table is unchanged",
        ) from None
    except OSError:
        return


# -- leases --------------------------------------------------------------------------------


def s3_client(loc: MemoryLocation) -> Any:
    """A boto3 S3 client for the location's endpoint (credentials from AWS_* variables)."""
    import boto3
    from botocore.config import Config

    opts = loc.storage_options
    return boto3.client(
        "s3",
        endpoint_url=opts.get("endpoint") or None,
        region_name=opts.get("region") or None,
        config=Config(
            connect_timeout=5, read_timeout=10, retries={"max_attempts": 2, "mode": "standard"}
        ),
    )


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, its ETag, and how long it still runs on the object store's clock."""

    owner: str
    etag: str
    left: float


def _ttl(raw: Any, default: float) -> float:
    """A lease's time to live as its object says, within [0, MAINTENANCE_TTL]; a lease written
    without one (an older olav) has its name's, ``default``."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        return default
    return min(max(float(raw), 0.0), MAINTENANCE_TTL)


def _store_now(response: dict[str, Any]) -> float | None:
    """The object store's clock at a response: its Date header (None when it sent none)."""
    header = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not header:
        return None
    try:
        return parsedate_to_datetime(str(header)).timestamp()
    except (TypeError, ValueError):
        return None


class Lease:
    """A lock object ``<prefix>/_olav_leases/<name>.json`` with a time to live, taken with a
    conditional PUT (If-None-Match), and taken over once expired with If-Match on its ETag,
    so exactly one process wins either way.

    Expiry is measured on the object store's clock, never a machine's: the lease runs out
    ``ttl`` seconds after the object's Last-Modified time, compared with the Date of the
    response that read it. A machine whose clock is minutes off neither takes a live lease
    early nor holds one forever. (``expires``, on the holder's clock, is written only for
    people reading the object.) Not re-entrant: :class:`olav.memory.store.writes.RemoteGuards`
    counts nested uses."""

    def __init__(
        self,
        loc: MemoryLocation,
        name: str,
        ttl: float,
        client: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.loc, self.name, self.ttl = loc, name, ttl
        self.bucket, self.key = loc.bucket_key(LEASE_DIR, f"{name}.json")
        self.owner = process_owner()
        self._client = client
        self.clock = clock  # this machine's clock: only a fallback for a store without Date

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = s3_client(self.loc)
        return self._client

    def _body(self) -> bytes:
        data = {"owner": self.owner, "ttl": self.ttl, "expires": self.clock() + self.ttl}
        return json.dumps(data).encode()

    def holder(self) -> Holder | None:
        """The current lease, or None when free."""
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise
        try:
            data = json.loads(got["Body"].read() or b"{}")
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        ttl = _ttl(data.get("ttl"), self.ttl)
        now = _store_now(got)
        if now is None:
            now = self.clock()
        written = got["LastModified"].timestamp()
        return Holder(str(data.get("owner", "?")), str(got["ETag"]), written + ttl - now)

    def try_acquire(self) -> bool:
        with _THREADS:
            if (self.bucket, self.key) in _IN_USE:  # another thread of this process has it
                return False
            if self._try_put():
                _IN_USE.add((self.bucket, self.key))
                return True
            return False

    def _try_put(self) -> bool:
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=self.key, Body=self._body(), IfNoneMatch="*"
            )
            return True
        except Exception as exc:
            if _code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                raise
        held = self.holder()
        if held is None:
            return False  # freed meanwhile: the next try takes it
        mine = held.owner == self.owner  # left behind by this process
        if not mine and held.left > 0:
            return False
        try:  # expired: take it over, unless another process took it first
            self.client.put_object(
                Bucket=self.bucket, Key=self.key, Body=self._body(), IfMatch=held.etag
            )
            return True
        except Exception as exc:
            if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                return False
            raise

    def acquire(self, timeout: float) -> None:
        """Take the lease, retrying with jittered backoff for ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        with remote_errors(self.loc):
            while not self.try_acquire():
                if time.monotonic() >= deadline:
                    raise self.held_error()
                time.sleep(min(delay * random.uniform(0.5, 1.5), WAIT_CAP))
                delay = min(delay * 2, WAIT_CAP)

    def held_error(self) -> LeaseHeldError:
        held = self.holder()
        who = held.owner if held else "another process"
        left = max(0.0, held.left) if held else 0.0
        return LeaseHeldError(
            f"the {self.name} lease on {self.loc.uri} is held by {who} for {left:.0f}s more",
            hint="Another machine is doing this now; try again later",
        )

    def release(self) -> None:
        """Free the lease if it is still ours (an expired one may have been taken over)."""
        try:
            with remote_errors(self.loc):
                held = self.holder()
                if held is not None and held.owner == self.owner:
                    self.client.delete_object(Bucket=self.bucket, Key=self.key)
        finally:
            with _THREADS:
                _IN_USE.discard((self.bucket, self.key))

    @contextmanager
    def held(self, timeout: float = 0.0) -> Iterator[None]:
        self.acquire(timeout)
        try:
            yield
        except BaseException:
            with suppress(OlavError):  # unreachable store: the lease expires by itself
                self.release()
            raise
        self.release()
