"""The memory library: one LanceDB table of directives, precedents, patterns and lessons.

Its parts, from the bottom up (each imports only those below it, ``.importlinter``):

- ``store``: the table and its schema, the connection (local or object storage), writes and
  their locks, hybrid search and its caches, scopes and filters.
- ``policy`` and ``decisions``: every decision's parameters in one ``MemoryPolicy``, and the
  control plane's log of what it decided.
- ``lifecycle``: decay, pinning, expiry and gc, conflicts between rows, capacity and the archive.
- ``ingest`` and ``recall``, side by side: what comes in (guides, documents, chats, capture,
  transfer) and what goes out to the model (selection, the relevance decision, calibration, the
  second opinion and look, the block, episodes, lessons).

Imports only olav.core.
"""
