"""The headless agent engine: skills, tools, middleware, the graph builder and the Session.
No terminal code: the chat REPL lives in olav.cli."""
