"""The command line: typer commands, the chat REPL and rendering. Nothing imports it."""
