"""InternLM 2 and 3: ``<|action_start|><|plugin|>{…}<|action_end|>``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, json_after

_TOKEN = re.compile(r"<\|action_start\|>\s*<\|plugin\|>")


def read(r: Reading) -> Iterator[Found]:
    return json_after(r.text, _TOKEN, "internlm")


FAMILY = Family("internlm", read, triggers=("<|action_start|>",), stream=("<|",))
