"""Reasoning kept apart from the answer.

Models that think write it in the content when the server does not split it off:
``<think>…</think>`` (qwen3, deepseek-r1), ``<thinking>…</thinking>``, a closing ``</think>``
whose opening tag was in the prompt template, an opening tag never closed (the answer was
cut off while thinking), or gpt-oss's ``<|channel|>analysis<|message|>…<|end|>``.
:func:`split_reasoning` returns the visible answer and the reasoning, both stripped.
:class:`ThinkFilter` does the same to a token stream, so the chat never prints reasoning.
"""

from __future__ import annotations

import re

_BLOCK = re.compile(r"<(think|thinking|reasoning)>(.*?)</\1>", re.S | re.I)
_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.I)
_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.I)
_HARMONY = re.compile(
    r"(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>(.*?)(?:<\|end\|>|$)", re.S
)
_HARMONY_FINAL = re.compile(r"(?:<\|start\|>assistant)?<\|channel\|>final<\|message\|>")
_MARKERS = ("<think", "<thinking", "<reasoning", "</think", "</thinking", "</reasoning", "<|chan")


def split_reasoning(text: str) -> tuple[str, str]:
    """``(answer, reasoning)`` of a model message's text."""
    if not text or not any(m in text for m in _MARKERS):
        return text, ""
    thoughts: list[str] = []

    def keep(m: re.Match[str]) -> str:
        thoughts.append(m.group(m.lastindex or 1))
        return ""

    text = _HARMONY.sub(keep, text)
    text = _HARMONY_FINAL.sub("", text).replace("<|return|>", "").replace("<|end|>", "")
    text = _BLOCK.sub(keep, text)
    close = _CLOSE.search(text)
    if close and not _OPEN.search(text[: close.start()]):  # its opening tag was in the prompt
        thoughts.insert(0, text[: close.start()])
        text = text[close.end() :]
    opened = _OPEN.search(text)
    if opened:  # never closed: the rest is reasoning
        thoughts.append(text[opened.end() :])
        text = text[: opened.start()]
    text = _CLOSE.sub("", text)
    return text.strip(), "\n\n".join(t.strip() for t in thoughts if t.strip())


class ThinkFilter:
    """Feed it streamed tokens; it returns what may be shown. Text inside a reasoning block
    is held back, and so is the tail of a chunk that may be the start of a tag."""

    def __init__(self) -> None:
        self._pending = ""
        self._inside = False
        self.reasoning: list[str] = []

    def feed(self, chunk: str) -> str:
        self._pending += chunk
        shown: list[str] = []
        while self._pending:
            if self._inside:
                close = _CLOSE.search(self._pending)
                if close is None:
                    keep = _partial_tail(self._pending)
                    self.reasoning.append(self._pending[: len(self._pending) - keep])
                    self._pending = self._pending[len(self._pending) - keep :]
                    break
                self.reasoning.append(self._pending[: close.start()])
                self._pending = self._pending[close.end() :].lstrip("\n")
                self._inside = False
                continue
            opened = _OPEN.search(self._pending)
            if opened is not None:
                shown.append(self._pending[: opened.start()])
                self._pending = self._pending[opened.end() :]
                self._inside = True
                continue
            close = _CLOSE.search(self._pending)  # reasoning whose opening tag was in the prompt
            if close is not None:
                self.reasoning.append("".join(shown) + self._pending[: close.start()])
                shown = []
                self._pending = self._pending[close.end() :].lstrip("\n")
                continue
            keep = _partial_tail(self._pending)
            shown.append(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            break
        return "".join(shown)

    def flush(self) -> str:
        """What is left at the end of the message (a held-back ``<`` that was no tag)."""
        rest, self._pending = ("" if self._inside else self._pending), ""
        return rest


def _partial_tail(text: str) -> int:
    """How many characters at the end of ``text`` could begin a reasoning tag."""
    cut = text.rfind("<")
    if cut < 0 or len(text) - cut > len("</reasoning>"):
        return 0
    tail = text[cut:].lower()
    tags = ("<think>", "<thinking>", "<reasoning>", "</think>", "</thinking>", "</reasoning>")
    return len(tail) if any(t.startswith(tail) for t in tags) else 0
