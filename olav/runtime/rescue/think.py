"""Reasoning kept apart from the answer.

Models that think write it in the content when the server does not split it off:
``<think>…</think>`` (qwen3, deepseek-r1), ``<thinking>…</thinking>``, a closing ``</think>``
whose opening tag was in the prompt template, an opening tag never closed (the answer was
cut off while thinking), or gpt-oss's ``<|channel|>analysis<|message|>…<|end|>``. Tags are
matched in any case (``<THINK>``).
:func:`split_reasoning` returns the visible answer and the reasoning, both stripped; it is
what the final answer, memory and the audit get. :class:`ThinkFilter` does the same to a
token stream, so the chat does not print reasoning while it streams.

The rules, in the order the text comes:

- Reasoning the prompt template opened (qwen3-thinking, QwQ and deepseek-r1 templates end
  with ``<think>``, so the message has only ``</think>``): when the message's first reasoning
  tag is a closing one, everything before it is reasoning, however long, whatever is in it.
- ``<think>`` (``<thinking>``, ``<reasoning>``) to the next closing tag is reasoning; an
  opening tag never closed makes the rest of the message reasoning. Any closing tag closes.
- A closing tag anywhere else is dropped; the text around it stays.
- The newlines right after a closing tag are dropped while the answer has shown nothing but
  whitespace (the answer does not start with blank lines); later they are kept as text.

A stream cannot know what the template did: only a later ``</think>`` says that the start of
the message was reasoning. So :class:`ThinkFilter` holds the start of a message back until
its first reasoning tag or until :data:`STREAM_HOLD` characters have passed, whichever is
first. A closing tag within the hold drops the held text as reasoning; an opening tag, the
end of the hold or the end of the message releases it, and from then on the text streams as
it comes. The guarantee: what the stream shows, stripped, is ``split_reasoning(text)[0]`` for
every message whose first reasoning tag is an opening tag, or a closing tag within
:data:`STREAM_HOLD` characters of the start, or that has none. Template-opened reasoning
longer than that has streamed by the time its ``</think>`` comes: the stream drops the tag
and goes on with the answer, so what it shows ends with the answer (the reasoning stays on
the screen; the final answer, memory and the audit get :func:`split_reasoning`'s, clean).
"""

from __future__ import annotations

import itertools
import re

from olav.runtime.rescue.families import (
    CALL_START,
    THINK_CLOSE,
    THINK_OPEN,
    THINK_OPENERS,
    gpt_oss,
)

# How much of the start of a message the stream holds back in case a ``</think>`` comes that
# makes it reasoning the template opened: about 40 tokens, under a second at the speed of a
# local model, and enough for the few lines a small model thinks before a tool call. Every
# answer waits this long before it shows, so it is small; longer template-opened reasoning is
# shown while it streams (split_reasoning still keeps it out of the final answer). The hold
# is not cut short at a blank line: reasoning has paragraphs too, and a blank line inside the
# hold would show reasoning the hold is there to hide.
STREAM_HOLD = 160

# the families' reasoning tags (<think> for qwen3, deepseek, glm, kimi k2; Mistral's [THINK],
# Gemma 4's thought channel, Kimi K3's think element), each declared by its family
# (olav.runtime.rescue.families); a closing one in the last group
_OPEN_ALT = "|".join(re.escape(t) for t in sorted(THINK_OPEN, key=len, reverse=True))
_CLOSE_ALT = "|".join(re.escape(t) for t in sorted(THINK_CLOSE, key=len, reverse=True))
_TAG = re.compile(f"(?:{_OPEN_ALT})|({_CLOSE_ALT})", re.I)
_CLOSE = re.compile(_CLOSE_ALT, re.I)
_ANY = _TAG  # may there be any?
_TAGS = (*THINK_OPEN, *THINK_CLOSE)
_LONGEST_TAG = max(len(t) for t in _TAGS)
# where a call written in a family's tokens begins: reasoning tags after it are its text
_CALL_START = CALL_START
# what a prompt ends with when the template opened reasoning for the model
_OPENERS = THINK_OPENERS


