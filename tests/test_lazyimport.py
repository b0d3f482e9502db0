"""lancedb's REST namespace client is deferred (olav.core.lazyimport) and still works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from pathlib import Path
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore

store = MemoryStore(Path(sys.argv[1]), HashEmbedder("hash-64"))
store.upsert([MemoryRecord(id="m1", text="backup the router", category="fact",
                           scope="global", origin="user")])
hits = store.search("router backup", filter=SearchFilter(reader=EVERYONE))
assert [h.record.id for h in hits] == ["m1"]
print("api loaded:", any(m.startswith("lance_namespace_urllib3_client.api") for m in sys.modules))
from lance_namespace_urllib3_client import ApiClient, TableApi
print("on demand:", ApiClient.__name__, TableApi.__name__)
"""


def test_the_namespace_client_loads_only_when_asked_for(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "memory.lance")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "api loaded: False" in out
    assert "on demand: ApiClient TableApi" in out
