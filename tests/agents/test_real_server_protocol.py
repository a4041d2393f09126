"""Search-R1 fidelity against servers that behave like the real ones (llama.cpp, vLLM), in exact strings.

The scripted model here is a *deterministic language model*: for each turn it has a
fixed stream of text it would write if nothing stopped it, and a request whose
prompt extends an earlier turn's prompt by a prefix of that stream gets the rest
of the stream (a continuation), as greedy decoding would. The server then applies
stop strings and ``max_tokens`` itself, reporting (vLLM) or not reporting
(llama.cpp) which stop string ended the reply. Expected strings are typed by hand
from Search-R1's ``generation.py`` (cut, action regex, observation, invalid-action
text) and ``infer.py`` (chat template whenever the model has one).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aethersearch.agents.base import make_agent
from aethersearch.agents.llm import OpenAIClient, decoding_body
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.records import Budget, Decoding, Document, Outcome, RolloutQuestion
from aethersearch.rollout.runner import run_episode
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.agents.searchr1_expected import INVALID, OBS_1, PROMPT

CHATML = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"


class StreamModel:
    """A deterministic LM: turn i writes ``streams[i]``; a prompt extending a turn continues its stream."""

    def __init__(self, streams: list[str], tool_replies: list[Reply] | None = None) -> None:
        self.streams = list(streams)
        self.turns: list[tuple[str, str]] = []  # (context, stream)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: ScriptedRequest) -> Reply:
        self.requests.append(request.body)
        context = request.body.get("prompt", request.text)
        for known, stream in self.turns:
            if context.startswith(known) and (known + stream).startswith(context):
                return Reply((known + stream)[len(context):])
        stream = self.streams[min(len(self.turns), len(self.streams) - 1)]
        self.turns.append((context, stream))
        return Reply(stream)

    @property
    def prompts(self) -> list[str]:
        """Every completion prompt, continuation probes included."""
        return [b["prompt"] for b in self.requests if "prompt" in b]


def run(model: StreamModel, *, agent: Any = None, budget: Budget | None = None, question: str =
        "what is the capital of france", env: FakeSearchEnv | None = None, **server: Any) -> Any:
    """One episode against a scripted server (``server`` options: stop_reason, chat_template, tokenize)."""
    env = env or FakeSearchEnv()

    async def go() -> Any:
        with ScriptedServer(model, **server) as srv:
            async with OpenAIClient(srv.url, "m") as llm:
                trace = await run_episode(RolloutQuestion(id="q1", question=question),
                                          agent or SearchR1Agent(), env, llm,
                                          budget or Budget(max_turns=4, max_tool_calls=8),
                                          Decoding())
                return trace, await llm.server_facts()
    trace, facts = asyncio.run(go())
    return trace, facts, env


# ---- unclosed tags are invalid actions; raw text is kept byte for byte ----------------------------------

@pytest.mark.parametrize("stop_reason", [True, False], ids=["vllm", "llama.cpp"])
def test_an_unclosed_answer_at_end_of_text_is_an_invalid_action(stop_reason: bool) -> None:
    model = StreamModel(["<think>easy</think>\n<answer> Paris", "<answer> Paris </answer>"])
    trace, _, _ = run(model, stop_reason=stop_reason)
    turn1 = "<think>easy</think>\n<answer> Paris"  # no closing tag: Search-R1 finds no action
    assert trace.response == turn1 + INVALID + "<answer> Paris </answer>"
    assert trace.steps[0].llm.text == turn1  # exactly what the model wrote, no tag added
    assert trace.steps[0].notes["invalid_action"] is True
    assert (trace.outcome, trace.prediction) == (Outcome.ANSWERED, "Paris")
    if not stop_reason:  # llama.cpp does not say why it stopped: a probe, then an uncut generation settled it
        assert trace.steps[0].notes["stop"] == "regenerated"
        assert model.prompts[1] == PROMPT + turn1  # the probe continued exactly the ambiguous text
        assert model.prompts[2] == PROMPT and not model.requests[2].get("stop")  # Search-R1's own way


@pytest.mark.parametrize("stop_reason", [True, False], ids=["vllm", "llama.cpp"])
def test_an_unclosed_search_cut_at_max_tokens_is_an_invalid_action_not_a_search(stop_reason: bool) -> None:
    words = " ".join(f"w{i}" for i in range(600))
    model = StreamModel([f"<search> {words}", "<answer> Paris </answer>"])
    trace, _, env = run(model, stop_reason=stop_reason)
    assert env.calls == []  # never executed
    assert trace.steps[0].llm.finish_reason == "length"
    assert not trace.steps[0].llm.text.endswith("</search>")
    assert trace.response.startswith(trace.steps[0].llm.text + INVALID)


def test_a_search_the_model_closed_is_executed_when_the_server_does_not_name_the_stop() -> None:
    model = StreamModel(["<think>look</think>\n<search> capital of France </search>\n<information>made up",
                         "<answer> Paris </answer> and more"])
    trace, _, env = run(model, stop_reason=False)
    turn1 = "<think>look</think>\n<search> capital of France </search>"
    assert env.calls == [("search", "capital of France")]
    assert trace.response == turn1 + OBS_1 + "<answer> Paris </answer>"
    assert trace.steps[0].llm.text == "<think>look</think>\n<search> capital of France "  # as the server sent it
    assert trace.steps[0].notes["stop"] == "continuation"
    assert trace.steps[0].notes["stop_restored"] == "</search>"


@pytest.mark.parametrize("stop_reason", [True, False], ids=["vllm", "llama.cpp"])
def test_an_answer_closed_inside_an_open_search_is_cut_where_search_r1_cuts(stop_reason: bool) -> None:
    # Search-R1 generates on past </answer> and cuts after the first </search>: the action is then the search
    stream = "<search> a <answer> b </answer> c </search> tail"
    model = StreamModel([stream, "<answer> b </answer>"])
    trace, _, env = run(model, stop_reason=stop_reason)
    assert env.calls == [("search", "a <answer> b </answer> c")]
    assert trace.response.startswith("<search> a <answer> b </answer> c </search>\n\n<information>")


@pytest.mark.parametrize("stop_reason", [True, False], ids=["vllm", "llama.cpp"])
def test_server_stops_and_client_side_cuts_give_the_same_transcript(stop_reason: bool) -> None:
    streams = ["<think>look</think>\n<search> capital of France </search>\n<information>invented</information>",
               "I am not sure", "<answer> Paris", "<think>ok</think>\n<answer> Paris </answer> trailing words"]
    server, _, _ = run(StreamModel(streams), stop_reason=stop_reason)
    client, _, _ = run(StreamModel(streams), stop_reason=stop_reason, agent=SearchR1Agent(stop_mode="client"))
    assert server.response == client.response
    assert [s.observation for s in server.steps] == [s.observation for s in client.steps]
    assert client.steps[0].llm.text == streams[0]  # the client-side mode keeps the whole generation
    assert (server.outcome, server.prediction) == (client.outcome, client.prediction) == (Outcome.ANSWERED,
                                                                                          "Paris")


# ---- the observation cut uses the served tokenizer -----------------------------------------------------

def test_observations_are_cut_to_500_tokens_of_the_served_tokenizer() -> None:
    long_doc = Document(id="long", title="Long", text=" ".join(f"word{i}" for i in range(2000)))
    model = StreamModel(["<search> Long </search>", "<answer> x </answer>"])
    trace, facts, _ = run(model, env=FakeSearchEnv([long_doc]))
    observation = trace.steps[0].observation
    # the scripted server's tokens are whitespace-led words: "\n\n<information>Doc", "1(Title:", "\"Long\")",
    # then word0 … word496 make 500
    assert observation == '\n\n<information>Doc 1(Title: "Long") ' + " ".join(f"word{i}" for i in range(497))
    assert trace.steps[0].notes["tokenizer"] == "served"
    assert trace.steps[0].notes["observation_tokens"] == 2004 and trace.steps[0].notes["observation_cut"]
    assert facts.tokenize == "/tokenize"


def test_the_served_tokenizer_without_a_tokenize_endpoint_is_a_recorded_error_with_the_fix() -> None:
    model = StreamModel(["<search> Paris </search>", "<answer> x </answer>"])
    trace, facts, _ = run(model, tokenize=False)
    assert facts.tokenize is None
    assert trace.outcome in (Outcome.ENDPOINT_ERROR, Outcome.TOOL_ERROR) or trace.outcome.value == "request_rejected"
    assert "tokenizer=regex" in (trace.error or "")


# ---- the chat template, when the served model has one ---------------------------------------------------

def test_auto_applies_the_chat_template_the_server_reports() -> None:
    model = StreamModel(["<answer> Paris </answer>"])
    trace, facts, _ = run(model, chat_template="{{ chatml }}")
    assert model.prompts[0] == CHATML.format(prompt=PROMPT)
    assert facts.chat_template is True and facts.template_source == "GET /props"
    assert trace.steps[0].notes["prompt_format"] == "chat"


def test_auto_uses_raw_text_when_the_server_cannot_say_and_records_why() -> None:
    model = StreamModel(["<answer> Paris </answer>"])
    trace, facts, _ = run(model)
    assert model.prompts[0] == PROMPT
    assert facts.chat_template is False  # the scripted /tokenize refuses messages: no template
    assert trace.steps[0].notes["prompt_format"] == "raw"
    assert "no chat template" in trace.steps[0].notes["prompt_format_reason"]


def test_explicit_chat_and_raw_override_auto() -> None:
    raw_model = StreamModel(["<answer> Paris </answer>"])
    run(raw_model, chat_template="t", agent=SearchR1Agent(prompt_format="raw"))
    assert raw_model.prompts[0] == PROMPT
    local = StreamModel(["<answer> Paris </answer>"])
    run(local, agent=SearchR1Agent(chat_template="qwen2.5"))
    assert local.prompts[0] == ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                                "assistant.<|im_end|>\n<|im_start|>user\n" + PROMPT +
                                "<|im_end|>\n<|im_start|>assistant\n")


def test_chat_with_a_server_that_cannot_render_is_an_error_naming_the_fix() -> None:
    model = StreamModel(["<answer> Paris </answer>"])
    trace, _, _ = run(model, agent=SearchR1Agent(prompt_format="chat"))
    assert trace.prediction is None and "chat_template=" in (trace.error or "")


# ---- sampling: every knob explicit -------------------------------------------------------------------

def test_every_sampling_knob_is_sent_explicitly_and_top_k_off_suits_the_server() -> None:
    model = StreamModel(["<answer> Paris </answer>"])
    run(model)
    body = model.requests[0]
    for key, value in {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                       "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                       "max_tokens": 500, "seed": 0}.items():
        assert body[key] == value, key
    llama = StreamModel(["<answer> Paris </answer>"])
    run(llama, chat_template="t")  # a /props answer marks a llama.cpp server: top_k "off" is 0 there
    assert llama.requests[0]["top_k"] == 0
    assert decoding_body(Decoding(), "llama.cpp")["top_k"] == 0 and decoding_body(Decoding())["top_k"] == -1


def test_sent_decoding_is_what_the_requests_carry() -> None:
    model = StreamModel(["<answer> Paris </answer>"])

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        with ScriptedServer(model, chat_template="t") as srv:
            async with OpenAIClient(srv.url, "m") as llm:
                await llm.server_facts()
                await llm.complete("x", Decoding())
                return llm.sent_decoding(Decoding()), model.requests[-1]
    sent, body = asyncio.run(go())
    assert {k: body[k] for k in sent} == sent


# ---- context overflow: Search-R1 keeps the last max_prompt_length tokens ------------------------------------

def test_the_rolling_context_is_cut_from_the_left_to_max_prompt_tokens() -> None:
    model = StreamModel(["<search> Paris </search>", "<answer> Paris </answer>"])
    trace, _, _ = run(model, agent=SearchR1Agent(max_prompt_tokens=60))
    second = model.prompts[-1]
    full = PROMPT + "<search> Paris </search>" + trace.steps[0].observation
    assert full.endswith(second) and second != full
    assert trace.steps[1].notes["context_truncated"]["kept"] == 60


# ---- the one rule for final replies, in every agent -----------------------------------------------------

@pytest.mark.parametrize(("agent", "reply", "outcome"), [
    ("direct", "Paris", Outcome.NO_ANSWER_TAG),
    ("direct", "<answer> Paris", Outcome.NO_ANSWER_TAG),
    ("direct", " ".join(["blah"] * 600), Outcome.TRUNCATED),
    ("direct", "<answer> Paris </answer>", Outcome.ANSWERED),
    ("naive-rag", "Paris", Outcome.NO_ANSWER_TAG),
    ("react", "Paris", Outcome.NO_ANSWER_TAG),
    ("react", " ".join(["blah"] * 600), Outcome.TRUNCATED),
    ("react", "I think <answer> Paris </answer>", Outcome.ANSWERED),
])
def test_untagged_and_cut_off_final_replies_are_never_answers(agent: str, reply: str, outcome: Outcome) -> None:
    for chat_template in (None, "t"):  # raw completions and the chat endpoint
        options = {} if chat_template is None else {"chat_template": chat_template}
        trace, _, _ = run(StreamModel([reply]), agent=make_agent(agent), **options)
        assert trace.outcome == outcome, (agent, reply, chat_template)
        assert trace.prediction == ("Paris" if outcome == Outcome.ANSWERED else None)


def test_react_replays_a_tool_calling_turn_with_empty_string_content() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"query": "Paris"}'}}
    replies = iter([Reply("", tool_calls=[call]), Reply("<answer> Paris </answer>")])
    bodies: list[dict[str, Any]] = []

    def model(request: ScriptedRequest) -> Reply:
        bodies.append(request.body)
        return next(replies)

    async def go() -> Any:
        with ScriptedServer(model) as srv:
            async with OpenAIClient(srv.url, "m") as llm:
                return await run_episode(RolloutQuestion(id="q", question="capital of france"),
                                         make_agent("react"), FakeSearchEnv(), llm, Budget(), Decoding())
    trace = asyncio.run(go())
    assistant = next(m for m in bodies[1]["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "search"
    assert trace.outcome == Outcome.ANSWERED and trace.steps[0].notes["tokenizer"] == "served"


def test_a_server_gone_mid_run_is_a_connection_error_not_a_missing_chat_template() -> None:
    """A llama.cpp server that answered the probe and then died must be retried on rerun (``connection``),
    not reported as "the server cannot render the chat template" (a configuration refusal)."""
    from aethersearch.errors import EndpointError

    async def go() -> None:
        srv = ScriptedServer(StreamModel(["<answer> Paris </answer>"]), chat_template="t")
        with srv:
            llm = OpenAIClient(srv.url, "m")
            assert (await llm.served.facts()).chat_template is True
            assert await llm.served.render_chat([{"role": "user", "content": "q"}])
        try:
            with pytest.raises(EndpointError) as info:
                await llm.served.render_chat([{"role": "user", "content": "q"}])
            assert info.value.kind == "connection" and info.value.transient
        finally:
            await llm.aclose()
    asyncio.run(go())