def _closing(tag: re.Match[str]) -> bool:
    return tag.group(1) is not None


def opened_by(prompt: str) -> str:
    """The reasoning opener a prompt ends in (the template opened reasoning for the model),
    or "": a qwen3 or deepseek prompt ending ``<think>\n``, Kimi K3's think element."""
    tail = prompt.rstrip()
    for written, opener in _OPENERS:
        if tail.endswith(written):
            return opener
    return ""


def split_reasoning(text: str, *, opened: str = "", finished: bool = True) -> tuple[str, str]:
    """``(answer, reasoning)`` of a model message's text. ``opened``: the reasoning opener
    the prompt ended in (:func:`opened_by`), so the text starts inside reasoning."""
    text = opened + text if opened else text
    if not text:
        return text, ""
    thoughts: list[str] = []
    if "<|message|>" in text or "<|channel|>" in text:
        text, thoughts = _harmony(text, finished)
    if not _ANY.search(text):
        return text.strip(), "\n\n".join(t.strip() for t in thoughts if t.strip())
    head, tail = text, ""
    for call in _CALL_START.finditer(text):  # reasoning tags inside a call are its text
        probe = ThinkFilter(hold=len(text))
        probe.feed(text[: call.start()])
        rest = text[call.start() :]
        # a call in reasoning that is never closed ends it (a prefilled <think> the model
        # left open to call a tool, as llama.cpp reads it)
        if not probe.inside(rest) or (finished and not _CLOSE.search(rest)):
            head, tail = text[: call.start()], rest
            break
    f = ThinkFilter(hold=len(head))  # the whole text at once: no bound on the template's
    shown = f.feed(head) + f.flush()
    thoughts += f.thoughts()
    return (shown + tail).strip(), "\n\n".join(t.strip() for t in thoughts if t.strip())


def _harmony(text: str, finished: bool) -> tuple[str, list[str]]:
    """A Harmony completion (gpt-oss) as text and reasoning: the analysis channel is
    reasoning, the final and commentary channels are the answer, and a message to a
    function is written as one call, ``to=functions.NAME<|message|>{…}<|call|>`` (left out
    when the model did not finish it)."""
    parts: list[str] = []
    thoughts: list[str] = []
    for msg in gpt_oss.messages(text, finished):
        body = msg["body"]
        if msg["recipient"]:
            if body is not None and msg["closed"]:
                parts.append(
                    f"<|start|>assistant to={msg['recipient']}<|channel|>commentary"
                    f"<|message|>{body.strip()}<|call|>"
                )
            continue
        if body is None:
            continue
        if msg["channel"] == "analysis":
            thoughts.append(body)
        else:
            parts.append(body)
    return "".join(parts), thoughts


