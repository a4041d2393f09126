"""End to end with a real LLM: ``aether run`` (search-r1, direct, react) then ``aether score``.

It asserts mechanics, not accuracy (a 135M model answers little): every question
ends in a typed outcome, no endpoint or tool errors, the model's raw text is kept
byte for byte and the Search-R1 response is exactly its turns plus observations,
tool calls reached the search index, observations were cut with the served
model's tokenizer (checked against the server's own ``/tokenize``), the chat
template the server reports was applied, and ``run.json`` records the sampling
values, prompt format and tokenizer. It also checks, on the real server, that
server-side stop strings and Search-R1's client-side cut give the same text.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from aethersearch.records import Outcome
from tests.doc_pages import section as doc_section
from tests.realmodel.conftest import RealServer

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(600)]

AETHER = str(Path(sys.executable).with_name("aether"))
ERRORS = {"endpoint_error", "tool_error", "request_rejected"}
SOURCES = ("nq", "hotpotqa", "bamboogle")  # one question each: a handful that fits the time budget


def _tiny_demo(out: Path) -> tuple[Path, Path]:
    """The demo world's corpus and BM25 index, and a release of one question per source in SOURCES."""
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.curation.build import build_from_config
    from aethersearch.search.index_dir import build_index
    from aethersearch.sources.demo import write_demo_sources

    store = import_corpus("demo", "demo", out / "corpus", seed=0, overwrite=True).store
    build_index(store, "bm25", out / "index", config={"numba": False}, overwrite=True)
    config_path = write_demo_sources(out / "demo_sources", seed=0)
    config = yaml.safe_load(config_path.read_text())
    config["planned_per_source"] = 1
    config["sources"] = [s for s in config["sources"] if s["dataset"] in SOURCES]
    for source in config["sources"]:
        source.pop("cap", None)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return build_from_config(config_path, out / "release").release_dir, out / "index"


