"""The sandbox HTTP API through httpx.ASGITransport: episodes, masking, validation, isolation, traces."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from aethersearch.environment import Environment
from aethersearch.errors import EndpointError
from aethersearch.sandbox.client import HttpSandboxEpisode, SandboxClient
from aethersearch.sandbox.environment import HttpSandboxFactory, InProcessSandboxFactory
from aethersearch.sandbox.server import create_app
from tests.serving import serving_app


def _run(coro):
    return asyncio.run(coro)


def test_http_episode_lifecycle_masking_and_trace(mini_sandbox) -> None:
    async def scenario() -> None:
        app = create_app(mini_sandbox)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as http:
            created = (await http.post("/episodes", json={"question_id": "q1", "run_id": "r1"})).json()
            eid = created["episode_id"]
            assert created["tools"] == ["search", "visit"]
            hit = (await http.post(f"/episodes/{eid}/search", json={"query": "Graham Cornes", "k": 3})).json()
            assert "graham" not in hit["call"]["returned_ids"] and "suppressed_ids" not in hit["call"]
            assert all("Graham" not in d["text"] for d in hit["documents"])

            locked = await http.post(f"/episodes/{eid}/visit", json={"page": "chad"})
            missing = await http.post(f"/episodes/{eid}/visit", json={"page": "no_such_page"})
            assert locked.status_code == missing.status_code == 404
            assert "no page named 'chad'" in locked.json()["detail"]  # same wording as a missing page
            assert "suppressed_ids" not in locked.json()["call"]
            assert app.state.episodes[eid].trace[-2].suppressed_ids == ["chad"]  # kept server-side

            for bad in ("../graham", "a/b", "..", "x\\y", "bad\u0000name"):
                response = await http.post(f"/episodes/{eid}/visit", json={"page": bad})
                assert response.status_code == 422, bad
            assert (await http.post(f"/episodes/{eid}/visit", json={"page": "x" * 300})).status_code == 422

            kane = (await http.post(f"/episodes/{eid}/visit", json={"page": "Kane Cornes"})).json()
            assert kane["documents"][0]["id"] == "kane" and "graham" not in kane["documents"][0]["links"]
            assert (await http.post(f"/episodes/{eid}/visit", json={"page": "chad"})).status_code == 200

            trace = (await http.get(f"/episodes/{eid}/trace")).json()["trace"]
            assert [c["tool"] for c in trace] == ["search"] + ["visit"] * 10  # refusals are traced too
            closed = (await http.post(f"/episodes/{eid}/close")).json()
            assert len(closed["trace"]) == 11
            after = await http.post(f"/episodes/{eid}/search", json={"query": "Kane", "k": 2})
            assert after.status_code == 409 and "closed" in after.json()["detail"]

    _run(scenario())


def test_http_episodes_are_isolated_and_unique_per_run_and_question(mini_sandbox) -> None:
    async def scenario() -> None:
        app = create_app(mini_sandbox)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as http:
            created = (await http.post("/episodes", json={"question_id": "q1", "run_id": "A"})).json()
            a, owner = created["episode_id"], created["owner"]
            b = (await http.post("/episodes", json={"question_id": "q1", "run_id": "B"})).json()["episode_id"]
            again = await http.post("/episodes", json={"question_id": "q1", "run_id": "A"})
            assert again.status_code == 409 and a in again.json()["detail"]
            assert (await http.post("/episodes", json={"question_id": "nope"})).status_code == 404
            assert (await http.post("/episodes/deadbeef/search", json={"query": "x"})).status_code == 404
            await http.post(f"/episodes/{a}/visit", json={"page": "kane"})
            assert (await http.post(f"/episodes/{a}/visit", json={"page": "chad"})).status_code == 200
            assert (await http.post(f"/episodes/{b}/visit", json={"page": "chad"})).status_code == 404  # no leak
            replaced = await http.post("/episodes", json={"question_id": "q1", "run_id": "A", "replace": True,
                                                          "owner": owner})
            fresh = replaced.json()["episode_id"]
            assert fresh != a and (await http.post(f"/episodes/{fresh}/visit", json={"page": "chad"})).status_code == 404
            assert (await http.get("/health")).json()["open_episodes"] == 2
            assert (await http.post(f"/episodes/{a}/search", json={"query": "", "k": 2})).status_code == 409  # closed
            assert (await http.post(f"/episodes/{fresh}/search", json={"query": "", "k": 2})).status_code == 422
            assert (await http.post(f"/episodes/{b}/search", json={"query": "x", "k": 999})).status_code == 422

    _run(scenario())


def test_http_client_environment_matches_in_process(mini_sandbox) -> None:
    async def scenario(url: str) -> None:
        client = SandboxClient(url)
        remote = await HttpSandboxFactory(client).open("q1", run_id="x")
        local = await InProcessSandboxFactory(mini_sandbox).open("q1", run_id="x")
        assert isinstance(remote, HttpSandboxEpisode) and isinstance(remote, Environment)
        for action, arg in [("search", "Graham Cornes"), ("visit", "chad"), ("visit", "kane"), ("visit", "chad"),
                            ("search", "Nicole Cornes husband"), ("visit", "../x")]:
            if action == "search":
                r, lo = await remote.search(arg, 3), await local.search(arg, 3)
            else:
                r, lo = await remote.visit(arg), await local.visit(arg)
            assert [d.model_dump() for d in r.documents] == [d.model_dump() for d in lo.documents]
            assert (r.call.returned_ids, r.call.suppressed_ids, bool(r.call.error)) == (
                lo.call.returned_ids, lo.call.suppressed_ids, bool(lo.call.error))
        assert len(await remote.trace()) == 6
        await remote.close()
        await local.close()
        await client.aclose()

    with serving_app(create_app(mini_sandbox)) as url:
        _run(scenario(url))


def test_http_refusals_are_logged_in_the_trace_like_in_process(mini_sandbox) -> None:
    """An invalid search or visit sent over HTTP is charged and traced exactly as in-process."""
    async def scenario(url: str) -> None:
        client = SandboxClient(url)
        remote = await HttpSandboxFactory(client).open("q1", run_id="refusals")
        local = await InProcessSandboxFactory(mini_sandbox).open("q1", run_id="refusals")
        calls = [("search", ("", 3)), ("search", ("Kane", 999)), ("search", ("Kane", 0)),
                 ("search", ("q" * 600, 3)), ("visit", ("x" * 300,)), ("visit", ("",)), ("visit", ("kane",))]
        for tool, args in calls:
            r, lo = await getattr(remote, tool)(*args), await getattr(local, tool)(*args)
            assert bool(r.call.error) == bool(lo.call.error) and r.call.error == lo.call.error, (tool, args)
        remote_trace, local_trace = await remote.trace(), local.trace
        assert len(remote_trace) == len(local_trace) == len(calls)
        assert [c.error is not None for c in remote_trace] == [True] * 6 + [False]
        assert remote_trace[1].arguments == {"query": "Kane", "k": 999}
        await client.aclose()

    with serving_app(create_app(mini_sandbox)) as url:
        _run(scenario(url))


def test_closed_and_unknown_episodes_answer_clearly(mini_sandbox) -> None:
    async def scenario() -> None:
        app = create_app(mini_sandbox)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            await http.post(f"/episodes/{eid}/close")
            for page in ("kane", "../etc/passwd"):  # a closed episode is a 409 whatever the argument
                response = await http.post(f"/episodes/{eid}/visit", json={"page": page})
                assert response.status_code == 409 and "closed" in response.json()["detail"], page
        with serving_app(app) as url:
            client = SandboxClient(url)
            gone = HttpSandboxEpisode(client, "deadbeef", "q1", ("search", "visit"))
            with pytest.raises(EndpointError, match="deadbeef"):
                await gone.trace()
            await client.aclose()

    _run(scenario())
