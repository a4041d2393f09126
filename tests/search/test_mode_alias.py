"""``aether serve --mode-alias``: a declared answer to a retrieval mode the index lacks, or a 400 naming the flag."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from aethersearch.errors import ConfigError
from aethersearch.search.modes import parse_mode_aliases
from aethersearch.search.server import create_app
from tests.search.field_clients import aethersearch_retrieve
from tests.search.test_field_clients import serving


def _post(app: Any, body: dict[str, Any]) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            return await client.post("/retrieve", json=body)
    return asyncio.run(go())


def _health(app: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            return dict((await client.get("/health")).json())
    return asyncio.run(go())


def test_their_client_works_unmodified_against_a_bm25_server_with_the_alias(demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    queries = [fact.question for fact in demo_world.facts[:20]]
    app = create_app(demo_index.index, demo_index.store, mode_aliases=parse_mode_aliases(["hybrid=bm25"]))
    with serving(app) as url:
        got = asyncio.run(aethersearch_retrieve(url, queries, topk=3))
    expected = demo_index.index.search(queries, 3)
    assert [[hit["id"] for hit in hits] for hits in got] == [[doc for doc, _ in hits] for hits in expected]
    assert all(hit["score"] is not None and hit["contents"] for hits in got for hit in hits)
    assert _health(app)["mode_aliases"] == {"hybrid": "bm25"}


def test_without_the_alias_their_mode_is_a_400_naming_the_flag(demo_index) -> None:  # type: ignore[no-untyped-def]
    app = create_app(demo_index.index, demo_index.store)
    reply = _post(app, {"queries": ["x"], "topk": 3, "return_scores": True, "mode": "hybrid"})
    assert reply.status_code == 400
    assert "--mode-alias hybrid=bm25" in reply.json()["detail"]
    assert _health(app)["mode_aliases"] == {}
    with serving(app) as url, pytest.raises(RuntimeError, match="HTTP 400"):
        asyncio.run(aethersearch_retrieve(url, ["x"]))


def test_an_alias_to_nothing_served_or_over_a_served_mode_is_refused(demo_index) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="does not serve 'dense'"):
        create_app(demo_index.index, demo_index.store, mode_aliases={"hybrid": "dense"})
    with pytest.raises(ConfigError, match="serves 'sparse' itself"):
        create_app(demo_index.index, demo_index.store, mode_aliases={"sparse": "bm25"})
    for bad in (["hybrid"], ["semantic=bm25"], ["hybrid=bm25", "hybrid=sparse"]):
        with pytest.raises(ConfigError):
            parse_mode_aliases(bad)


def test_serve_refuses_a_bad_alias_before_serving(demo_index_dir) -> None:  # type: ignore[no-untyped-def]
    from aethersearch.cli import app

    result = CliRunner().invoke(app, ["serve", str(demo_index_dir), "--port", "1", "--mode-alias", "hybrid"])
    assert result.exit_code != 0 and "MODE=TARGET" in str(result.exception)


def test_a_run_records_the_servers_aliases_in_its_fingerprint(demo_index, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from aethersearch import pipeline
    from aethersearch.rollout.fingerprint import ReleaseInfo
    from aethersearch.rollout.session import RunSettings, prepare_run
    from aethersearch.search.client import SearchClient

    app = create_app(demo_index.index, demo_index.store, mode_aliases={"hybrid": "bm25"})
    served = _health(app)

    async def health(self: SearchClient) -> dict[str, Any]:
        return served

    monkeypatch.setattr(SearchClient, "health", health)
    info = ReleaseInfo("r", "0" * 64, Path(tmp_path / "rollout.jsonl"), "0" * 64)
    prepared = prepare_run(info, RunSettings(agent="lexical"), pipeline.server_search("http://t"), questions=[])
    assert prepared.fingerprint.retrieval_mode_aliases == {"hybrid": "bm25"}
    assert prepared.fingerprint.index_hash == demo_index.index.index_hash
