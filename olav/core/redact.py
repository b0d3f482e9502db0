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
# the first letters of those words: a lookahead for them skips the alternation at most offsets
_KEY_FIRST = "[" + re.escape("".join(sorted({k[0] for k in SECRET_KEYS} | {"a"}))) + "]"

# Every pattern here runs on untrusted text of any size (chat messages, tool results, logs) in
# the thread that writes the audit, so each must cost time linear in the text. Two habits keep
# them so: a run of key characters is entered only at its first character (the lookbehinds),
# and what has been matched is not given back (possessive quantifiers, atomic groups), so a
# failed attempt costs its own run once instead of once for every offset inside it.
# tests/test_redact_linear.py times them on a megabyte of the worst shapes.
# a private key: from its BEGIN line to the first END line after it (_mask_keys); a key cut
# off before any END line (a truncated log) still loses its whole base64 lines
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z ]{0,40}PRIVATE KEY-----")
_PEM_LINES = re.compile(r"(?:\r?\n[A-Za-z0-9+/=]++(?=\r?\n|\Z))++")
_SHAPES = (
    re.compile(r"(?i)\b(?:bearer|basic|digest)\s++[A-Za-z0-9\-._~+/]{8,}+=*+"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    # a JWT at the start of a run of base64url, else after the run's last "-eyJ"
    # (session-eyJ…: "keep" is the part of the run before it)
    re.compile(
        r"(?<![A-Za-z0-9_-])(?:eyJ|(?>(?P<keep>[A-Za-z0-9_-]*-)eyJ(?=[A-Za-z0-9_-]{5})))"
        r"[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{5,}+"
    ),
    re.compile(r"\b(?:sk|pk|rk|ghp|gho|ghs|ghu|xox[abpr])[-_][A-Za-z0-9_-]{12,}+"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{20,}+"),
)
# found by its "://", whatever the scheme (HTTPS:// too)
_URL_CREDS = re.compile(r"(?P<scheme>://)(?P<user>[^\s:/@]*+):(?P<pw>[^\s@/]++)@")
_CURL_USER = re.compile(r"(?P<flag>(?:^|\s)(?:-u|--user)\s++)(?P<user>[^\s:]++):(?P<pw>\S+)")
# key = value, key: value, "key": "value", 密码：value. The key is the whole run of [\w.-]
# around a secret word (DB_PASSWORD, x-api-key); the first such word found in the run decides.
_KV = re.compile(
    r"(?i)(?P<key>[\"']?(?<![\w.\-])(?>[\w.\-]*?(?=" + _KEY_FIRST + r")(?:" + _KEY_ALT + r"))"
    r"[\w.\-]*+[\"']?)"
    r"(?P<sep>\s*+[=:：]\s*+)"
    r"(?P<val>\[REDACTED\]|\"[^\"\n]*+\"|'[^'\n]*+'|[^\s,;&\"'}\]]++)"  # a mask stays one
)
# --password VALUE, password 0 VALUE, enable secret 5 VALUE, community VALUE. A flag is the
# whole run of [\w-] from its start, so long as a secret word follows a "-" in it.
_SPACED = re.compile(
    r"(?i)(?P<key>(?<![\w-])(?>\w*+-[\w-]*?(?=[apst])(?:password|passwd|token|secret|api-?key|psk))"
    r"[\w-]*+|\b(?:password|secret|community|key-string)(?:\s++\d{1,2})?)"
    r"(?P<sep>\s++)(?P<val>(?!(?:is|was|for|of|to|and|the|a|an|must|should|will|expired|"
    r"reset|change|policy|length|required)\b)[^\s\"']\S*|\"[^\"\n]*+\")"
)
# from one "snmp…" word to the next on its line at most, so each line is read once
_SNMP_C = re.compile(r"(?i)(?P<pre>\bsnmp\w*+(?:(?!\bsnmp)[^\n])*?\s-c\s++)(?P<val>\S+)")
_JUNOS_PSK = re.compile(
    r"(?i)(?P<pre>pre-shared-key\s++(?:ascii-text|hexadecimal)\s++)"
    r"(?P<val>\"[^\"\n]*+\"|\S+)"
)


def is_secret_key(key: str) -> bool:
    low = key.lower()
    return any(k in low for k in SECRET_KEYS) or bool(re.search(r"auth(?!or)", low))


def _mask(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + REDACTED + value[0]
    return REDACTED


def _mask_keys(text: str) -> str:
    """Every private key block masked, in one pass over the text: a BEGIN line takes
    everything up to the first END line after it (BEGIN lines inside, nested or repeated,
    go with it), so masking again finds no BEGIN left and changes nothing."""
    if "PRIVATE KEY-----" not in text:
        return text
    ends = [m.span() for m in _PEM_END.finditer(text)]
    out: list[str] = []
    pos = j = 0
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < pos:  # inside the block masked last
            continue
        while j < len(ends) and ends[j][0] < begin.end():
            j += 1  # an END line that starts before this BEGIN line ends is not its end
        if j < len(ends):
            stop = ends[j][1]
        else:
            lines = _PEM_LINES.match(text, begin.end())
            stop = lines.end() if lines else begin.end()
        out += [text[pos : begin.start()], REDACTED]
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def _mask_shape(m: re.Match[str]) -> str:
    return (m.groupdict().get("keep") or "") + REDACTED


def redact_text(text: str) -> str:
    """Mask secrets in free text (see the module docstring for the shapes)."""
    if not text:
        return text
    text = _mask_keys(text)
    for pat in _SHAPES:
        text = pat.sub(_mask_shape, text)
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
    token) and flags (``tokens_estimated: true`` holds no secret; no boolean can)."""
    if value in (None, "") or isinstance(value, bool) or not is_secret_key(key):
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
