"""The async client: retries transient errors with backoff, fails fast on others, honours its deadline."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from aethersearch.errors import EndpointError
from aethersearch.search.client import SearchClient
from aethersearch.search.environment import IndexEnvironment, RetrievalServerEnvironment

OK = {"result": [[{"document": {"id": "p1", "contents": '"Page One"\nSome text'}, "score": 1.5}]]}


def _client(handler, **kwargs) -> SearchClient:  # type: ignore[no-untyped-def]
    return SearchClient("http://search", transport=httpx.MockTransport(handler), backoff_s=0.001, seed=1, **kwargs)


@pytest.mark.parametrize("failure", [429, 500, 503, "connect", "timeout"])
def test_transient_errors_are_retried(failure) -> None:  # type: ignore[no-untyped-def]
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) < 3:
            if failure == "connect":
                raise httpx.ConnectError("refused", request=request)
            if failure == "timeout":
                raise httpx.ReadTimeout("slow", request=request)
            return httpx.Response(failure, json={"detail": "busy"})
        return httpx.Response(200, json=OK)

    async def main():  # type: ignore[no-untyped-def]
        async with _client(handler) as client:
            return await client.retrieve(["q"], 3), client.retries

    hits, retries = asyncio.run(main())
    assert len(calls) == 3 and retries == 2
    assert hits[0][0].document.title == "Page One" and hits[0][0].document.text == "Some text"
    assert hits[0][0].score == 1.5


def test_non_transient_error_is_not_retried_and_carries_the_message() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(422, json={"detail": "topk 500 exceeds the limit of 100"})

    async def main() -> None:
        async with _client(handler) as client:
            await client.retrieve(["q"], 500)

    with pytest.raises(EndpointError, match="limit of 100") as info:
        asyncio.run(main())
    assert len(calls) == 1 and info.value.status == 422 and not info.value.transient


def test_retry_cap_and_deadline() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(503, json={"detail": "down"})

    async def main(**kwargs) -> None:  # type: ignore[no-untyped-def]
        async with _client(handler, **kwargs) as client:
            await client.retrieve(["q"])

    with pytest.raises(EndpointError, match="after 3 attempt") as info:
        asyncio.run(main(max_retries=2))
    assert info.value.transient and len(calls) == 3
    calls.clear()
    with pytest.raises(EndpointError, match="failed after"):
        asyncio.run(main(max_retries=1000, deadline_s=0.0))
    assert len(calls) == 1


def test_server_environment_records_errors_as_tool_errors() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"detail": "query 0 has 9999 characters"})

    async def main():  # type: ignore[no-untyped-def]
        env = RetrievalServerEnvironment(_client(handler), close_client=True)
        result = await env.search("x" * 9999, 3)
        refused = await env.visit("p1")
        await env.close()
        return env.tools, result, refused

    tools, result, refused = asyncio.run(main())
    assert tools == ("search",)
    assert result.documents == [] and "9999 characters" in (result.call.error or "")
    assert result.call.tool == "search" and result.call.arguments == {"query": "x" * 9999, "k": 3}
    assert "only search" in (refused.call.error or "")


def test_index_environment_search_and_visit(demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    fact = demo_world.facts[0]

    async def main():  # type: ignore[no-untyped-def]
        env = IndexEnvironment(demo_index.index, demo_index.store, tools=("search", "visit"))
        return await env.search(fact.question, 3), await env.visit(fact.subject_id), await env.visit("nope")

    found, page, missing = asyncio.run(main())
    assert fact.subject_id in found.call.returned_ids
    assert [d.id for d in found.documents] == found.call.returned_ids
    assert found.call.elapsed_s >= 0 and found.call.error is None
    assert page.documents[0].id == fact.subject_id and fact.answers[0] in page.documents[0].text
    assert missing.documents == [] and missing.call.error
