"""Defer the part of lancedb's import that a local (or S3) memory table never uses.

``import lancedb`` imports ``lance_namespace``, which imports the whole REST client of Lance
namespaces (``lance_namespace_urllib3_client``): some 370 API methods, each wrapped by
pydantic's ``validate_call`` at import. That was 1.0 of lancedb's 1.5 s import, and the
better part of a cold ``olav memory search``. ``lance_namespace`` itself only needs the
client's request and response models, which live in a subpackage.

:func:`defer_namespace_client` registers the client package without running its
``__init__``: its subpackages import as usual from its folder, and the first time anything
asks the package itself for a name (a REST namespace connection does), its ``__init__``
runs and the name is answered. Nothing is patched inside the package.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any

NAMESPACE_CLIENT = "lance_namespace_urllib3_client"
_LOCK = threading.Lock()


def defer_namespace_client() -> bool:
    """Register the deferred client package; True when this call registered it."""
    with _LOCK:
        if NAMESPACE_CLIENT in sys.modules:
            return False
        spec = importlib.util.find_spec(NAMESPACE_CLIENT)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return False
        module = importlib.util.module_from_spec(spec)
        loader = spec.loader

        def load_on_demand(name: str) -> Any:
            if name.startswith("__"):  # probes for dunders (copy, inspect) load nothing
                raise AttributeError(name)
            with _LOCK:
                if module.__dict__.pop("__getattr__", None) is not None:
                    loader.exec_module(module)
            return getattr(module, name)

        module.__getattr__ = load_on_demand  # type: ignore[method-assign]
        sys.modules[NAMESPACE_CLIENT] = module
        return True
