"""What the chat may print while a model message streams in.

:class:`StreamGuard` takes the tokens of one model message and returns what may be shown:
no reasoning (:class:`~olav.runtime.rescue.think.ThinkFilter`, which holds the first
:data:`~olav.runtime.rescue.think.STREAM_HOLD` characters back in case the template opened
reasoning there; longer template-opened reasoning streams, then the answer after it, while
the final answer stays clean), and from the first sign of a tool call written as text (a
``<tool_call>`` tag, a special token, a JSON object or list at the start of a line) nothing
more until the message ends. The runner then knows from the cleaned final message whether
the held text was a call (it ran, and is never shown) or the answer (printed whole at the end
of the turn).
"""

from __future__ import annotations

import re

from olav.runtime.rescue.families import STREAM_MARKERS
from olav.runtime.rescue.think import ThinkFilter, opened_by

_MARKERS = STREAM_MARKERS  # each family declares its own (olav.runtime.rescue.families)
_LINE_START = re.compile(r"(?:^|\n)[ \t]*[\[{]")
_FENCE_TAG = re.compile(r"json|tool\w*")  # what may follow ``` on a fence that opens a call
_CALL_AT_START = re.compile(r"\s*[A-Za-z_][\w.]*\(")  # a pythonic call as the whole message
_NAME_AT_START = re.compile(r"\s*[A-Za-z_][\w.]*")
_LONGEST = max(len(m) for m in _MARKERS)


class StreamGuard:
    def __init__(self, prompt: str = "") -> None:
        self._think = ThinkFilter()
        self._tail = ""
        self._opened = opened_by(prompt)  # the template opened reasoning: fed first
        self._held = False
        self.shown = ""  # what was printed of this message (empty while only spaces came)

    def feed(self, chunk: str) -> str:
        if self._held:
            return ""
        if self._opened:
            chunk, self._opened = self._opened + chunk, ""
        text = self._tail + self._think.feed(chunk)
        self._tail = ""
        cut = _first_marker(text, at_start=not self.shown)
        if cut is not None:
            self._held = True
            return self._show(text[:cut])
        keep = _partial_marker(text)
        if not self.shown and text[: len(text) - keep].isspace():  # the start: wait for more
            keep = len(text)
        if not self.shown and _NAME_AT_START.fullmatch(text):  # a call's name may follow
            keep = len(text)
        self._tail = text[len(text) - keep :] if keep else ""
        return self._show(text[: len(text) - keep])

    def flush(self) -> str:
        """The end of the message: a held-back tail that turned out to be no marker, and the
        text before the first marker of what the think filter held back."""
        if self._held:
            return ""
        text, self._tail = self._tail + self._think.flush(), ""
        cut = _first_marker(text, at_start=not self.shown)
        if cut is not None:  # the think filter held the start of the message back till now
            self._held = True
            return self._show(text[:cut])
        return self._show(text)

    def _show(self, text: str) -> str:
        self.shown += text
        return text


def _first_marker(text: str, *, at_start: bool) -> int | None:
    hits = [i for i in (text.find(m) for m in _MARKERS) if i >= 0]
    for line in _LINE_START.finditer(text):
        if line.group().startswith("\n") or at_start:  # a line start, not mid-line
            fence = _fence_before(text, line.start() + 1)
            hits.append(line.start() if fence is None else fence)  # a fence that opens JSON
            break
    if at_start and _CALL_AT_START.match(text):
        hits.append(0)
    return min(hits) if hits else None


def _fence_before(text: str, end: int) -> int | None:
    """Where the fence line opening a JSON call begins (the newline before it, or 0) when
    ``text[:end]`` ends with such a line, a newline and only blanks; else None. Read from the
    last two lines only: a regular expression searched over the whole text would retry at
    every backtick and cost the square of the text's length."""
    last = text.rfind("\n", 0, end)
    if last < 0 or text[last + 1 : end].strip(" \t"):
        return None
    before = text.rfind("\n", 0, last)
    line = text[before + 1 : last].strip(" \t")
    if not line.startswith("```"):
        return None
    tag = line[3:].strip(" \t")
    if tag and not _FENCE_TAG.fullmatch(tag):
        return None
    return max(before, 0)


def _partial_marker(text: str) -> int:
    """How many characters at the end of ``text`` could begin a marker (or a line that
    could start a JSON value)."""
    if text.rstrip(" \t").endswith("\n"):  # the next chunk may open a line with { or [
        kept = len(text) - len(text.rstrip(" \t\n"))
        fence = _fence_before(text, len(text))  # a fence line that may open a JSON call
        return kept if fence is None else len(text) - fence
    last = text.rsplit("\n", 1)[-1]
    if last.lstrip(" \t").startswith("`"):  # a line that may be a fence: wait for its end
        return len(last)
    for size in range(min(_LONGEST, len(text)), 0, -1):
        tail = text[-size:]
        if any(m.startswith(tail) for m in _MARKERS):
            return size
    return 0


def unshown(shown: str, answer: str) -> str:
    """What of the final ``answer`` a stream that printed ``shown`` has still to print: all
    of it when nothing streamed (a message the guard held back), else its held-back end."""
    trailing = shown[len(shown.rstrip()) :]
    shown = shown.strip()
    if not shown:
        return answer
    if answer.startswith(shown):
        rest = answer[len(shown) :]
        if trailing and rest.startswith(trailing):  # blanks the stream printed already
            return rest[len(trailing) :]
        return rest
    # the stream showed something the answer is not: reasoning whose opening tag was in the
    # chat template and whose closing tag came after the stream's hold
    if shown.endswith(answer.strip()):
        return ""  # the stream went on to show the whole answer after it
    return answer if shown not in answer else answer[answer.index(shown) + len(shown) :]
