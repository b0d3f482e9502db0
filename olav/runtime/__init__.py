"""The headless agent engine: skills, tools, middleware, the graph builder and the Session,
whose Hooks and extra tools come from its composer (olav.compose adds learning). No terminal
code (the chat REPL lives in olav.cli), and nothing from olav.learning."""
