"""gpt-oss (Harmony): ``to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>
{…}<|call|>``, the recipient in the role or the channel part of the header.

:func:`messages` splits a completion into its Harmony messages; the reasoning filter takes
the analysis channel from it (:mod:`olav.runtime.rescue.think`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import (
    Family,
    Found,
    Reading,
    ends,
    json_then,
    json_value,
    skip_ws,
)

# a recipient in the role or the channel part of the header, then the body
_CALL = re.compile(
    r"to=(?:functions\.)?([\w.\-]++)(?:(?!to=)[^<])*+(?:<\|channel\|>[^<]*+)?"
    r"(?:<\|constrain\|>\s*+\w++\s*+)?<\|message\|>"
)
_HEAD = re.compile(r"(<\|start\|>assistant)?(<\|channel\|>\w*)?\s*")
_TOKEN = re.compile(r"<\|(?:start|channel|constrain|message|end|call|return)\|>")
_RECIPIENT = re.compile(r"\bto=([^\s<]++)")
_CHANNEL = re.compile(r"\s*+([\w-]++)")
_ENDS = ("<|end|>", "<|call|>", "<|return|>")


def read(r: Reading) -> Iterator[Found]:
    text = r.text
    for m in _CALL.finditer(text):
        start = text.rfind("<|", 0, m.start())
        head = text[start : m.start()] if start >= 0 else ""
        start = start if start >= 0 and _HEAD.fullmatch(head) else m.start()
        value, end, closed = json_then(
            text, m.end(), ("<|call|>", "<|end|>", "<|return|>"), r.finished
        )
        yield Found(m.group(1), value if closed else None, "gpt_oss", start, end, closed)


def messages(text: str, finished: bool = True) -> list[dict[str, Any]]:
    """The Harmony messages of a completion, in order: ``{recipient, channel, body,
    closed}``. A header opens with ``<|start|>`` (or the prompt opened it: the text starts
    inside one), names a channel after ``<|channel|>`` and maybe a recipient (``to=``, in the
    role or the channel part), and its body runs from ``<|message|>`` to an end token. A call's
    body is JSON, read to its last bracket, so an end token quoted inside it stays text.
    Text outside any message has channel None; a header the text ends in has body None."""
    out: list[dict[str, Any]] = []
    first = _TOKEN.search(text)
    in_header = (
        first is not None
        and first.group() in ("<|channel|>", "<|constrain|>", "<|message|>")
        and not text[: first.start()].strip(" ").startswith(("<", "\n"))
    )
    pos = 0
    head = ""
    while pos < len(text):
        if in_header:
            m = text.find("<|message|>", pos)
            nxt = text.find("<|start|>", pos)
            if m < 0 or (0 <= nxt < m):
                stop = len(text) if nxt < 0 else nxt
                head += text[pos:stop]
                out.append(
                    {
                        "recipient": _recipient(head),
                        "channel": _channel(head),
                        "body": None,
                        "closed": False,
                    }
                )
                head, pos = "", stop + (len("<|start|>") if nxt >= 0 else 0)
                continue
            head += text[pos:m]
            pos = m + len("<|message|>")
            recipient, channel = _recipient(head), _channel(head)
            body_end, closed, after = _body(text, pos, recipient is not None, finished)
            out.append(
                {
                    "recipient": recipient,
                    "channel": channel,
                    "body": text[pos:body_end],
                    "closed": closed,
                }
            )
            pos, head, in_header = after, "", False
            continue
        start = text.find("<|start|>", pos)
        stop = len(text) if start < 0 else start
        chunk = text[pos:stop]
        for token in _ENDS:
            chunk = chunk.replace(token, "")
        if chunk.strip():
            out.append({"recipient": None, "channel": None, "body": chunk, "closed": True})
        if start < 0:
            break
        pos, in_header = start + len("<|start|>"), True
    return out


def _body(text: str, pos: int, call: bool, finished: bool) -> tuple[int, bool, int]:
    """Where a message body that starts at ``pos`` ends, whether its end was written (or
    the message ended on the stop token), and where the text goes on."""
    if call:
        got = json_value(text, skip_ws(text, pos))
        if got is not None:
            end = got[1]
            after = skip_ws(text, end)
            for token in _ENDS:
                if text.startswith(token, after):
                    return end, True, after + len(token)
            if ends(text, end, finished):
                return end, True, len(text)
    enders = ("<|call|>", "<|end|>") if call else ("<|end|>", "<|return|>")
    hits = [(text.find(t, pos), t) for t in enders]
    hits = [(i, t) for i, t in hits if i >= 0]
    starts = text.find("<|start|>", pos)
    if hits:
        i, token = min(hits)
        if not (0 <= starts < i):
            return i, not call or json_value(text[pos:i].strip(), 0) is not None, i + len(token)
    if starts >= 0:
        return starts, False, starts
    closed = finished and (not call or json_value(text[pos:].strip(), 0) is not None)
    return len(text), closed, len(text)


def _recipient(head: str) -> str | None:
    m = _RECIPIENT.search(head)
    return m.group(1) if m else None


def _channel(head: str) -> str | None:
    cut = head.find("<|channel|>")
    if cut < 0:
        return None
    m = _CHANNEL.match(head, cut + len("<|channel|>"))
    return m.group(1) if m else None


FAMILY = Family(
    "gpt_oss",
    read,
    triggers=("<|message|>",),
    stream=("to=functions.", "<|"),
    token_patterns=(r"<\|channel\|>[\w-]*+",),
    tokens=(
        "<|start|>assistant",
        "<|start|>user",
        "<|start|>system",
        "<|start|>developer",
        "<|start|>tool",
        "<|start|>",
        "<|end|>",
        "<|call|>",
        "<|return|>",
        "<|message|>",
        "<|constrain|>",
    ),
    think_openers=(("<|channel|>analysis<|message|>", "<|channel|>analysis<|message|>"),),
)
