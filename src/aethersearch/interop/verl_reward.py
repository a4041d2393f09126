"""A verl reward function backed by the project's scorer: the same rule inside training and after it.

Point verl at it with ``custom_reward_function.path=<this file>`` and
``custom_reward_function.name=compute_score``. verl's reward manager
(``verl/workers/reward_manager/naive.py``) calls
``compute_score(data_source=..., solution_str=<decoded response>, ground_truth=
reward_model["ground_truth"], extra_info=extra_info)`` once per sample; a dict
return must carry ``"score"`` (the reward) and the same keys for every sample:
numeric ones become ``val-aux/{data_source}/{key}/mean@N`` metrics, strings are
dumped with the validation generations (verl skips them in metrics).

The scoring path is exactly ``aether score``'s: the response is taken as a trace's
raw response, resolved by ``scoring.extract.resolve_trace`` (last ``<answer>``
span; no tag, or an abstention, is its own outcome) and scored by
``scoring.api.score_row`` (only an ``answered`` prediction can score). Nothing is
re-implemented here, so the reward and a later ``aether score`` of the imported
run agree on every row. The reward is Search-R1's: exact match (0/1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aethersearch.records import Outcome, Trace
from aethersearch.scoring.api import score_row
from aethersearch.scoring.extract import resolve_trace
from aethersearch.scoring.join import JoinedRow

__all__ = ["AGENT", "REWARD_METRIC", "ROW_KEY", "compute_score", "golds_of", "response_trace", "score_response"]

AGENT = "verl"
REWARD_METRIC = "em"
#: Keys every sample's dict carries (verl requires the same keys across a batch).
ROW_KEY, OUTCOME_KEY, PREDICTION_KEY = "aether_row_id", "aether_outcome", "aether_prediction"


def golds_of(ground_truth: Any) -> list[str]:
    """Gold aliases from whatever verl hands over: ``{"target": [...]}``, a list, a numpy array or a string."""
    if isinstance(ground_truth, Mapping):
        ground_truth = ground_truth.get("target", ground_truth.get("answers", []))
    if isinstance(ground_truth, str):
        return [ground_truth]
    if isinstance(ground_truth, Iterable):
        return [str(value) for value in ground_truth]
    return [str(ground_truth)]


def response_trace(row_id: str, question: str, response: str) -> Trace:
    """A generation as a recorded trace: its outcome and prediction resolved by the scorer's own rule."""
    raw = Trace(id=row_id, question_seen=question, agent=AGENT, response=response, outcome=Outcome.ANSWERED,
                stop_reason="end")
    extraction = resolve_trace(raw)
    return raw.model_copy(update={"prediction": extraction.prediction, "outcome": extraction.outcome})


def score_response(response: str, golds: list[str], *, row_id: str = "", question: str = "",
                   source: str = "") -> tuple[Trace, dict[str, float]]:
    """The trace of one generation and its metric values, exactly as ``aether score`` would compute them."""
    trace = response_trace(row_id, question, response)
    extraction = resolve_trace(trace, golds=golds)  # gold wins over a refusal-shaped answer, as in the join
    trace = trace.model_copy(update={"outcome": extraction.outcome})
    row = JoinedRow(id=row_id, source=source, question=question, golds=golds, prediction=extraction.prediction,
                    outcome=extraction.outcome.value, present=True, usage=None)
    return trace, score_row(row, compat=None)


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **_: Any) -> dict[str, Any]:
    """verl's custom reward: ``{"score": EM, "em", "f1", "answered", "aether_row_id", ...}`` for one sample."""
    info = extra_info if isinstance(extra_info, Mapping) else {}
    row_id = str(info.get("row_id") or "")
    trace, values = score_response(solution_str, golds_of(ground_truth), row_id=row_id,
                                   question=str(info.get("question") or ""), source=str(data_source))
    return {
        "score": values[REWARD_METRIC],
        "em": values["em"],
        "f1": values["f1"],
        "answered": 1.0 if trace.outcome is Outcome.ANSWERED else 0.0,
        ROW_KEY: row_id,
        OUTCOME_KEY: trace.outcome.value,
        PREDICTION_KEY: trace.prediction or "",
    }
