"""The reflector: a daily review of error signatures, in two lanes.

- KB lane: ``record_reflection`` (writes a reflection directly: global, 30-day TTL,
  deduplicated) and ``propose_guide_draft`` (a draft in ``.curator_drafts/`` that only a human
  can commit).
- Code lane: ``draft_code_fix`` writes a proposal to ``exports/reflections/``. It never edits
  source, never runs git, never applies anything.

Both kinds of draft wait, without expiring, until a person decides with ``olav kb drafts``
(see :mod:`olav.learning.drafts`); the chat's banner says when some are waiting.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

REQUEST = (
    "Review the error signatures of the last {days} days. Call scan_error_signatures first. "
    "Then triage every signature: a behaviour lesson -> record_reflection (one line); a missing "
    "convention -> propose_guide_draft; a bug in code or configuration -> draft_code_fix. "
    "Finish with a short summary of what you did per signature."
)


def write_code_fix(
    root: Path, exports: Path, *, title: str, root_cause: str, suggested_fix: str, patch: str = ""
) -> Path:
    from olav.core.fsutil import atomic_write_text

    slug = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:60] or "fix"
    folder = exports / "reflections"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    path = folder / f"{stamp}_{slug}.md"
    n = 1
    while path.exists():  # two proposals with one title in one second: keep both
        n += 1
        path = folder / f"{stamp}_{slug}_{n}.md"
    body = [
        f"# Fix proposal: {title}",
        "",
        f"Written by the reflector, {stamp} UTC. Nothing was applied; review it and decide "
        f"with `olav kb drafts confirm {path.stem}` or `olav kb drafts reject {path.stem}`.",
        "",
        "## Root cause",
        root_cause.strip(),
        "",
        "## Suggested fix",
        suggested_fix.strip(),
    ]
    if patch.strip():
        body += ["", "## Patch (not applied)", "```diff", patch.strip(), "```"]
    atomic_write_text(path, "\n".join(body) + "\n")
    return path
