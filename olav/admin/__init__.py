"""Workspace creation (olav init) and health checks (olav doctor): they compose the
configuration, the audit database and memory."""
