"""The memory table: schema, connection, writes and locks, search and its caches, scopes."""
