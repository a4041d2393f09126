"""Answer extraction from raw responses, with a distinct outcome for every way an episode can end.

Why: "no answer tag", "budget exhausted" and "endpoint error" are not wrong
answers; folding them into accuracy hides whether a checkpoint got worse at
answering or at following the protocol. Every prediction therefore carries an
``Outcome`` and only ``answered`` is a real attempt.

Two extraction rules:

* default: the answer is the *last* ``<answer>...</answer>`` span of the response
  (DOTALL, stripped), as docs/design/conventions.md says.
* ``compat="searchr1"``: Search-R1's ``extract_solution`` scans the decoded
  *prompt + response* and returns the last match only when there are at least
  two matches. Its prompt already contains two spans (``<answer> and </answer>``
  and the example ``<answer> Beijing </answer>``), so a response without a tag
  is scored as the answer "Beijing". Reproducing that quirk is the point of the
  flag: numbers then match the published ones. The outcome still says
  ``no_answer_tag``.
* ``compat="aethersearch"``: AetherSearch's parser over the text of every step
  (``scoring/aethersearch_compat.py``): the prediction is its terminal answer
  (None unless the last action is the one valid answer); the join keeps the
  actions and executed queries so their R_task can be computed.

Stated confidence: for a run whose prompt asked for one (``run.json`` agent setting
``prompt_variant: stated-confidence``), every extracted answer is split by
:func:`aethersearch.stated_confidence.split_confidence` (the agent's own rule), so the
metrics, the abstention rule and the gold never see "Confidence: 80%" as part of the
answer; the confidence and how it was read ride along on the :class:`Extraction`.

Abstention: the shape of a refusal is decided by ``aethersearch.abstention`` (the
definition the agents use too); then **gold wins**: an extracted answer with
Search-R1 EM 1 against any gold alias is an answer, always (:func:`settle`),
because real golds read like refusals ("Unknown", "I Can't Tell You Why").
"""

from __future__ import annotations

import re
from typing import NamedTuple

from aethersearch.abstention import is_abstention
from aethersearch.errors import ConfigError
from aethersearch.records import ERROR_OUTCOMES, Outcome, Trace
from aethersearch.scoring.aethersearch_compat import check_trajectory, trace_actions
from aethersearch.scoring.metrics import Golds, em
from aethersearch.stated_confidence import split_confidence

__all__ = ["ANSWER_SPAN", "COMPAT_MODES", "Extraction", "INFORMATION_BLOCK", "NON_TAG_AGENTS", "SEARCHR1_PROMPT",
    "check_compat", "check_compat_agent", "extract_answer", "extract_searchr1", "resolve_prediction",
    "resolve_trace", "searchr1_prompt", "settle", "with_stated_confidence"]

ANSWER_SPAN = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
#: Observation blocks the harness appended to the response: retrieved text, not the model's words.
INFORMATION_BLOCK = re.compile(r"<information>.*?</information>", re.DOTALL)

COMPAT_MODES: tuple[str, ...] = ("searchr1", "aethersearch")

SEARCHR1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
    "you get new information. After reasoning, if you find you lack some knowledge, you can call a search "
    "engine by <search> query </search> and it will return the top searched results between <information> "
    "and </information>. You can search as many times as your want. If you find no further external "
    "knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)
"""Search-R1's user prompt (docs/design/conventions.md), needed only to reproduce its prompt+response scan."""

_STOPPED = frozenset({Outcome.BUDGET, *ERROR_OUTCOMES})


class Extraction(NamedTuple):
    """What the scorer scores for one episode: the prediction string (or None) and its outcome."""

    prediction: str | None
    outcome: Outcome
    matches: int
    confidence: float | None = None
    """The stated confidence in [0, 1] (stated-confidence runs only; None when not stated)."""
    confidence_status: str | None = None
    """How the confidence was read (``aethersearch.stated_confidence.STATUSES``); None: not asked for."""


#: Registered agents whose episodes are *not* written in the ``<search>``/``<answer>`` tag protocol the compat
#: scorers read: function calling (``react``), verl's hermes tool calls, the model-free and EvidenceLoop agents.
NON_TAG_AGENTS = frozenset({"react", "verl-search", "lexical", "lexical-browse", "evidenceloop"})


def check_compat(compat: str | None) -> None:
    """Refuse an unknown compatibility mode up front, naming the valid ones."""
    if compat is not None and compat not in COMPAT_MODES:
        raise ConfigError(f"unknown --compat mode {compat!r}", fix=f"use one of: {', '.join(COMPAT_MODES)}")


def check_compat_agent(compat: str | None, agent: str | None) -> None:
    """Refuse a compat score of a run whose agent does not write the tag protocol that scorer reads.

    Why: a function-calling or tool-message episode read by a tag scorer scores 0
    for its format, not its answers; that would be a published name on a false number.
    """
    if compat is not None and agent in NON_TAG_AGENTS:
        raise ConfigError(f"--compat {compat} reads episodes written in the <search>/<answer> tag protocol, but "
                          f"this run's agent {agent!r} does not write it, so the score would measure its format",
                          fix="score without --compat, or run an agent of that protocol (--agent search-r1 or "
                              "--agent aethersearch)")


