"""A hint-free release is evaluated inside the masked sandbox, from one command, or refused with the fix.

The demo's own hint-free release (``demo_out/sandbox_release``) is run the way a
user runs any release: ``aether eval RELEASE --index DIR`` (in-process sandbox),
``--sandbox-url`` (a running ``aether sandbox serve``), and by an external
harness written against the documented HTTP API only, whose episodes ``aether
import sandbox`` turns into a run that ``score``, ``factorise`` and ``compare``
read. Runs whose tool server failed end in error, never as abstentions.
"""

from __future__ import annotations

import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from aethersearch.demo import run_demo
from tests.serving import free_port, wait_for_json

pytestmark = pytest.mark.slow


def aether(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The real command line (exit codes and messages as a user sees them)."""
    return subprocess.run([sys.executable, "-m", "aethersearch.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sandbox_eval") / "demo_out"
    run_demo(out, sandbox=True)
    return out


@pytest.fixture(scope="module")
def sandbox_url(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`aether sandbox serve` of the demo's hint-free release, with its action log."""
    log = tmp_path_factory.mktemp("sandbox_log") / "actions.jsonl"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "sandbox", "serve",
                             str(demo / "sandbox_release"), "--index", str(demo / "sandbox_index"),
                             "--port", str(port), "--action-log", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        while not wait_for_json(url + "/health", proc).get("ready"):
            pass
        yield url, log
    finally:
        proc.terminate()
        proc.wait(20)


def _json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def test_eval_of_a_hintfree_release_runs_inside_the_sandbox_and_writes_the_papers_outputs(demo: Path,
                                                                                          tmp_path: Path) -> None:
    result = aether("eval", str(demo / "sandbox_release"), "--agent", "lexical-browse", "--index",
                    str(demo / "sandbox_index"), "--out", str(tmp_path / "x"), "--no-progress")
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "x" / "run"
    factorised = _json(run / "factorised.json")
    # the same agent on the same release through the command equals the demo's own sandbox run
    assert factorised["overall"]["pass_at_1"] == _json(demo / "sandbox_run" / "factorised.json")["overall"]["pass_at_1"]
    assert factorised["overall"]["pass_at_1"] >= 0.4  # a browsing baseline that really reads (abstaining: 0)
    assert set(factorised["by_hops"]) == {"2", "3", "4"}
    probes = _json(run / "probes.json")
    assert {"forget", "lead_astray", "distractors"} <= set(probes)
    fingerprint = _json(run / "run.json")
    assert fingerprint["environment"] == "sandbox"
    assert fingerprint["sandbox"] == {"mask_policy": "webdetective-chain-lock/v2", "tools": ["search", "visit"]}
    assert "Knowledge Sufficiency" in result.stdout and "4 hops" in result.stdout and "GenScore" in result.stdout
    html = (tmp_path / "x" / "report.html").read_text(encoding="utf-8")
    assert 'id="decoupling-1"' in html and 'id="per-hop-1"' in html  # Search Score x GenScore; curves by hop
    # `aether view` of the run shows each episode's chain: pages visited, unlocked, still masked
    from fastapi.testclient import TestClient

    from aethersearch.report.viewer.app import create_app, load_viewer

    viewer = load_viewer([run], corpus=demo / "sandbox_corpus")
    client = TestClient(create_app(viewer), raise_server_exceptions=False)
    states = [re.findall(r'class="node state-(\w+)', client.get(f"/q/{row['id']}").text)
              for row in map(orjson.loads, (demo / "sandbox_release" / "rollout_questions.jsonl").read_bytes().splitlines())]
    assert all(states) and {"visited"} <= set().union(*map(set, states)) and any("masked" in s for s in states)


@pytest.mark.parametrize("extra, needle", [
    (["--search-url", "http://127.0.0.1:9"], "--search-url http://127.0.0.1:9 would serve it unmasked"),
    ([], "no sandbox was given"),
    (["--index", "{index}", "--serve"], "--serve starts a retrieval server"),
    (["--index", "{index}", "--tools", "search"], "--tools search: the sandbox offers search,visit"),
])
def test_a_hintfree_release_outside_the_mask_is_refused_with_the_fix(demo: Path, tmp_path: Path, extra: list[str],
                                                                     needle: str) -> None:
    args = [a.replace("{index}", str(demo / "sandbox_index")) for a in extra]
    for command in ("eval", "run"):
        if command == "run" and "--serve" in args:
            continue
        result = aether(command, str(demo / "sandbox_release"), "--agent", "lexical-browse", *args,
                        "--out", str(tmp_path / command), "--no-progress")
        assert result.returncode == 2, result.stdout + result.stderr
        assert needle in result.stderr and "fix:" in result.stderr
        assert "--sandbox-url" in result.stderr or "--tools" in needle
        assert not (tmp_path / command / "run" / "traces.jsonl").exists()


def test_a_sandbox_for_a_plain_release_and_a_sandbox_url_as_search_url_are_refused(demo: Path, tmp_path: Path,
                                                                                  sandbox_url: tuple[str, Path]) -> None:
    url, _log = sandbox_url
    result = aether("run", str(demo / "release"), "--agent", "lexical", "--sandbox-url", url, "--out", str(tmp_path / "a"))
    assert result.returncode == 2 and "not a hint-free release" in result.stderr
    result = aether("run", str(demo / "release"), "--agent", "lexical", "--search-url", url, "--out", str(tmp_path / "b"))
    assert result.returncode == 2 and "is a masked sandbox" in result.stderr and "--sandbox-url" in result.stderr


def test_a_sandbox_over_another_corpus_is_refused_naming_both_hashes(demo: Path, tmp_path: Path) -> None:
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    store = import_corpus("demo", "demo", tmp_path / "other_corpus", seed=1).store
    build_index(store, "bm25", tmp_path / "other_index", config={"numba": False})
    expected = _json(demo / "sandbox_release" / "manifest.json")["corpus"]["corpus_hash"]
    result = aether("eval", str(demo / "sandbox_release"), "--agent", "lexical-browse", "--index",
                    str(tmp_path / "other_index"), "--out", str(tmp_path / "x"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr and store.content_hash in result.stderr


class _NotARetrievalServer(http.server.BaseHTTPRequestHandler):
    """Answers /health like a server, 404 for everything else: a URL that is not a Search-R1 retriever."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = b'{"status": "ok"}' if self.path == "/health" else b'{"detail": "Not Found"}'
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.path = "/nothing"
        self.do_GET()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_run_whose_every_search_failed_exits_non_zero_with_the_fix(demo: Path, tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotARetrievalServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = aether("run", str(demo / "release"), "--agent", "lexical", "--search-url", url,
                        "--out", str(tmp_path / "run"), "--no-progress")
    finally:
        server.shutdown()
    assert result.returncode == 3, result.stdout + result.stderr
    assert "tool_wrong_api" in result.stderr and "--sandbox-url" in result.stderr
    traces = [orjson.loads(line) for line in (tmp_path / "run" / "traces.jsonl").read_bytes().splitlines()]
    assert traces and {t["outcome"] for t in traces} == {"tool_error"}
    assert {t["error_kind"] for t in traces} == {"tool_wrong_api"} and all("HTTP 404" in t["error"] for t in traces)


def test_eval_through_a_running_sandbox_equals_the_in_process_run(demo: Path, tmp_path: Path,
                                                                  sandbox_url: tuple[str, Path]) -> None:
    url, _log = sandbox_url
    result = aether("eval", str(demo / "sandbox_release"), "--agent", "lexical-browse", "--sandbox-url", url,
                    "--corpus", str(demo / "sandbox_corpus"), "--out", str(tmp_path / "http"), "--no-probes",
                    "--no-progress")
    assert result.returncode == 0, result.stdout + result.stderr
    remote = _json(tmp_path / "http" / "run" / "factorised.json")["overall"]
    local = aether("eval", str(demo / "sandbox_release"), "--agent", "lexical-browse", "--index",
                   str(demo / "sandbox_index"), "--out", str(tmp_path / "local"), "--no-probes", "--no-progress")
    assert local.returncode == 0, local.stderr
    assert remote == _json(tmp_path / "local" / "run" / "factorised.json")["overall"]
    assert _json(tmp_path / "http" / "run" / "run.json")["sandbox"]["mask_policy"] == "webdetective-chain-lock/v2"
    # without a local copy of the pages the factorised metrics cannot be rebuilt: refused, not guessed
    bare = aether("eval", str(demo / "sandbox_release"), "--agent", "lexical-browse", "--sandbox-url", url,
                  "--out", str(tmp_path / "bare"), "--no-progress")
    assert bare.returncode == 2 and "--corpus" in bare.stderr


def _external_harness(url: str, questions: list[dict[str, str]], run_id: str, *, answer: bool) -> None:
    """Another project's agent loop, written against the documented sandbox API only (plain HTTP)."""
    with httpx.Client(base_url=url, timeout=30) as client:
        for row in questions:
            created = client.post("/episodes", json={"question_id": row["id"], "run_id": run_id})
            created.raise_for_status()
            episode = created.json()["episode_id"]
            hits = client.post(f"/episodes/{episode}/search", json={"query": row["question"], "k": 3, "seq": 0})
            hits.raise_for_status()
            documents = hits.json()["documents"]
            final: str | None = None
            if documents:
                page = client.post(f"/episodes/{episode}/visit", json={"page": documents[0]["id"], "seq": 1})
                page.raise_for_status()
                final = documents[0]["title"]
            body = {"answer": final if answer else "I don't know"}
            client.post(f"/episodes/{episode}/close", json=body).raise_for_status()


def _external_harness_without_answers(url: str, questions: list[dict[str, str]], run_id: str) -> None:
    """Closes with null, without a body, and leaves the last episode open (a harness that died)."""
    with httpx.Client(base_url=url, timeout=30) as client:
        for number, row in enumerate(questions):
            episode = client.post("/episodes", json={"question_id": row["id"], "run_id": run_id}).json()["episode_id"]
            if number == 0:
                client.post(f"/episodes/{episode}/close", json={"answer": None}).raise_for_status()
            elif number == 1:
                client.post(f"/episodes/{episode}/close").raise_for_status()


def test_an_external_harness_is_imported_scored_factorised_and_compared(demo: Path, tmp_path: Path,
                                                                         sandbox_url: tuple[str, Path]) -> None:
    url, log = sandbox_url
    release = demo / "sandbox_release"
    questions = [orjson.loads(line) for line in (release / "rollout_questions.jsonl").read_bytes().splitlines()]
    _external_harness(url, questions, "ext-answers", answer=True)
    _external_harness(url, questions, "ext-refuses", answer=False)
    runs = []
    for run_id in ("ext-answers", "ext-refuses"):
        out = tmp_path / run_id
        imported = aether("import", "sandbox", str(log), "--release", str(release), "--run-id", run_id,
                          "--out", str(out), "--agent", "title-guesser")
        assert imported.returncode == 0, imported.stdout + imported.stderr
        assert aether("score", str(out), "--release", str(release)).returncode == 0
        factorised = aether("factorise", str(out), "--release", str(release), "--corpus", str(demo / "sandbox_corpus"))
        assert factorised.returncode == 0, factorised.stderr
        runs.append(out)
    answered = [orjson.loads(line) for line in (runs[0] / "traces.jsonl").read_bytes().splitlines()]
    assert len(answered) == 60 and {t["steps"][0]["tool_calls"][0]["tool"] for t in answered} == {"search"}
    assert all("suppressed_ids" not in t["steps"][0]["tool_calls"][0] or not t["steps"][0]["tool_calls"][0]["suppressed_ids"]
               for t in answered)  # the agent's copy of each call: no masked ids
    refused = _json(runs[1] / "factorised.json")["overall"]
    assert refused["n_refused"] == 60 and refused["pass_at_1"] == 0
    fingerprint = _json(runs[0] / "run.json")
    assert fingerprint["environment"] == "sandbox" and fingerprint["agent"] == "title-guesser"
    assert fingerprint["corpus_hash"] == _json(release / "manifest.json")["corpus"]["corpus_hash"]
    compared = aether("compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "compare.json"))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    pair = _json(tmp_path / "compare.json")["pairs"][0]["factorised"]
    assert set(pair["results"]) == {"pass_at_1", "knowledge_sufficiency", "search_score", "f1_good_refusal",
                                    "f1_knowledge_utilisation", "gen_score"}
    delta = pair["results"]["pass_at_1"]
    assert delta["ci_low"] <= delta["delta"] <= delta["ci_high"] and delta["n"] == 60
    assert "factorised metrics" in compared.stdout
    # an episode closed with null (or no body) has no answer: never scored as an answer, nor as a refusal
    _external_harness_without_answers(url, questions[:3], "ext-silent")
    silent = aether("import", "sandbox", str(log), "--release", str(release), "--run-id", "ext-silent", "--out",
                    str(tmp_path / "silent"))
    assert silent.returncode == 0, silent.stderr
    outcomes = [orjson.loads(line)["outcome"] for line in (tmp_path / "silent" / "traces.jsonl").read_bytes().splitlines()]
    assert outcomes == ["no_answer_tag", "no_answer_tag", "tool_error"]
    # an unknown run id names the runs the log holds
    missing = aether("import", "sandbox", str(log), "--release", str(release), "--run-id", "nope", "--out",
                     str(tmp_path / "nope"))
    assert missing.returncode == 2 and "ext-answers" in missing.stderr


def test_a_sandbox_run_and_an_unmasked_run_are_never_compared(demo: Path) -> None:
    result = aether("compare", str(demo / "run"), str(demo / "sandbox_run"))
    assert result.returncode != 0 and "environment" in result.stderr + result.stdout


def test_the_one_run_path_refuses_a_hintfree_release_without_the_sandbox(demo: Path, tmp_path: Path) -> None:
    from aethersearch.errors import ConfigError
    from aethersearch.pipeline import index_search, run_release
    from aethersearch.rollout.session import RunSettings

    with pytest.raises(ConfigError, match="evaluated only inside the masked sandbox"):
        run_release(demo / "sandbox_release", tmp_path / "run", RunSettings(agent="lexical-browse"),
                    index_search(demo / "sandbox_index", ("search", "visit")))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("status, kind", [(422, None), (413, None), (404, "tool_wrong_api"), (503, "tool_server_error")])
def test_a_refusal_is_an_observation_and_a_failed_server_is_a_tool_error(status: int, kind: str | None) -> None:
    import asyncio

    from aethersearch.errors import ToolUnavailable
    from aethersearch.records import Budget
    from aethersearch.rollout.budget import BudgetedEnvironment, BudgetTracker
    from aethersearch.search.client import SearchClient
    from aethersearch.search.environment import RetrievalServerEnvironment

    transport = httpx.MockTransport(lambda request: httpx.Response(status, json={"detail": "query too long"}))
    client = SearchClient("http://retriever", transport=transport, max_retries=1, backoff_s=0.0)
    env = BudgetedEnvironment(RetrievalServerEnvironment(client, close_client=True), BudgetTracker(Budget()))

    async def search() -> Any:
        try:
            return await env.search("a question", 3)
        finally:
            await env.close()

    if kind is None:  # the server refused this request under its limits: the agent is shown why and goes on
        result = asyncio.run(search())
        assert result.documents == [] and result.call.error and "query too long" in result.call.error
    else:
        with pytest.raises(ToolUnavailable) as caught:
            asyncio.run(search())
        assert caught.value.kind == kind and caught.value.fix


def test_every_shipped_agent_runs_a_hintfree_release_in_the_sandbox(demo: Path, tmp_path: Path) -> None:
    from aethersearch.agents.base import AGENTS, make_agent
    from aethersearch.testing.scripted_server import ScriptedServer, search_r1_rule

    with ScriptedServer(search_r1_rule(lambda question: "Tinli Pratavli", searches=1), chat_template="chatml") as llm:
        for agent in sorted(AGENTS):
            model = ["--endpoint", llm.url, "--model", "scripted"] if make_agent(agent).needs_llm else []
            out = tmp_path / agent
            done = aether("run", str(demo / "sandbox_release"), "--agent", agent, "--index", str(demo / "sandbox_index"),
                          *model, "--out", str(out), "--no-progress", "--max-turns", "3", "--concurrency", "4")
            assert done.returncode == 0, f"{agent}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
            traces = [orjson.loads(line) for line in (out / "traces.jsonl").read_bytes().splitlines()]
            assert len(traces) == 60 and not [t for t in traces if t["outcome"].endswith("error")], agent
            assert _json(out / "run.json")["environment"] == "sandbox", agent
