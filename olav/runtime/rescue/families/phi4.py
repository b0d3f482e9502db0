"""Phi-4: ``functools[{"name": …, "arguments": …}]``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, json_after

_TOKEN = re.compile(r"functools(?=\[)")


def read(r: Reading) -> Iterator[Found]:
    return json_after(r.text, _TOKEN, "phi4")


FAMILY = Family("phi4", read, triggers=("functools[",), stream=("functools[",))
