"""Benchmarks of olav's memory: recall quality on public datasets (no LLM needed)."""
