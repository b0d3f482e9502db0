"""``olav serve``: one runtime for every HTTP client, through the LangGraph Agent Protocol
subset and an OpenAI-compatible endpoint, with a token for every operator (:mod:`.tokens`).
Nothing here touches a terminal; the command itself lives in ``olav.cli.serve``."""
