"""The request models (olav/serve/schema.py): a body is read or refused with one line that
names the field, for every model and any JSON a client could send."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from olav.serve import schema
from olav.serve.http import HTTPError
from olav.serve.openai_schema import ChatRequest
from olav.serve.openapi import operations

MODELS = sorted({op.body for op in operations() if op.body is not None}, key=lambda m: m.__name__)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


def _body(model: type[BaseModel]) -> Any:
    """A body with the model's own field names (so the fields are reached), any values."""
    names = st.sampled_from(sorted(model.model_fields))
    return st.dictionaries(names | st.text(max_size=6), JSON, max_size=6)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(data=st.data())
def test_any_body_is_read_or_refused_in_one_line_naming_its_field(
    model: type[BaseModel], data: st.DataObject
) -> None:
    body = data.draw(_body(model))
    try:
        schema.read(model, body)
    except HTTPError as exc:
        assert exc.status == 422
        assert "\n" not in exc.detail and 0 < len(exc.detail) < 400, exc.detail
        named = exc.detail.split(" ")[0].split(":")[0].split(".")[0].split("[")[0]
        assert named in model.model_fields or exc.detail.startswith("a label of"), exc.detail
        assert "Input should" not in exc.detail and "pydantic" not in exc.detail


@pytest.mark.parametrize(
    ("model", "body", "says"),
    [
        (schema.ThreadSearch, {"limit": "x"}, "limit must be an integer from 1 to 1000"),
        (schema.ThreadSearch, {"sort_by": "colour"}, "sort_by 'colour' is not 'thread_id'"),
        (schema.ThreadSearch, {"select": ["secrets"]}, "select[0] 'secrets' is not"),
        (schema.ThreadCreate, {"thread_id": 7}, "thread_id must be a non-empty string"),
        (schema.ThreadCreate, {"metadata": {"a": {"b": {"c": {"d": {}}}}}}, "nests deeper"),
        (schema.RunCreate, {}, "assistant_id is required"),
        (schema.RunCreate, {"assistant_id": "a", "checkpoint": "x"}, "checkpoint 'x' is not an"),
        (schema.RunCreate, {"assistant_id": "a", "stream_mode": "x"}, "stream_mode 'x' is not"),
        (schema.StorePut, {"namespace": [], "key": "k", "value": {"text": "t"}}, "namespace"),
        (schema.StoreSearch, {"filter": {"text": "x"}}, "filter on 'text' is not supported"),
        (
            ChatRequest,
            {"model": "m", "messages": []},
            "messages must have at least 1",
        ),
        (
            ChatRequest,
            {"model": "m", "messages": [{"role": "x"}]},
            "messages[0].role",
        ),
        (
            ChatRequest,
            {"model": "m", "messages": [{"role": "user"}], "stop": ["s"] * 5},
            "stop has more than 4 items",
        ),
    ],
)
def test_a_refusal_says_what_the_field_takes(
    model: type[BaseModel], body: dict[str, Any], says: str
) -> None:
    with pytest.raises(HTTPError) as refused:
        schema.read(model, body)
    assert says in refused.value.detail, refused.value.detail


def test_null_metadata_and_labels_read_as_none_given() -> None:
    """``"metadata": null`` (and a store search's ``"namespace_prefix": null``) mean none, as
    olav has always read them; a put's namespace must still name one label."""
    assert schema.read(schema.RunCreate, {"assistant_id": "a", "metadata": None}).metadata == {}
    assert schema.read(schema.StoreSearch, {"namespace_prefix": None}).namespace_prefix == []
    with pytest.raises(HTTPError, match="namespace must have at least 1 item"):
        schema.read(schema.StorePut, {"namespace": None, "key": "k", "value": {"text": "t"}})


QUERIES = sorted(
    {op.query for op in operations() if op.query is not None}, key=lambda m: m.__name__
)


@pytest.mark.parametrize("model", QUERIES, ids=lambda m: m.__name__)
@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(data=st.data())
def test_any_query_string_is_read_or_refused_in_one_line(
    model: type[BaseModel], data: st.DataObject
) -> None:
    from starlette.datastructures import QueryParams

    names = st.sampled_from(sorted(model.model_fields)) | st.text(max_size=6)
    values = st.text(max_size=12) | st.integers().map(str) | st.sampled_from(["true", "1", ""])
    pairs = data.draw(st.lists(st.tuples(names, values), max_size=6))
    try:
        schema.read_query(model, QueryParams(pairs))
    except HTTPError as exc:
        assert exc.status == 422 and "\n" not in exc.detail, exc.detail
        named = exc.detail.split(" ")[0].split(":")[0].split("[")[0]
        assert named in model.model_fields, exc.detail
