"""Accuracy against budget, read from one high-budget run: what the same checkpoint scores with fewer tool calls or tokens.

Why it can be read off one run: the runner records, per question, how many tool
calls and completion tokens the episode spent before it ended. For an agent whose
prompt does not state the budget, everything the agent does before it reaches a
smaller budget ``b`` is what it would do in a rerun with budget ``b``; so a
question that ended having spent at most ``b`` keeps its outcome and score, and a
question that spent more would have run out of budget there. Published numbers
disagree partly because budgets differ (Search-R1 issues #42 and #100: 2 vs 4
turns), so one run gives the whole curve instead of a single point.

Conventions (this project's, named ``budget_curve``):

* A question that would have run out at ``b`` counts as **budget-exhausted**, never
  as wrong. It adds 0 to the accuracy (the denominator stays every release question,
  as in ``scores.json``) and is counted in ``exhausted`` beside ``correct``, ``wrong``
  (answered, not correct) and ``not_answered`` (within ``b`` but the episode ended
  without an answer of its own: a refusal, no answer tag, or its turn limit).
  A rerun would give it one forced final answer (``rollout/budget.py``), which the
  run never made at ``b``; so the curve is a lower bound below the run's own budget,
  and the gap to real reruns is measured (``benchmarks/budget_curve.py``).
* Error outcomes and missing rows stay errors at every budget.
* Axes: ``tool_calls`` (0 .. the run's ``max_tool_calls``, or the most any question
  used when unlimited) and ``completion_tokens`` (ten even steps up to the run's
  ``max_tokens``, or the most used). At the run's own budget the curve equals the
  run's score.
* Agents whose prompt states the budget (``Agent.states_budget``, e.g. EvidenceLoop's
  "Round r of R") are refused: their behaviour before ``b`` depends on the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aethersearch.errors import ConfigError
from aethersearch.records import ERROR_OUTCOMES, Outcome, RunFingerprint
from aethersearch.scoring.aggregate import DEFAULT_RESAMPLES, DEFAULT_SEED, estimate
from aethersearch.scoring.scores_file import QuestionScore

__all__ = ["AXES", "budget_curve", "refuse_budget_stating_agent"]

AXES = ("tool_calls", "completion_tokens")
TOKEN_STEPS = 10
_ERRORS = frozenset({*(o.value for o in ERROR_OUTCOMES), "missing"})


def refuse_budget_stating_agent(fingerprint: RunFingerprint | None) -> None:
    """Raise ConfigError when the run's agent states its budget in its prompt (the truncation would be wrong)."""
    if fingerprint is None:
        raise ConfigError("a budget curve needs the run's run.json (the agent and its budget)",
                          fix="score a run written by `aether run`, not hand-written predictions")
    from aethersearch.agents.base import AGENTS
    from aethersearch.registry import resolve

    agent_class = resolve("agent", fingerprint.agent, AGENTS)
    if agent_class.states_budget:
        raise ConfigError(
            f"agent {fingerprint.agent!r} states its budget in its prompt, so what it does before a smaller budget "
            "depends on the budget: a curve read from one run would be wrong",
            fix="rerun the agent at each budget you want (aether run --max-tool-calls N) and compare the runs")


def _spent(row: QuestionScore, axis: str) -> int:
    return int(getattr(row.usage, axis)) if row.usage is not None else 0


def _grid(rows: Sequence[QuestionScore], axis: str, limit: int | None) -> list[int]:
    top = limit if limit is not None else max((_spent(r, axis) for r in rows), default=0)
    if axis == "tool_calls":
        return list(range(0, top + 1))
    return sorted({int(round(top * step / TOKEN_STEPS)) for step in range(1, TOKEN_STEPS + 1)})


def budget_curve(rows: Sequence[QuestionScore], fingerprint: RunFingerprint | None, *,
                 metrics: Sequence[str] = ("em", "f1"), resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The ``budget_curve`` section of ``scores.json``: per axis, one point per budget up to the run's own."""
    refuse_budget_stating_agent(fingerprint)
    assert fingerprint is not None
    if any(r.k > 1 for r in rows):
        raise ConfigError("a budget curve reads each episode's spending, but this run has K > 1 samples per question "
                          "(the scored rows sum their usage)", fix="score a one-sample run with --budget-curve")
    limits = {"tool_calls": fingerprint.budget.max_tool_calls, "completion_tokens": fingerprint.budget.max_tokens}
    axes: dict[str, Any] = {}
    for axis in AXES:
        points = []
        spent = np.array([_spent(r, axis) for r in rows])
        errors = np.array([r.outcome in _ERRORS for r in rows])
        for budget in _grid(rows, axis, limits[axis]):
            within = (spent <= budget) & ~errors
            point: dict[str, Any] = {"budget": budget, "n": len(rows), "errors": int(errors.sum()),
                                     "exhausted": int((~within & ~errors).sum())}
            for metric in metrics:
                values = np.array([r.values.get(metric, 0.0) for r in rows]) * within
                found = estimate(values, resamples=resamples, seed=seed, name=f"budget/{axis}/{budget}/{metric}")
                point[metric] = found.as_dict()
            correct = np.array([r.values.get(metrics[0], 0.0) for r in rows]) * within
            answered = np.array([r.outcome == Outcome.ANSWERED.value for r in rows]) & within
            point["correct"] = int((correct > 0).sum())
            point["wrong"] = int((answered & (correct <= 0)).sum())
            # within the budget but ended without an answer (refusal, no tag, its own budget): never "wrong"
            point["not_answered"] = int(within.sum()) - point["correct"] - point["wrong"]
            points.append(point)
        axes[axis] = {"limit": limits[axis], "points": points}
    return {"convention": "budget_curve: a question that spent more than b counts as budget-exhausted (0, never "
                          "wrong); errors stay errors; lower bound below the run's budget (no forced final answer)",
            "agent": fingerprint.agent, "metrics": list(metrics), "axes": axes}
