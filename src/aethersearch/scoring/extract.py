"""Answer extraction from raw responses, with a distinct outcome for every way an episode can end.

Why: "no answer tag", "budget exhausted" and "endpoint error" are not wrong
answers; folding them into accuracy hides whether a checkpoint got worse at
answering or at following the protocol. Every prediction therefore carries an
``Outcome`` and only ``answered`` is a real attempt.

Two extraction rules:

* default: the answer is the *last* ``<answer>...</answer>`` span of the response
  (DOTALL, stripped), as DESIGN.md specifies.
* ``compat="searchr1"``: Search-R1's ``extract_solution`` scans the decoded
  *prompt + response* and returns the last match only when there are at least
  two matches. Its prompt already contains two spans (``<answer> and </answer>``
  and the example ``<answer> Beijing </answer>``), so a response without a tag
  is scored as the answer "Beijing". Reproducing that quirk is the point of the
  flag: numbers then match the published ones. The outcome still says
  ``no_answer_tag``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from aethersearch.errors import ConfigError
from aethersearch.records import Outcome, Trace
from aethersearch.text import normalize_answer

ANSWER_SPAN = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)

COMPAT_MODES: tuple[str, ...] = ("searchr1",)

SEARCHR1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
    "you get new information. After reasoning, if you find you lack some knowledge, you can call a search "
    "engine by <search> query </search> and it will return the top searched results between <information> "
    "and </information>. You can search as many times as your want. If you find no further external "
    "knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)
"""Search-R1's user prompt (DESIGN.md), needed only to reproduce its prompt+response scan."""

_ABSTAIN = re.compile(
    r"^(?:i\s+)?(?:do\s*not|dont|cannot|cant|can\s*not|am\s+unable\s+to|am\s+not\s+able\s+to)\s+"
    r"(?:know|answer|determine|find|say|tell|be\s+determined)\b.*"
    r"|^(?:unknown|unanswerable|no\s+answer|none\s+found|not\s+sure|insufficient\s+(?:information|evidence)"
    r"|not\s+enough\s+(?:information|evidence)|information\s+not\s+(?:available|found))$"
)

_STOPPED = frozenset({Outcome.BUDGET, Outcome.ENDPOINT_ERROR, Outcome.TOOL_ERROR})


class Extraction(NamedTuple):
    """What the scorer scores for one episode: the prediction string (or None) and its outcome."""

    prediction: str | None
    outcome: Outcome
    matches: int


def is_abstention(answer: str) -> bool:
    """True when an answer is an explicit refusal ("I don't know", "unknown", "insufficient information")."""
    return bool(_ABSTAIN.match(normalize_answer(answer)))


def check_compat(compat: str | None) -> None:
    """Refuse an unknown compatibility mode up front, naming the valid ones."""
    if compat is not None and compat not in COMPAT_MODES:
        raise ConfigError(f"unknown --compat mode {compat!r}", fix=f"use one of: {', '.join(COMPAT_MODES)}")


def _classify(answer: str) -> Outcome:
    return Outcome.ABSTAINED if is_abstention(answer) else Outcome.ANSWERED


def extract_answer(response: str) -> Extraction:
    """Default rule: the last ``<answer>`` span of ``response``; none -> ``no_answer_tag``."""
    found = ANSWER_SPAN.findall(response)
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


def resolve_trace(trace: Trace, *, compat: str | None = None) -> Extraction:
    """The scored prediction and outcome of one recorded episode (never calls the agent).

    Stopped episodes (budget, endpoint or tool error) keep their outcome and score
    nothing. A response using answer tags is re-extracted from the raw text; an
    agent that reports its answer another way (function calling) is taken at
    its recorded ``prediction``. With ``compat="searchr1"`` the scored string is
    Search-R1's prompt+response extraction whatever the outcome.
    """
    check_compat(compat)
    if compat == "searchr1":
        scored = extract_searchr1(searchr1_prompt(trace.question_seen), trace.response)
        if trace.outcome in _STOPPED:
            return Extraction(scored, trace.outcome, 0)
        own = extract_answer(trace.response)
        return Extraction(scored, own.outcome, own.matches)
    if trace.outcome in _STOPPED:
        return Extraction(None, trace.outcome, 0)
    if "<answer>" in trace.response:
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
