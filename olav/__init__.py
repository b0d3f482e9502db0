"""olav: an agent platform for local small models, steered by a self-improving memory layer."""

__version__ = "0.1.0"
__all__ = ["__version__"]
