"""The families' control tokens, kept out of what the person sees.

A model's template writes special tokens around its messages (``<|end|>``,
``<|start|>assistant``, Gemma 4's ``<turn|>``, Kimi K3's ``<|close|>response<|sep|>``,
Mistral's ``[TOOL_CALLS]``). When a server passes them through as text, what is left of them
after the calls and the reasoning were taken out is not part of the answer: :func:`scrub`
removes it, outside code the answer shows (a fence or inline code quoting a token keeps it).
"""

from __future__ import annotations

import re

from olav.runtime.rescue.families import CONTROL_TOKENS

# special tokens as the families write them (each family declares its own); a tag a person
# might quote (<tool_call>) is not one of them
_TOKENS = CONTROL_TOKENS
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.S)


def scrub(text: str) -> str:
    """``text`` without the families' control tokens (outside code), its ends stripped."""
    if "<|" not in text and "<｜" not in text and "[" not in text and "|>" not in text:
        return text
    out: list[str] = []
    pos = 0
    for code in _CODE.finditer(text):
        out.append(_TOKENS.sub("", text[pos : code.start()]))
        out.append(code.group())
        pos = code.end()
    out.append(_TOKENS.sub("", text[pos:]))
    cleaned = "".join(out)
    return cleaned.strip() if cleaned != text else text