def _classify(answer: str) -> Outcome:
    return Outcome.ABSTAINED if is_abstention(answer) else Outcome.ANSWERED


def extract_answer(response: str) -> Extraction:
    """Default rule: the last ``<answer>`` span the model wrote in ``response``; none -> ``no_answer_tag``.

    ``<information>`` blocks are retrieved documents, not the model's text: a
    passage that happens to contain answer tags must never become the prediction
    (Search-R1's own extraction, kept under ``--compat searchr1``, does not skip them).
    """
    found = ANSWER_SPAN.findall(INFORMATION_BLOCK.sub("", response))
    if not found:
        return Extraction(None, Outcome.NO_ANSWER_TAG, 0)
    answer = found[-1].strip()
    return Extraction(answer, _classify(answer), len(found))


def extract_searchr1(prompt: str, response: str) -> str | None:
    """Search-R1 ``extract_solution`` over ``prompt + response``: the last span, only if there are two or more."""
    found = ANSWER_SPAN.findall(prompt + response)
    if len(found) <= 1:
        return None
    return str(found[-1]).strip()


def searchr1_prompt(question: str) -> str:
    """The Search-R1 prompt for the question exactly as the agent saw it."""
    return SEARCHR1_PROMPT.format(question=question)


def settle(extraction: Extraction, golds: Golds) -> Extraction:
    """Gold wins: an ``abstained`` answer that scores EM 1 against any gold alias is ``answered``.

    The agent's label (and the shape rule) cannot know the gold; this is the one
    place the scorer corrects it, so a correct answer is never relabelled a refusal.
    """
    if extraction.outcome is Outcome.ABSTAINED and extraction.prediction is not None \
            and em(extraction.prediction, golds) == 1.0:
        return extraction._replace(outcome=Outcome.ANSWERED)
    return extraction


def with_stated_confidence(extraction: Extraction) -> Extraction:
    """Split the stated confidence off the extracted answer; the outcome is decided on the answer alone.

    Stopped and tagless episodes keep their outcome (an empty answer left once the confidence
    is taken away is classified as an empty answer in a plain run is).
    """
    if extraction.prediction is None:
        return extraction._replace(confidence=None, confidence_status="missing")
    stated = split_confidence(extraction.prediction)
    outcome = extraction.outcome
    if outcome in (Outcome.ANSWERED, Outcome.ABSTAINED):
        outcome = _classify(stated.answer)
    return extraction._replace(prediction=stated.answer, outcome=outcome,
                               confidence=stated.confidence, confidence_status=stated.status)


def resolve_trace(trace: Trace, *, compat: str | None = None, golds: Golds | None = None,
                  stated_confidence: bool = False) -> Extraction:
    """The scored prediction and outcome of one recorded episode (never calls the agent).

    Stopped episodes (budget, endpoint or tool error) keep their outcome and score
    nothing. A response using answer tags is re-extracted from the raw text; an
    agent that reports its answer another way (function calling) is taken at
    its recorded ``prediction``. With ``compat="searchr1"`` the scored string is
    Search-R1's prompt+response extraction whatever the outcome. With ``golds``
    the outcome is settled against them (:func:`settle`). ``stated_confidence`` (the
    run's prompt asked for one) splits it off the answer first (:func:`with_stated_confidence`).
    """
    extraction = _resolve_trace(trace, compat=compat)
    if stated_confidence:
        extraction = with_stated_confidence(extraction)
    return extraction if golds is None else settle(extraction, golds)


def _resolve_trace(trace: Trace, *, compat: str | None) -> Extraction:
    check_compat(compat)
    if compat == "aethersearch":
        answer = check_trajectory(trace_actions(trace).actions).answer
        own = extract_answer(trace.response)
        return Extraction(answer, trace.outcome if trace.outcome in _STOPPED else own.outcome, own.matches)
    if compat == "searchr1":
        scored = extract_searchr1(searchr1_prompt(trace.question_seen), trace.response)
        if trace.outcome in _STOPPED:
            return Extraction(scored, trace.outcome, 0)
        own = extract_answer(trace.response)
        return Extraction(scored, own.outcome, own.matches)
    if trace.outcome in _STOPPED:
        return Extraction(None, trace.outcome, 0)
    if "<answer>" in INFORMATION_BLOCK.sub("", trace.response):
        return extract_answer(trace.response)
    if trace.prediction is not None:
        return Extraction(trace.prediction, _classify(trace.prediction), 0)
    return Extraction(None, Outcome.NO_ANSWER_TAG, 0)


def resolve_prediction(prediction: str | None, outcome: Outcome) -> Extraction:
    """The scored form of a ``predictions.jsonl`` row: stopped or tagless rows score nothing."""
    if prediction is None or outcome in _STOPPED or outcome is Outcome.NO_ANSWER_TAG:
        # "answered" without a prediction is a runner inconsistency: count it as no answer.
        return Extraction(None, Outcome.NO_ANSWER_TAG if outcome is Outcome.ANSWERED else outcome, 0)
    if outcome is Outcome.ABSTAINED:
        return Extraction(prediction, Outcome.ABSTAINED, 0)
    return Extraction(prediction, _classify(prediction), 0)
