"""Schemathesis against the retrieval server's own OpenAPI: no 5xx, no undocumented status, no schema violation.

Bounded in examples and time so it runs in CI; the sandbox's twin is ``tests/sandbox/test_openapi_fuzz.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from aethersearch.search.index_dir import OpenedIndex
from aethersearch.search.server import create_app

#: what the issue asks of the API description: no 5xx, every status documented, every body as described
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection, positive_data_acceptance]


def fuzz(app: Any, *, examples: int = 25, path: dict[str, str] | None = None) -> list[str]:
    """Run schemathesis on every operation of ``app``'s own OpenAPI, schema-valid and schema-invalid data.

    Driven through hypothesis directly (``as_strategy``) rather than schemathesis's pytest
    plugin, which does not load under this pytest. ``path`` fixes path parameters (an open
    episode's id: a random one is a 404 before the body is read, so the body's rules would go
    untested). Checks: no 5xx, documented statuses, content types and bodies, schema-invalid data
    refused (``negative_data_rejection``) and schema-valid data accepted
    (``positive_data_acceptance``: a 400/422 to it means an undeclared limit). Returns the
    operations tested.
    """
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    tested = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def check(case: Any) -> None:
                if path and case.path_parameters:
                    case.path_parameters.update({k: v for k, v in path.items() if k in case.path_parameters})
                case.call_and_validate(checks=CHECKS)

            try:
                check()
            except Unsatisfiable:  # nothing to make invalid (GET /health takes no input)
                assert mode is GenerationMode.NEGATIVE, operation.label
        tested.append(operation.label)
    return tested


@pytest.mark.timeout(300)
def test_retrieval_server_keeps_its_openapi(demo_index: OpenedIndex) -> None:
    demo_index.index.warm_up()  # type: ignore[attr-defined]  # numba's compile, as `aether serve` does first
    tested = fuzz(create_app(demo_index.index, demo_index.store))
    assert sorted(tested) == ["GET /health", "POST /access", "POST /retrieve"]


def test_the_description_lists_every_route_with_its_body_and_refusals(demo_index: OpenedIndex) -> None:
    from fastapi.testclient import TestClient

    spec = TestClient(create_app(demo_index.index, demo_index.store)).get("/openapi.json").json()
    assert set(spec["paths"]) == {"/retrieve", "/access", "/health"}
    retrieve = spec["paths"]["/retrieve"]["post"]
    body = retrieve["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["topk"]["anyOf"][0]["type"] == "integer"
    assert {"200", "413", "422"} <= set(retrieve["responses"])


def test_every_limit_is_declared(demo_index: OpenedIndex) -> None:
    """Issue 49: the description states the server's own limits and modes (not just the types)."""
    from fastapi.testclient import TestClient

    from aethersearch.search.server import ServerLimits

    limits = ServerLimits(max_topk=7, max_batch=11, max_query_chars=13, max_urls=5)
    client = TestClient(create_app(demo_index.index, demo_index.store, limits))
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/retrieve"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert body["queries"]["maxItems"] == 11 and body["queries"]["items"]["maxLength"] == 13
    assert body["topk"]["anyOf"][0] == {"type": "integer", "minimum": 0, "maximum": 7}
    assert body["mode"]["anyOf"][0] == {"const": "sparse", "type": "string"}  # a BM25 index offers sparse only
    access = spec["paths"]["/access"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert access["properties"]["urls"]["maxItems"] == 5
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404


def test_a_whole_json_number_is_an_integer(demo_index: OpenedIndex) -> None:
    """JSON Schema's integer includes 2.0 (schemathesis sends it); true, "2" and 2.5 stay refused."""
    from fastapi.testclient import TestClient

    client = TestClient(create_app(demo_index.index, demo_index.store))
    ok = client.post("/retrieve", json={"queries": ["Morulistan"], "topk": 2.0})
    assert ok.status_code == 200 and len(ok.json()["result"][0]) == 2
    for bad in (True, "2", 2.5):
        assert client.post("/retrieve", json={"queries": ["Morulistan"], "topk": bad}).status_code == 422, bad