class ThinkFilter:
    """Feed it streamed tokens; it returns what may be shown (the rules: the module
    docstring). Text inside a reasoning block is held back, so is the tail of a chunk that may
    be the start of a tag, and so is the start of a message until its first reasoning tag, at
    most ``hold`` characters (:data:`STREAM_HOLD`; :func:`split_reasoning` passes the length
    of the whole text)."""

    def __init__(self, hold: int = STREAM_HOLD) -> None:
        self._hold = hold
        self._pending = ""
        self._inside = False
        self._at_start = True  # the start of the message: held back till a tag or the hold
        self._strip = False  # drop the newlines that follow a closing tag
        self._spoke = False  # something other than whitespace was shown
        self._blocks: list[int] = []  # where each block of reasoning begins in .reasoning
        self.reasoning: list[str] = []

    def feed(self, chunk: str) -> str:
        self._pending += chunk
        shown: list[str] = []
        while self._pending:
            if self._strip:
                rest = self._pending.lstrip("\n")
                if not rest:
                    self._pending = ""
                    break
                self._pending, self._strip = rest, False
            if self._at_start:
                if not self._start_decided():
                    break  # held back: a closing tag may still make it reasoning
                continue
            if self._inside:
                close = _CLOSE.search(self._pending)
                if close is None:
                    keep = _partial_tail(self._pending)
                    self.reasoning.append(self._pending[: len(self._pending) - keep])
                    self._pending = self._pending[len(self._pending) - keep :]
                    break
                self.reasoning.append(self._pending[: close.start()])
                self._pending = self._pending[close.end() :]
                self._inside = False
                self._strip = not self._spoke
                continue
            tag = (
                _TAG.search(self._pending)
                if ("<" in self._pending or "[" in self._pending)
                else None
            )
            if tag is None:
                keep = _partial_tail(self._pending)
                self._say(shown, self._pending[: len(self._pending) - keep])
                self._pending = self._pending[len(self._pending) - keep :]
                break
            self._say(shown, self._pending[: tag.start()])
            self._pending = self._pending[tag.end() :]
            if _closing(tag):  # a stray closing tag (or one after template reasoning shown)
                self._strip = not self._spoke
            else:
                self._block()
                self._inside = True
        return "".join(shown)

    def flush(self) -> str:
        """What is left at the end of the message: text held back at its start, or a
        held-back ``<`` that was no tag (inside reasoning, it is reasoning)."""
        rest, self._pending, self._at_start = self._pending, "", False
        if self._inside:
            self.reasoning.append(rest)
            return ""
        return rest

    def inside(self, rest: str) -> bool:
        """After the text fed so far: whether what follows (``rest``) is still reasoning, a
        block left open or the template's, whose closing tag comes in ``rest``."""
        if self._inside:
            return True
        if self._at_start:
            tag = _TAG.search(rest)
            # text came first (a call at the very start is no reasoning), and no tag in it
            return (
                bool(self._pending.strip())
                and tag is not None
                and _closing(tag)
                and not _TAG.search(self._pending)
            )
        return False

    def thoughts(self) -> list[str]:
        """The reasoning hidden so far, one string per block."""
        cuts = [*self._blocks, len(self.reasoning)]
        return ["".join(self.reasoning[a:b]) for a, b in itertools.pairwise(cuts)]

    def _start_decided(self) -> bool:
        """At the start of a message: False while it must stay held back, because a
        closing tag may still begin within the hold; else True, the start is over: the held
        text was dropped as reasoning the template opened, or is left to the ordinary rules
        (shown up to an opening tag, if any)."""
        pending, hold = self._pending, self._hold
        tag = _TAG.search(pending) if ("<" in pending or "[" in pending) else None
        call = _CALL_START.search(pending, 0, tag.start()) if tag is not None else None
        if call is not None and not pending[: call.start()].strip():
            pass  # the message opens with a call: a closing tag after it is the call's text
        elif tag is not None and tag.start() <= hold:
            if _closing(tag):  # the template opened it: what came before is reasoning
                self._block()
                self.reasoning.append(pending[: tag.start()])
                self._pending = pending[tag.end() :]
                self._strip = True
        elif len(pending) <= hold:
            return False
        elif tag is None:
            keep = _partial_tail(pending)
            if keep and len(pending) - keep <= hold:  # "…</thi" where a tag may still begin
                return False
        self._at_start = False
        return True

    def _block(self) -> None:
        self._blocks.append(len(self.reasoning))

    def _say(self, shown: list[str], text: str) -> None:
        if text:
            shown.append(text)
            self._spoke = self._spoke or not text.isspace()


def _partial_tail(text: str) -> int:
    """How many characters at the end of ``text`` could begin a reasoning tag."""
    start = max(0, len(text) - _LONGEST_TAG)
    cuts = [i for i in (text.rfind("<", start), text.rfind("[", start)) if i >= 0]
    for cut in sorted(cuts):
        tail = text[cut:].lower()
        if any(t.lower().startswith(tail) for t in _TAGS):
            return len(tail)
    return 0
