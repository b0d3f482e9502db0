"""Secret redaction for everything olav stores (captures, audit rows, logs, exports).

Two layers: values under secret-looking keys (``password=…``, ``"token": "…"``, ``密码：…``,
``--password …``, Cisco ``secret 5 …``, SNMP ``community …``), and secret-shaped values
anywhere (PEM keys, bearer/basic credentials, AWS/GitHub/Slack/Stripe/Google keys, JWTs,
passwords in URLs, ``curl -u user:pass``). Over-redacting a word is cheap; leaking a
credential into memory that is recalled forever is not.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"
SECRET_KEYS = (
    "token",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "api_key",
    "api-key",
    "apikey",
    "secret",
    "credential",
    "private_key",
    "psk",
    "pre-shared-key",
    "preshared",
    "community",
    "accountkey",
    "access_key",
    "密码",
    "口令",
    "密钥",
    "令牌",
    "凭证",
)
_KEY_ALT = "|".join(re.escape(k) for k in SECRET_KEYS) + r"|auth(?!or)"

_SHAPES = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)\b(?:bearer|basic|digest)\s+[A-Za-z0-9\-._~+/]{8,}=*"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    re.compile(r"\b(?:sk|pk|rk|ghp|gho|ghs|ghu|xox[abpr])[-_][A-Za-z0-9_-]{12,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"),
)
_URL_CREDS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^\s:/@]*):(?P<pw>[^\s@/]+)@")
_CURL_USER = re.compile(r"(?P<flag>(?:^|\s)(?:-u|--user)\s+)(?P<user>[^\s:]+):(?P<pw>\S+)")
# key = value, key: value, "key": "value", 密码：value
_KV = re.compile(
    r"(?i)(?P<key>[\"']?[\w.\-]*(?:" + _KEY_ALT + r")[\w.\-]*[\"']?)"
    r"(?P<sep>\s*[=:：]\s*)"
    r"(?P<val>\[REDACTED\]|\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'}\]]+)"  # a mask stays one
)
# --password VALUE, password 0 VALUE, enable secret 5 VALUE, community VALUE
_SPACED = re.compile(
    r"(?i)(?P<key>(?:--?[\w-]*(?:password|passwd|token|secret|api-?key|psk)[\w-]*)"
    r"|\b(?:password|secret|community|key-string)(?:\s+\d{1,2})?)"
    r"(?P<sep>\s+)(?P<val>(?!(?:is|was|for|of|to|and|the|a|an|must|should|will|expired|"
    r"reset|change|policy|length|required)\b)[^\s\"']\S*|\"[^\"\n]*\")"
)
_SNMP_C = re.compile(r"(?i)(?P<pre>\bsnmp\w*\b[^\n]*?\s-c\s+)(?P<val>\S+)")
_JUNOS_PSK = re.compile(
    r"(?i)(?P<pre>pre-shared-key\s+(?:ascii-text|hexadecimal)\s+)"
    r"(?P<val>\"[^\"\n]*\"|\S+)"
)


def is_secret_key(key: str) -> bool:
    low = key.lower()
    return any(k in low for k in SECRET_KEYS) or bool(re.search(r"auth(?!or)", low))


def _mask(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + REDACTED + value[0]
    return REDACTED


def redact_text(text: str) -> str:
    """Mask secrets in free text (see the module docstring for the shapes)."""
    if not text:
        return text
    for pat in _SHAPES:
        text = pat.sub(REDACTED, text)
    text = _URL_CREDS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    text = _CURL_USER.sub(lambda m: f"{m['flag']}{m['user']}:{REDACTED}", text)
    text = _JUNOS_PSK.sub(lambda m: m["pre"] + _mask(m["val"]), text)
    text = _SNMP_C.sub(lambda m: m["pre"] + REDACTED, text)
    text = _KV.sub(
        lambda m: m["key"] + m["sep"] + _mask(m["val"]) if m["val"] != REDACTED else m.group(0),
        text,
    )
    return _SPACED.sub(
        lambda m: (
            m["key"] + m["sep"] + _mask(m["val"])
            if not m["val"].startswith(REDACTED)
            else m.group(0)
        ),
        text,
    )


def _secret_value(key: str, value: Any) -> bool:
    """A secret key's value, except counts of tokens (``prompt_tokens: 812`` is not an API
    token)."""
    if value in (None, "") or not is_secret_key(key):
        return False
    is_count = isinstance(value, int | float) and not isinstance(value, bool)
    return not (is_count and "tokens" in key.lower())


def redact(value: Any) -> Any:
    """Redact a JSON-like value: secret keys lose their values, strings are scanned."""
    if isinstance(value, dict):
        return {k: (REDACTED if _secret_value(str(k), v) else redact(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