def _aether(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run([AETHER, *args], capture_output=True, text=True, timeout=420, check=False,
                          env={**os.environ, "COLUMNS": "200"})
    return done, time.monotonic() - start


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _tokens(server: RealServer, text: str) -> int:
    request = urllib.request.Request(server.root + "/tokenize", data=json.dumps({"content": text}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return len(json.loads(reply.read())["tokens"])


@pytest.fixture(scope="module")
def tiny_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(release, index) of the tiny demo, built once for this module."""
    return _tiny_demo(tmp_path_factory.mktemp("tiny-demo"))


def test_search_r1_react_and_direct_run_and_score_against_a_real_model(real_server: RealServer,
                                                                          tiny_demo: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    release, index = tiny_demo
    table: dict[str, dict[str, Any]] = {}
    # react's tool-calling handler samples under a grammar (slow on CPU): 200 tokens a call keeps it in budget
    for agent, model, max_new in (("search-r1", real_server.model, 500), ("direct", real_server.model, 500),
                                  ("react", real_server.tools_model, 200)):
        run_dir = tmp_path / agent
        done, wall = _aether("run", str(release), "--out", str(run_dir), "--agent", agent,
                             "--endpoint", real_server.url, "--model", model, "--index", str(index),
                             "--concurrency", "1", "--max-turns", "3", "--max-tool-calls", "3",
                             "--max-tokens", str(max_new), "--no-progress")
        assert done.returncode == 0, done.stdout + done.stderr
        scored, _ = _aether("score", str(run_dir), "--release", str(release))
        assert scored.returncode == 0, scored.stdout + scored.stderr
        assert (run_dir / "scores.json").is_file()
        traces = _read(run_dir / "traces.jsonl")
        run_json = json.loads((run_dir / "run.json").read_text())
        table[agent] = _check_run(agent, traces, run_json, real_server, max_new)
        table[agent]["wall_s"] = round(wall, 1)
        if agent == "search-r1":
            table[agent]["turns_rechecked_client_side"] = _recheck_turns_client_side(traces, real_server)
    found = table["search-r1"]["documents_returned"] + table["react"]["documents_returned"]
    assert found > 0, f"no agent's tool call got documents from the index: {table}"
    report = tmp_path / "real_model_table.json"
    report.write_text(json.dumps(table, indent=1))
    print("\nreal-model run:", json.dumps(table))


def _check_run(agent: str, traces: list[dict[str, Any]], run_json: dict[str, Any],
               server: RealServer, max_new: int) -> dict[str, Any]:
    """The mechanics every run must show; returns the row of the closing table."""
    assert traces, f"{agent}: no traces"
    outcomes = [t["outcome"] for t in traces]
    assert all(o in {x.value for x in Outcome} | {"request_rejected"} for o in outcomes), outcomes
    assert not ERRORS & set(outcomes), [(t["outcome"], t.get("error")) for t in traces]
    decoding = run_json["decoding"]
    for knob, value in {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
                        "repetition_penalty": 1.0, "max_tokens": max_new}.items():
        assert decoding[knob] == value, (agent, knob, decoding)
    # run.json records what was sent (llama.cpp gets top_k 0 for "off") and what the server said of its model
    sent = run_json["sent_decoding"]
    assert sent["repeat_penalty"] == sent["repetition_penalty"] == 1.0 and sent["top_k"] == 0, sent
    assert sent["min_p"] == 0.0 and sent["temperature"] == 0.0 and sent["max_tokens"] == max_new, sent
    facts = run_json["served_model"]["server"]
    assert facts["chat_template"] is True and facts["template_source"] == "GET /props", facts
    assert facts["tokenize"] == "/tokenize" and facts["flavor"] == "llama.cpp" and facts["chat_template_sha256"]
    assert run_json["concurrency"] == 1
    config = run_json["agent_config"]
    if agent != "react":
        assert config["prompt_format"] == "auto"
    tool_calls = returned = 0
    for trace in traces:
        steps = trace["steps"]
        llm_steps = [s for s in steps if s.get("llm")]
        assert llm_steps and all(isinstance(s["llm"]["text"], str) for s in llm_steps)
        if agent != "react":  # the template the server reports was applied (react's server renders its own)
            assert llm_steps[0]["notes"]["prompt_format"] == "chat", llm_steps[0]["notes"]
            assert "GET /props" in llm_steps[0]["notes"]["prompt_format_reason"]
        if agent == "search-r1":  # the response is exactly the turns (as the model wrote them) + observations
            rebuilt = "".join((s["notes"].get("context_text", s["llm"]["text"]) if s.get("llm") else "")
                              + (s.get("observation") or "") for s in steps)
            assert rebuilt.startswith(trace["response"]) and len(rebuilt) - len(trace["response"]) <= len(
                steps[-1].get("observation") or ""), trace["id"]
            for step in llm_steps:  # the trace's raw text never gains a closing tag the model did not write
                raw, appended = step["llm"]["text"], step["notes"].get("context_text", step["llm"]["text"])
                assert appended.startswith(raw) or raw.startswith(appended)
                if appended != raw and appended.startswith(raw):
                    assert step["notes"].get("stop_restored") == appended[len(raw):], step["notes"]
        for step in steps:
            for call in step.get("tool_calls") or []:
                tool_calls += 1
                returned += len(call["returned_ids"])  # the BM25 index's answers (a stopword query finds none)
            if step.get("observation") and "observation_tokens" in step.get("notes", {}):
                notes = step["notes"]
                assert notes["tokenizer"] == "served"
                if notes["observation_cut"]:
                    assert notes["observation_tokens"] > 500
                    assert _tokens(server, step["observation"]) <= 501  # a detokenize/retokenize boundary
    if tool_calls:
        assert config["tokenizer"] == "served"
    usage = [t.get("usage") or {} for t in traces]
    return {"questions": len(traces), "outcomes": {o: outcomes.count(o) for o in sorted(set(outcomes))},
            "tool_calls": tool_calls, "documents_returned": returned, "prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage),
            "completion_tokens": sum(u.get("completion_tokens", 0) for u in usage)}


def _recheck_turns_client_side(traces: list[dict[str, Any]], server: RealServer) -> int:
    """Every search-r1 turn regenerated as Search-R1 does (no stops, cut afterwards) gives the same text."""
    from aethersearch.agents.formatting import render_chat_prompt
    from aethersearch.agents.llm import OpenAIClient
    from aethersearch.agents.prompts import SEARCH_R1_PROMPT, SEARCH_R1_STOP
    from aethersearch.agents.search_r1 import postprocess_response
    from aethersearch.agents.stops import generate
    from aethersearch.records import Decoding

    async def go() -> int:
        checked = 0
        async with OpenAIClient(server.url, server.model, concurrency=1) as llm:
            for trace in traces:
                context = await render_chat_prompt(SEARCH_R1_PROMPT.format(question=trace["question_seen"]),
                                                   "served", "served", llm)
                for step in trace["steps"]:
                    appended = step["notes"].get("context_text", step["llm"]["text"])
                    assert "context_truncated" not in step["notes"]
                    tokens = min(500, step["llm"]["completion_tokens"] + 8)
                    client = await generate(llm, context, Decoding(max_tokens=tokens), SEARCH_R1_STOP,
                                            postprocess_response, mode="client")
                    if step["llm"]["finish_reason"] != "length" or client.text.startswith(appended):
                        assert client.text == appended, (trace["id"], step["index"], step["notes"])
                    checked += 1
                    context += appended + (step.get("observation") or "")
        return checked
    return asyncio.run(go())


def test_server_side_stops_give_the_text_search_r1_cuts_client_side(real_server: RealServer) -> None:
    from aethersearch.agents.formatting import render_chat_prompt
    from aethersearch.agents.llm import OpenAIClient
    from aethersearch.agents.prompts import SEARCH_R1_PROMPT, SEARCH_R1_STOP
    from aethersearch.agents.search_r1 import postprocess_response
    from aethersearch.agents.stops import generate
    from aethersearch.records import Decoding

    questions = ["Who wrote the novel that the film Blade Runner is based on?", "what is the capital of france"]

    async def go() -> list[tuple[str, str, dict[str, Any]]]:
        results = []
        async with OpenAIClient(real_server.url, real_server.model, concurrency=1) as llm:
            facts = await llm.server_facts()
            assert facts.chat_template is True and facts.tokenize == "/tokenize" and facts.flavor == "llama.cpp"
            for question in questions:
                prompt = await render_chat_prompt(SEARCH_R1_PROMPT.format(question=question + "?"), "served",
                                                  "served", llm)
                decoding = Decoding(max_tokens=200)
                server = await generate(llm, prompt, decoding, SEARCH_R1_STOP, postprocess_response)
                client = await generate(llm, prompt, decoding, SEARCH_R1_STOP, postprocess_response,
                                        mode="client")
                results.append((server.text, client.text, server.notes))
        return results

    for server_text, client_text, notes in asyncio.run(go()):
        assert server_text == client_text, (notes, server_text, client_text)


def test_the_readme_laptop_commands_run_against_the_real_server(real_server: RealServer,
                                                                tiny_demo: tuple[Path, Path],
                                                                tmp_path: Path) -> None:
    """The README's ``aether eval --endpoint`` commands, as written, with only the inputs swapped.

    The server is the test session's fixture (the README starts it the same way: ``scripts/serve_gguf.py``);
    the tiny demo release stands in for the full one to keep the test short.
    """
    section = doc_section("Try it with a real model on a laptop")  # README's section, on docs/guides/real-model.md
    block = section.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    evals = [c for c in commands if c.startswith("aether eval") and "--endpoint" in c]
    assert len(evals) == 2 and "scripts/serve_gguf.py" in block and "scripts/install_real_model.sh" in block
    release, index = tiny_demo
    for command in evals:
        command = (command.replace("demo_out/release", str(release)).replace("demo_out/index", str(index))
                   .replace("http://127.0.0.1:8080/v1", real_server.url).replace("runs/", f"{tmp_path}/runs/"))
        words = command.split()
        done, _ = _aether(*words[1:], "--no-progress", "--max-turns", "2", "--max-tokens", "200")
        assert done.returncode == 0, done.stdout + done.stderr
        out = Path(words[words.index("--out") + 1])
        assert (out / "report.html").is_file() and (out / "run" / "scores.json").is_file()
