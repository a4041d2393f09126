"""Schemathesis against the retrieval server's own OpenAPI: no 5xx, no undocumented status, no schema violation.

Bounded in examples and time so it runs in CI; the sandbox's twin is ``tests/sandbox/test_openapi_fuzz.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from aethersearch.search.index_dir import OpenedIndex
from aethersearch.search.server import create_app

#: what the issue asks of the API description: no 5xx, every status documented, every body as described
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]


def fuzz(app: Any, *, examples: int = 25) -> list[str]:
    """Run schemathesis on every operation of ``app``'s own OpenAPI, schema-valid and schema-invalid data.

    Driven through hypothesis directly (``as_strategy``) rather than schemathesis's pytest
    plugin, which does not load under this pytest. Returns the operations tested.
    """
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    tested = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def check(case: Any) -> None:
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
