"""The tools a run called, as the function specs a format writes: from the catalog the
caller builds from the registry (:func:`tool_catalog`; this layer cannot import the engine),
or, for a tool olav no longer has, from the arguments the run used."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from olav.audit.export.runs import Step

TOOL_PARAMETERS = {"type": "object", "properties": {}}


def tool_catalog(specs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{name: {description, parameters}}`` from tool specs with ``description`` and a
    pydantic ``args`` model (olav.runtime.tools.ToolSpec): the JSON schema the model was
    offered (the same conversion as the chat model's bind_tools)."""
    from langchain_core.utils.function_calling import convert_to_openai_function

    out: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        try:
            params = dict(convert_to_openai_function(spec.args)["parameters"])
        except Exception:  # a model langchain cannot convert: pydantic's own schema
            params = dict(spec.args.model_json_schema())
            params.pop("title", None)
        out[name] = {"description": str(spec.description), "parameters": params}
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _function(name: str, calls: list[dict[str, Any]], catalog: Mapping[str, Any]) -> dict[str, Any]:
    """The tool as a function spec: the catalog's, or (a tool olav no longer has) a minimal
    object schema built from the arguments the run used."""
    known = catalog.get(name)
    if known is not None:
        return {
            "name": name,
            "description": known.get("description", ""),
            "parameters": known.get("parameters") or dict(TOOL_PARAMETERS),
        }
    props: dict[str, dict[str, str]] = {}
    for call in calls:
        args = call.get("args")
        if isinstance(args, dict):
            for key, value in args.items():
                props.setdefault(str(key), {"type": _json_type(value)})
    return {"name": name, "description": "", "parameters": {"type": "object", "properties": props}}


def run_tools(steps: list[Step], catalog: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The function specs of every tool the run's assistant called, in order of first use."""
    used: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        for call in step.tool_calls:
            used.setdefault(str(call.get("name") or ""), []).append(call)
    return [_function(name, calls, catalog) for name, calls in used.items() if name]
