"""Search-R1 protocol transcripts against the scripted OpenAI server, compared to hand-written strings."""

from __future__ import annotations

import asyncio

import pytest

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.search_r1 import SearchR1Agent, parse_action, postprocess_response
from aethersearch.records import Budget, Decoding, Document, Outcome, RolloutQuestion
from aethersearch.rollout.runner import run_episode
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.agents.searchr1_expected import INVALID, OBS_1, PROMPT


class Recorder:
    """A responder replaying a per-turn script and recording every prompt it received."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.prompts: list[str] = []
        self.bodies: list[dict] = []

    def __call__(self, request: ScriptedRequest) -> Reply:
        self.prompts.append(request.body["prompt"])
        self.bodies.append(request.body)
        return Reply(self.script[min(len(self.prompts) - 1, len(self.script) - 1)])


def _run(recorder: Recorder, question: str, budget: Budget, env: FakeSearchEnv | None = None,
         agent: SearchR1Agent | None = None):
    env = env or FakeSearchEnv()
    agent = agent or SearchR1Agent()

    async def go():
        with ScriptedServer(recorder) as server:
            async with OpenAIClient(server.url, "m") as llm:
                return await run_episode(RolloutQuestion(id="q1", question=question), agent, env, llm,
                                         budget, Decoding())
    return asyncio.run(go()), env


def test_search_invalid_answer_transcript_matches_search_r1_exactly() -> None:
    recorder = Recorder([
        "<think>I should look it up.</think>\n<search> capital of France </search>\nnot generated",
        "I will answer without tags.",
        "<think>Paris.</think>\n<answer> Paris </answer> trailing",
    ])
    trace, env = _run(recorder, "what is the capital of france", Budget(max_turns=4, max_tool_calls=8))
    turn1 = "<think>I should look it up.</think>\n<search> capital of France </search>"
    turn2 = "I will answer without tags."
    turn3 = "<think>Paris.</think>\n<answer> Paris </answer>"
    assert recorder.prompts == [PROMPT, PROMPT + turn1 + OBS_1, PROMPT + turn1 + OBS_1 + turn2 + INVALID]
    assert trace.response == turn1 + OBS_1 + turn2 + INVALID + turn3
    assert trace.question_seen == "what is the capital of france?"
    assert (trace.prediction, trace.outcome, trace.stop_reason) == ("Paris", Outcome.ANSWERED, "answer")
    assert env.calls == [("search", "capital of France")]
    assert trace.steps[0].tool_calls[0].returned_ids == ["d1", "d2", "d4"]
    assert trace.steps[1].notes["invalid_action"] is True
    # the server reported which stop it removed (vLLM's stop_reason): the trace keeps its raw text
    assert trace.steps[0].llm.text == "<think>I should look it up.</think>\n<search> capital of France "
    assert trace.steps[0].notes["stop"] == "stop_reason"
    # greedy decoding and the two stop strings go out on every call
    assert all(b["stop"] == ["</search>", "</answer>"] and b["temperature"] == 0.0 for b in recorder.bodies)


def test_last_turn_is_a_final_rollout_where_search_is_not_executed() -> None:
    recorder = Recorder(["<think>more</think>\n<search> Paris </search>"])
    trace, env = _run(recorder, "Where is the Seine?", Budget(max_turns=2, max_tool_calls=8))
    assert len(recorder.prompts) == 3  # two search turns, then the final rollout
    assert len(env.calls) == 2
    assert trace.question_seen == "Where is the Seine?"  # already ends with '?': not doubled
    assert (trace.outcome, trace.stop_reason, trace.prediction) == (Outcome.BUDGET, "budget", None)
    assert trace.response.endswith("</information>\n\n<think>more</think>\n<search> Paris </search>")
    assert trace.steps[-1].notes["forced_final"] is True and trace.steps[-1].tool_calls == []


def test_final_rollout_answer_counts_as_answered_with_budget_stop_reason() -> None:
    recorder = Recorder(["<search> Paris </search>", "<answer> Paris </answer>"])
    trace, _ = _run(recorder, "q", Budget(max_turns=1))
    assert (trace.outcome, trace.stop_reason, trace.prediction) == (Outcome.ANSWERED, "budget", "Paris")


def test_observation_is_cut_to_500_tokens_of_the_configured_tokenizer() -> None:
    long_doc = Document(id="long", title="Long", text=" ".join(f"word{i}" for i in range(2000)))
    recorder = Recorder(["<search> Long </search>", "<answer> x </answer>"])
    trace, _ = _run(recorder, "q", Budget(), env=FakeSearchEnv([long_doc]), agent=SearchR1Agent(tokenizer="regex"))
    observation = trace.steps[0].observation
    full = '\n\n<information>Doc 1(Title: "Long") ' + long_doc.text + "</information>\n\n"
    assert full.startswith(observation) and observation != full
    # regex tokens: < information > Doc 1 ( Title : " Long " ) = 12 tokens, then 488 words
    assert observation.endswith("word487")
    assert trace.steps[0].notes["tokenizer"] == "regex" and trace.steps[0].notes["observation_cut"] is True


def test_abstention_is_its_own_outcome() -> None:
    trace, _ = _run(Recorder(["<answer> I don't know </answer>"]), "q", Budget())
    assert (trace.outcome, trace.prediction) == (Outcome.ABSTAINED, "I don't know")


@pytest.mark.parametrize(("raw", "expected"), [
    ("<search> a </search><answer> b </answer>", "<search> a </search>"),
    ("<answer> b </answer> <search> a </search>", "<answer> b </answer> <search> a </search>"),
    ("<answer> b </answer> more", "<answer> b </answer>"),
    ("no tags", "no tags"),
])
def test_postprocess_cuts_like_search_r1(raw: str, expected: str) -> None:
    assert postprocess_response(raw) == expected


def test_action_is_the_first_tag_pair_with_stripped_content() -> None:
    assert parse_action("<think/> <answer>  Rome \n</answer>") == ("answer", "Rome")
    assert parse_action("<search>x</answer>") == (None, "")


class _FailingSearch(FakeSearchEnv):
    async def search(self, query: str, k: int):
        raise RuntimeError("index offline")


def test_a_search_refused_by_the_tool_budget_still_records_that_turns_model_call() -> None:
    # each step is recorded once its observation is known: a refused search must not lose the call
    recorder = Recorder(["<think>look</think>\n<search> Paris </search>"])
    trace, env = _run(recorder, "Where is the Seine?", Budget(max_turns=4, max_tool_calls=1))
    assert len(env.calls) == 1 and len(recorder.prompts) == 3  # search, refused search, forced final
    assert [s.index for s in trace.steps] == [0, 1, 2]
    assert trace.steps[0].observation is not None and len(trace.steps[0].tool_calls) == 1
    refused = trace.steps[1]
    assert refused.llm is not None and refused.observation is None and refused.tool_calls == []
    assert "observation_tokens" not in refused.notes and refused.notes["stop"] == "stop_reason"
    assert trace.steps[2].notes["forced_final"] is True
    assert (trace.usage.turns, trace.usage.tool_calls) == (3, 1)


def test_a_failing_search_keeps_the_model_call_in_the_trace() -> None:
    recorder = Recorder(["<search> Paris </search>"])
    trace, _ = _run(recorder, "Where is the Seine?", Budget(max_turns=4, max_tool_calls=8), env=_FailingSearch())
    assert trace.outcome is Outcome.TOOL_ERROR and "index offline" in (trace.error or "")
    assert len(trace.steps) == 1 and trace.steps[0].llm is not None and trace.steps[0].observation is None


def test_a_search_cut_by_the_question_deadline_keeps_the_model_call_in_the_trace() -> None:
    recorder = Recorder(["<search> Paris </search>"])

    async def go():
        with ScriptedServer(recorder) as server:
            async with OpenAIClient(server.url, "m") as llm:
                return await run_episode(RolloutQuestion(id="q1", question="Where?"), SearchR1Agent(),
                                         FakeSearchEnv(delay_s=5.0), llm, Budget(), Decoding(), timeout_s=1.0)
    trace = asyncio.run(go())
    assert trace.stop_reason == "deadline"
    assert len(trace.steps) == 1 and trace.steps[0].llm is not None and trace.steps[0].observation is None


def test_docs_render_from_the_first_line_of_contents_whatever_the_document_holds() -> None:
    """Search-R1 splits ``contents`` at its first newline: a title with a newline, or a corpus row's own
    contents, splits there too (the plain case is rendered without building ``contents``)."""
    from aethersearch.agents.prompts import render_search_r1_docs

    docs = [Document(id="a", title="Plain", text="Body\nmore"),
            Document(id="b", title="Two\nlines", text="Body"),
            Document(id="c", title="Ignored", text="x", source_contents="Raw first line\nraw rest"),
            Document(id="d", title="", text="")]
    assert render_search_r1_docs(docs) == ('Doc 1(Title: "Plain") Body\nmore\n'
                                           'Doc 2(Title: "Two) lines"\nBody\n'
                                           "Doc 3(Title: Raw first line) raw rest\n"
                                           'Doc 4(Title: "") \n')
