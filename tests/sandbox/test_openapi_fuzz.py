"""Schemathesis against the sandbox's own OpenAPI: no 5xx, no undocumented status, no schema violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.sandbox.episode import Sandbox
from aethersearch.sandbox.server import create_app
from tests.search.test_openapi_fuzz import fuzz


@pytest.mark.timeout(400)
def test_sandbox_keeps_its_openapi(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    app = create_app(mini_sandbox, action_log=tmp_path / "actions.jsonl")
    with TestClient(app) as client:  # one open episode, so search and visit bodies reach their checks
        episode = client.post("/episodes", json={"question_id": "q1"}).json()["episode_id"]
        tested = fuzz(app, path={"episode_id": episode})
    assert len(tested) == 6 and "POST /episodes/{episode_id}/search" in tested


def test_the_description_is_as_strict_as_the_sandbox(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    """Issue 49: seq is never declared nullable, an empty query or page is declared invalid, no /docs."""
    import re

    from fastapi.testclient import TestClient

    from aethersearch.errors import ToolError
    from aethersearch.sandbox.tools import MAX_QUERY_CHARS, validate_page_name

    client = TestClient(create_app(mini_sandbox, action_log=tmp_path / "actions.jsonl"))
    paths = client.get("/openapi.json").json()["paths"]
    search = paths["/episodes/{episode_id}/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    visit = paths["/episodes/{episode_id}/visit"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    for body in (search, visit):
        assert body["properties"]["seq"] == {**body["properties"]["seq"], "type": "integer", "minimum": 0}
        assert "anyOf" not in body["properties"]["seq"] and "default" not in body["properties"]["seq"]
    query = search["properties"]["query"]
    assert query["minLength"] == 1 and query["maxLength"] == MAX_QUERY_CHARS and query["pattern"] == r"\S"
    pattern = re.compile(visit["properties"]["page"]["pattern"])
    for name in ("Kane Cornes", "a.b", "Graham Cornes.", "AC DC", "Zürich", "x" * 256):
        assert pattern.search(name), name
        validate_page_name(name)
    for name in ("a..b", ".hidden", "x/y", "x\\y", "a\u00adb", "a\u200bb", "tab\there", " "):
        assert not pattern.search(name), name
        with pytest.raises(ToolError):
            validate_page_name(name)
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404


def test_seq_as_a_whole_json_number(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    """``"seq": 0.0`` is the integer 0 (JSON Schema's rule), never a 422; ``"seq": null`` is refused."""
    from fastapi.testclient import TestClient

    client = TestClient(create_app(mini_sandbox, action_log=tmp_path / "actions.jsonl"))
    eid = client.post("/episodes", json={"question_id": "q1"}).json()["episode_id"]
    assert client.post(f"/episodes/{eid}/search", json={"query": "Kane", "seq": 0.0, "k": 2.0}).status_code == 200
    assert client.post(f"/episodes/{eid}/search", json={"query": "Kane", "seq": None}).status_code == 422
