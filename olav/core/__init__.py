"""The base layer: errors, settings, configuration and the Workspace, logs, redaction and
file helpers. Imports nothing else from olav."""
