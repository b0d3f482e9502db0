"""`olav serve` fuzzed from its own OpenAPI document (GET /openapi.json) by schemathesis: every
operation, with the operator's token, with data that fits its schema, data that breaks it, and
fitting data with hostile values put in (lone surrogates, NULs, 60 000-character strings, 2**63,
"²"), which a schema-driven generator never makes but clients do; the operations of a thread
once more with the ids of a real thread and run (random ids only ever reach the 404). Every
answer must be no 5xx, a status the document lists and a body its schema allows, and none may
take longer than a generous bound (nothing hangs).

Deterministic: hypothesis is derandomized and keeps no database, so the same cases run every
time; the number of examples per operation keeps the file within about a minute of CI."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.serve._inprocess import Here, serving_here
from tests.serve._support import human

pytestmark = pytest.mark.slow

EXAMPLES = {"positive": 10, "negative": 5, "hostile": 10}  # per operation and pass
SLOW_S = 20.0  # no answer takes this long: a run with the stub model takes well under a second
# what clients send that JSON Schema's generators do not: a lone surrogate (a valid JSON
# escape), a NUL, a string past every bound, a digit int() refuses, SQL's and LIKE's specials
TEXT = ("\ud800", "a\x00b", "x" * 60_000, "\u00b2", "%_'\"\\", "../" * 50)
# a URL cannot carry a lone surrogate, and one over 16 KiB is uvicorn's 400 when its head
# arrives in pieces (h11's limit on a request head it has not read whole)
IN_URL = ("a\x00b", "x" * 2000, "\u00b2", "%_'\"\\", "../" * 50)
NUMBERS = (2**63, -(2**63) - 1, 2**31, 10**30, -1)


def _hostile(draw: Any, value: Any, text: tuple[str, ...]) -> Any:
    """``value`` with some of its strings, keys and integers (hypothesis picks which) swapped
    for hostile ones."""
    from hypothesis import strategies as st

    def swap(item: Any, choices: tuple[Any, ...]) -> Any:
        return draw(st.sampled_from(choices)) if draw(st.booleans()) else item

    if isinstance(value, dict):
        return {swap(k, text): _hostile(draw, v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile(draw, v, text) for v in value]
    if isinstance(value, str):
        return swap(value, text)
    if isinstance(value, int) and not isinstance(value, bool):
        return swap(value, NUMBERS)
    return value


def _hostile_request(draw: Any, case: Any, base_url: str, auth: dict[str, str]) -> dict[str, Any]:
    """The request of ``case`` (requests' keywords) with hostile values put in its path, query
    and JSON body. The body is serialised here: schemathesis's own checks of a case cannot
    hash a lone surrogate."""
    import json

    if case.path_parameters:
        case.path_parameters = {
            k: str(_hostile(draw, v, IN_URL)) for k, v in case.path_parameters.items()
        }
    sent = case.as_transport_kwargs(base_url=base_url, headers=auth)
    if sent.get("params"):
        sent["params"] = {k: str(_hostile(draw, v, IN_URL)) for k, v in sent["params"].items()}
    if isinstance(sent.get("json"), dict | list):
        sent["data"] = json.dumps(_hostile(draw, sent.pop("json"), TEXT)).encode()
        sent["headers"] = {**sent["headers"], "Content-Type": "application/json"}
    return sent


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Here]:
    with serving_here(tmp_path_factory.mktemp("fuzz") / "ws", max_body=1 << 20) as h:
        yield h


def _real_ids(here: Here) -> dict[str, str]:
    """A thread of alice's with a finished run, for the operations that name them."""
    with here.http() as http:
        tid = http.post("/threads", json={"metadata": {"graph_id": "core"}}).json()["thread_id"]
        run = http.post(
            f"/threads/{tid}/runs", json={"assistant_id": "core", "input": human("fuzzed")}
        ).json()
        assert http.get(f"/threads/{tid}/runs/{run['run_id']}/join").status_code == 200
    return {"thread_id": tid, "run_id": run["run_id"], "assistant_id": "core"}


def test_no_request_the_document_allows_or_forbids_is_a_5xx_or_off_the_document(
    here: Here,
) -> None:
    import requests
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        response_schema_conformance,
        status_code_conformance,
    )

    auth = {"Authorization": f"Bearer {here.tokens[here.alice]}"}
    schema = schemathesis.openapi.from_url(f"{here.url}/openapi.json", headers=auth)
    checks = [not_a_server_error, status_code_conformance, response_schema_conformance]
    real = _real_ids(here)
    operations = sorted(
        (result.ok() for result in schema.get_all_operations()),
        key=lambda op: (op.method.upper() == "DELETE", op.path, op.method),  # deletes last
    )
    tally: Counter[str] = Counter()
    failures: list[str] = []
    slowest = (0.0, "")

    def fuzz(op: Any, mode: str, ids: dict[str, str] | None) -> None:
        nonlocal slowest
        generation = GenerationMode.NEGATIVE if mode == "negative" else GenerationMode.POSITIVE
        cases = op.as_strategy(generation_mode=generation, path_parameters=ids)
        if mode == "hostile":
            strategy = st.composite(
                lambda draw: (case := draw(cases), _hostile_request(draw, case, here.url, auth))
            )()
        else:
            strategy = cases.map(lambda case: (case, None))

        @settings(
            max_examples=EXAMPLES[mode],
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def one(drawn: tuple[Any, dict[str, Any] | None]) -> None:
            nonlocal slowest
            case, hostile = drawn
            label = f"{op.method.upper()} {op.path} ({mode}{', real ids' if ids else ''})"
            started = time.perf_counter()
            try:
                if hostile is None:
                    response = case.call(
                        base_url=here.url, session=session, headers=auth, timeout=SLOW_S * 3
                    )
                else:
                    response = session.request(**hostile, timeout=SLOW_S * 3)
            except requests.RequestException as exc:  # a reset connection, a timeout
                failures.append(f"{label}: {type(exc).__name__}: {str(exc)[:300]}")
                return
            finally:
                elapsed = time.perf_counter() - started
                slowest = max(slowest, (elapsed, label))
            tally["cases"] += 1
            tally[str(response.status_code)] += 1
            try:
                case.validate_response(response, checks=checks, headers=auth)
            except (Exception, BaseExceptionGroup) as exc:  # schemathesis's FailureGroup
                failures.append(f"{label}: {str(exc)[:1500]}")

        try:
            one()
        except Unsatisfiable:  # nothing of the operation's to break (GET /info has no input)
            assert mode == "negative", op.label
            tally["operations with no negative case"] += 1

    with requests.Session() as session:
        for op in operations:
            names = {p.name for p in op.path_parameters}
            passes = [None, {k: v for k, v in real.items() if k in names}] if names else [None]
            for ids in passes:
                for mode in EXAMPLES:
                    fuzz(op, mode, ids)
    print(f"\nfuzz: {dict(sorted(tally.items()))}; slowest {slowest[0]:.2f} s: {slowest[1]}")
    assert not failures, f"{len(failures)} of {tally['cases']} cases failed:\n" + "\n\n".join(
        failures[:15]
    )
    assert slowest[0] < SLOW_S, f"{slowest[1]} took {slowest[0]:.1f} s"
    assert len(operations) >= 30 and tally["cases"] >= 10 * len(operations), tally
    assert not [code for code in tally if code.startswith("5")], tally
