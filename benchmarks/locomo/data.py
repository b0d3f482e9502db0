"""The LoCoMo data: conversations of dated sessions and the questions about them, the ways a
turn can be written out (with its date, with its neighbours), and the period a question names."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError

CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
EXCLUDED_CATEGORY = 5  # adversarial: the answer is not in the conversation


@dataclass(frozen=True)
class DialogTurn:
    dia_id: str
    speaker: str
    text: str
    session: int
    position: int  # index of the turn inside its session
    when: datetime | None  # the session's date and time (UTC, as written in the data)
    date_label: str  # e.g. "8 May 2023"; the raw session string when it does not parse
    caption: str | None = None  # BLIP caption of a shared photo, when there is one


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass
class Conversation:
    sample_id: str
    turns: list[DialogTurn]
    questions: list[Question]
    excluded: int = 0  # category-5 questions left out
    no_evidence: int = 0  # questions left out because none of their evidence ids exist
    dropped_ids: list[str] = field(default_factory=list)  # evidence ids that match no turn


_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


def parse_session_date(raw: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> a UTC datetime; None when it does not parse."""
    text = " ".join(str(raw).split())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%d %B, %Y", "%d %B %Y"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def parse_range(spec: str) -> list[int]:
    """``"0-4"`` / ``"0,2,3"`` / ``"1-2,4"`` -> sorted indices."""
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError(part)
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise OlavError(
                f"{spec!r} is not a list of conversation numbers",
                hint="Use a range or a list, e.g. --convs 0-4 or --convs 0,2",
            ) from None
    if not out or min(out) < 0:
        raise OlavError(f"{spec!r} selects no conversation", hint="e.g. --convs 0-4")
    return sorted(out)


def parse_ks(spec: str) -> list[int]:
    """``"1,5,10"`` -> [1, 5, 10]."""
    try:
        ks = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        raise OlavError(f"{spec!r} is not a list of k values", hint="e.g. -k 1,5,10") from None
    if not ks or ks[0] < 1 or ks[-1] > 100:
        raise OlavError(f"k values must be within 1 and 100, got {spec!r}", hint="e.g. -k 1,5,10")
    return ks


def load_locomo(path: Path, convs: Sequence[int] | None = None) -> list[Conversation]:
    """Read a LoCoMo JSON file (a list of samples with ``conversation`` and ``qa``)."""
    path = Path(path)
    if not path.is_file():
        raise OlavError(
            f"{path} does not exist", hint="Pass the LoCoMo JSON file, e.g. locomo_dev.json"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OlavError(
            f"{path} is not valid JSON: {exc}", hint="Pass a LoCoMo JSON file"
        ) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(
        isinstance(s, dict) and isinstance(s.get("conversation"), dict) for s in data
    ):
        raise OlavError(
            f"{path} is not in the LoCoMo format",
            hint="Expected a list of samples with 'conversation' and 'qa' keys",
        )
    chosen = range(len(data)) if convs is None else convs
    missing = [i for i in chosen if i >= len(data)]
    if missing:
        raise OlavError(
            f"{path} has {len(data)} conversations; there is no conversation {missing[0]}",
            hint=f"Use --convs 0-{len(data) - 1}",
        )
    return [_conversation(data[i], i) for i in chosen]


def _conversation(sample: dict[str, Any], index: int) -> Conversation:
    conv = sample["conversation"]
    sample_id = str(sample.get("sample_id") or f"conv-{index}")
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conv
        if (m := _SESSION.fullmatch(key)) and isinstance(conv[key], list)
    )
    turns: list[DialogTurn] = []
    for num, key in sessions:
        raw_date = str(conv.get(f"{key}_date_time") or "")
        when = parse_session_date(raw_date)
        label = f"{when.day} {when:%B %Y}" if when else raw_date
        for pos, t in enumerate(conv[key]):
            if not isinstance(t, dict) or not t.get("dia_id"):
                continue
            turns.append(
                DialogTurn(
                    dia_id=str(t["dia_id"]),
                    speaker=str(t.get("speaker") or "?"),
                    text=str(t.get("text") or ""),
                    session=num,
                    position=pos,
                    when=when,
                    date_label=label,
                    caption=(str(t["blip_caption"]) if t.get("blip_caption") else None),
                )
            )
    ids = {t.dia_id for t in turns}
    out = Conversation(sample_id, turns, [])
    for qa in sample.get("qa") or []:
        category = int(qa.get("category") or 0)
        if category == EXCLUDED_CATEGORY:
            out.excluded += 1
            continue
        raw = qa.get("evidence") or []
        if isinstance(raw, str):
            raw = [raw]
        evidence: list[str] = []
        for item in raw:
            for tok in _EVIDENCE_SPLIT.split(str(item)):
                if not tok:
                    continue
                if tok in ids:
                    if tok not in evidence:
                        evidence.append(tok)
                else:
                    out.dropped_ids.append(tok)
        if not evidence:
            out.no_evidence += 1
            continue
        out.questions.append(Question(str(qa.get("question") or ""), tuple(evidence), category))
    return out


# -- representations of a turn -----------------------------------------------------------------


def render_turn(t: DialogTurn, *, date: bool = False) -> str:
    """``Speaker: text``, optionally after the session date: ``[8 May 2023] Speaker: text``."""
    text = f"{t.speaker}: {t.text}"
    return f"[{t.date_label}] {text}" if date else text


def window_texts(conv: Conversation, before: int, after: int, *, date: bool = False) -> list[str]:
    """Each turn with its neighbours in the same session (the turn itself stays in the middle)."""
    out: list[str] = []
    turns = conv.turns
    for i, t in enumerate(turns):
        lo, hi = i, i
        while lo > 0 and i - lo < before and turns[lo - 1].session == t.session:
            lo -= 1
        while hi + 1 < len(turns) and hi - i < after and turns[hi + 1].session == t.session:
            hi += 1
        body = "\n".join(render_turn(x) for x in turns[lo : hi + 1])
        out.append(f"[{t.date_label}]\n{body}" if date else body)
    return out


REPRESENTATIONS: dict[str, Callable[[Conversation], list[str]]] = {
    "turn": lambda c: [render_turn(t) for t in c.turns],
    "turn+date": lambda c: [render_turn(t, date=True) for t in c.turns],
    "win1": lambda c: window_texts(c, 1, 1),
    "win2": lambda c: window_texts(c, 2, 2),
    "win2+date": lambda c: window_texts(c, 2, 2, date=True),
}


def time_filter(question: str) -> str | None:
    """The period a question names (olav's own parser, olav.memory.store.timeq) as a pre-filter on
    ``created_at``, which holds the session date here; None when it names none."""
    from olav.memory.store.timeq import query_period

    period = query_period(question)
    return period.sql("created_at") if period else None
