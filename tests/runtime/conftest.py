from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from olav.core.config import Workspace
from olav.llm.models import ScriptedChatModel
from olav.runtime.runner import Session


def scripted_ws(root: Path, turns: list[dict[str, Any]]) -> Workspace:
    (root / "script.yaml").write_text(yaml.safe_dump(turns, allow_unicode=True))
    cfg = root / ".olav" / "olav.yaml"
    data = yaml.safe_load(cfg.read_text()) or {}
    data.setdefault("llm", {}).update({"provider": "scripted", "script": "script.yaml"})
    cfg.write_text(yaml.safe_dump(data))
    return Workspace.open(root)


@pytest.fixture
def session_for(hash_ws: Path):  # type: ignore[no-untyped-def]
    """session_for(turns, **kw) -> (Session, ScriptedChatModel) over the hash workspace.
    Background trace learning is off unless a test asks for it (learn_from_failures=True)."""

    def make(turns: list[dict[str, Any]], **kw: Any) -> tuple[Session, ScriptedChatModel]:
        kw.setdefault("learn_from_failures", False)
        ws = scripted_ws(hash_ws, turns)
        model = ScriptedChatModel(turns=turns)
        return Session(ws, model=model, **kw), model

    return make
