"""Chat models: the factory behind every provider (Ollama, OpenAI-compatible, scripted),
model tiers, error translation and parsing of JSON answers. Imports only olav.core."""
