"""The chat model as the judge of close calls: does this memory apply to this request?

Recall decides most candidates by their margins alone. For the few whose margin lies within a
band around their floor, ``memory.judge: model`` asks the workspace's own chat model, in one
short call per request, which of those memories apply. The answer is a small JSON object::

    {"apply": [2]}          # the numbers of the memories that apply; [] when none does

The call has a deadline (``memory.judge_timeout_ms``). A model that is down, slow, or answers
anything but that object gives no verdict, and the floors' decision stands. Reasoning that a
thinking model writes before its answer (``<think>…</think>``) is ignored.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

NOTE_CHARS = 400  # a memory as the judge reads it
PROMPT = """You decide which stored notes apply to a request an operator made.
A note applies when following it would change or inform how the request is handled.
A note that only shares a topic or a word with the request does not apply.

Request: {request}

Notes:
{notes}

Answer with one JSON object and nothing else: {{"apply": [numbers of the notes that apply]}}.
Use {{"apply": []}} when none applies."""
# never spans another <think>: an opener with no closer is read to the next opener, not to the
# end of the text once per opener (olav/llm/answers.py strips think blocks the same way)
_THINK = re.compile(r"<think>(?:(?!</?think>).)*+</think>", re.S | re.I)
_OBJECT = re.compile(r"\{[^{}]*\}", re.S)
_pool: ThreadPoolExecutor | None = None


@dataclass(frozen=True)
class Verdict:
    applies: list[bool] | None  # one per note; None: no verdict (the floors decide)
    ms: float
    failure: str = ""  # why there is no verdict: down, slow or malformed, and a detail
    answer: str = ""  # what the model said (trimmed), for `olav memory why`

    def to_json(self) -> dict[str, Any]:
        return {"applies": self.applies, "ms": round(self.ms, 1), "failure": self.failure}


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="olav-judge")
    return _pool


def prompt(request: str, notes: Sequence[str]) -> str:
    lines = [f"[{i}] " + " ".join(n.split())[:NOTE_CHARS] for i, n in enumerate(notes, 1)]
    return PROMPT.format(request=" ".join(request.split()), notes="\n".join(lines))


def parse_verdict(text: str, n: int) -> list[bool] | str:
    """The judge's answer as one flag per note, or what is wrong with it (a string)."""
    body = _THINK.sub("", text)
    if "</think>" in body.lower():  # the template opened the reasoning: only its end is here
        body = body[body.lower().rindex("</think>") + len("</think>") :]
    for found in _OBJECT.finditer(body):
        try:
            data = json.loads(found.group(0))
        except ValueError:
            continue
        if isinstance(data, dict) and "apply" in data:
            picked = data["apply"]
            if not isinstance(picked, list):
                return f"'apply' is {picked!r}, not a list"
            flags = [False] * n
            for number in picked:
                if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= n:
                    return f"'apply' names {number!r} (notes: 1 to {n})"
                flags[number - 1] = True
            return flags
    return 'no {"apply": [...]} object in the answer'


class Judge:
    """One chat model, asked at most once per request (the caller sees to that)."""

    def __init__(self, model: Any, *, timeout_ms: int = 2000) -> None:
        self.model = model
        self.timeout_s = max(1, timeout_ms) / 1000

    @classmethod
    def from_config(cls, config: Any, model: Any) -> Judge | None:
        """The workspace's judge, or None when ``memory.judge`` is ``off`` or no model is
        given (``model``: a chat model tuned for verdicts, from
        :func:`olav.llm.models.verdict_model`, built by the layer above memory)."""
        if str(config["memory.judge"]) == "off" or model is None:
            return None
        return cls(model, timeout_ms=int(config["memory.judge_timeout_ms"]))

    def decide(self, request: str, notes: Sequence[str]) -> Verdict:
        if not notes:
            return Verdict([], 0.0)
        started = time.perf_counter()
        text = prompt(request, notes)
        future = _executor().submit(self.model.invoke, text)
        try:
            reply = future.result(timeout=self.timeout_s)
        except FutureTimeout:
            ms = (time.perf_counter() - started) * 1000
            return Verdict(None, ms, f"slow: no verdict within {self.timeout_s * 1000:.0f} ms")
        except Exception as exc:  # any failure of the model leaves the floors' decision
            ms = (time.perf_counter() - started) * 1000
            return Verdict(None, ms, f"down: {type(exc).__name__}")
        ms = (time.perf_counter() - started) * 1000
        answer = _content(reply)
        flags = parse_verdict(answer, len(notes))
        if isinstance(flags, str):
            return Verdict(None, ms, f"malformed: {flags}", answer[:200])
        return Verdict(flags, ms, "", answer[:200])


def _content(reply: Any) -> str:
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")
