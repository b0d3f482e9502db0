"""Secret redaction for everything olav stores (captures, audit messages, tool arguments)."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"
SECRET_KEYS = (
    "token",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "secret",
    "credential",
    "auth",
    "private_key",
)

_PATTERNS = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    re.compile(r"\b(?:sk|pk|ghp|gho|xox[bap])[-_][A-Za-z0-9_-]{16,}"),
)
_URL_CREDS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^\s:/@]+):(?P<pw>[^\s@/]+)@")
_KV = re.compile(
    r"(?i)(?P<key>[\w-]*(?:" + "|".join(SECRET_KEYS) + r")[\w-]*)(?P<sep>\s*[=:]\s*)"
    r"(?P<q>[\"']?)(?P<val>[^\s\"',;&]+)"
)


def is_secret_key(key: str) -> bool:
    low = key.lower()
    return any(k in low for k in SECRET_KEYS)


def redact_text(text: str) -> str:
    """Mask secret-shaped substrings: PEM keys, bearer tokens, AWS keys, JWTs, URL passwords,
    and ``password=...`` style pairs."""
    for pat in _PATTERNS:
        text = pat.sub(REDACTED, text)
    text = _URL_CREDS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    return _KV.sub(lambda m: f"{m['key']}{m['sep']}{m['q']}{REDACTED}", text)


def redact(value: Any) -> Any:
    """Redact a JSON-like value: secret keys lose their values, strings are scanned."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if is_secret_key(str(k)) and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
