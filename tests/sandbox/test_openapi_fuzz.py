"""Schemathesis against the sandbox's own OpenAPI: no 5xx, no undocumented status, no schema violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.sandbox.episode import Sandbox
from aethersearch.sandbox.server import create_app
from tests.search.test_openapi_fuzz import fuzz


@pytest.mark.timeout(400)
def test_sandbox_keeps_its_openapi(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    tested = fuzz(create_app(mini_sandbox, action_log=tmp_path / "actions.jsonl"))
    assert len(tested) == 6 and "POST /episodes/{episode_id}/search" in tested
