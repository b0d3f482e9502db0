"""Llama 3.1 to 3.3: ``<|python_tag|>{"name": …, "parameters": …}``, several ``;`` apart,
then ``<|eom_id|>`` or ``<|eot_id|>``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, json_after

_TOKEN = re.compile(r"<\|python_tag\|>")


def read(r: Reading) -> Iterator[Found]:
    return json_after(r.text, _TOKEN, "llama_python_tag")


FAMILY = Family(
    "llama_python_tag",
    read,
    triggers=("<|python_tag|>",),
    stream=("<|",),
    call_start=r"<\|python_tag\|>",
    tokens=("<|python_tag|>", "<|eot_id|>", "<|eom_id|>"),
)
