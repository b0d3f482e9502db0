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

# How much of the start of a message the stream holds back in case a ``</think>`` comes that
# makes it reasoning the template opened: about 40 tokens, under a second at the speed of a
# local model, and enough for the few lines a small model thinks before a tool call. Every
# answer waits this long before it shows, so it is small; longer template-opened reasoning is
# shown while it streams (split_reasoning still keeps it out of the final answer). The hold
# is not cut short at a blank line: reasoning has paragraphs too, and a blank line inside the
# hold would show reasoning the hold is there to hide.
STREAM_HOLD = 160

_TAG = re.compile(r"<(/?)(?:think|thinking|reasoning)>", re.I)
_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
_ANY = re.compile(r"<(?:/?(?:think|reasoning)|\|chan)", re.I)  # cheap: may there be any?
_HARMONY = re.compile(
    r"(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>(.*?)(?:<\|end\|>|$)", re.S
)
_HARMONY_FINAL = re.compile(r"(?:<\|start\|>assistant)?<\|channel\|>final<\|message\|>")
_TAGS = ("<think>", "<thinking>", "<reasoning>", "</think>", "</thinking>", "</reasoning>")
_LONGEST_TAG = max(len(t) for t in _TAGS)


def split_reasoning(text: str) -> tuple[str, str]:
    """``(answer, reasoning)`` of a model message's text."""
    if not text or not _ANY.search(text):
        return text, ""
    thoughts: list[str] = []
    if "<|" in text:

        def keep(m: re.Match[str]) -> str:
            thoughts.append(m.group(1))
            return ""

        text = _HARMONY.sub(keep, text)
        text = _HARMONY_FINAL.sub("", text).replace("<|return|>", "").replace("<|end|>", "")
    if _ANY.search(text):
        f = ThinkFilter(hold=len(text))  # the whole text at once: no bound on the template's
        text = f.feed(text) + f.flush()
        thoughts += f.thoughts()
    return text.strip(), "\n\n".join(t.strip() for t in thoughts if t.strip())


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
            tag = _TAG.search(self._pending) if "<" in self._pending else None
            if tag is None:
                keep = _partial_tail(self._pending)
                self._say(shown, self._pending[: len(self._pending) - keep])
                self._pending = self._pending[len(self._pending) - keep :]
                break
            self._say(shown, self._pending[: tag.start()])
            self._pending = self._pending[tag.end() :]
            if tag.group(1):  # a stray closing tag (or one after template reasoning shown)
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
        tag = _TAG.search(pending) if "<" in pending else None
        if tag is not None and tag.start() <= hold:
            if tag.group(1):  # the template opened it: what came before is reasoning
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
    cut = text.rfind("<", max(0, len(text) - _LONGEST_TAG))
    if cut < 0:
        return 0
    tail = text[cut:].lower()
    return len(tail) if any(t.startswith(tail) for t in _TAGS) else 0
