"""Llama 4: ``<|python_start|>[name(a=1)]<|python_end|>``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, python_calls

_BLOCK = re.compile(r"<\|python_start\|>\s*+((?:.*?\S)??)\s*+(?:<\|python_end\|>|\Z)", re.S)


def read(r: Reading) -> Iterator[Found]:
    for m in _BLOCK.finditer(r.text):
        for name, args in python_calls(m.group(1)) or []:
            yield Found(name, args, "llama4_pythonic", m.start(), m.end())


FAMILY = Family(
    "llama4_pythonic",
    read,
    triggers=("<|python_start|>",),
    stream=("<|",),
    tokens=("<|python_start|>", "<|python_end|>"),
)
