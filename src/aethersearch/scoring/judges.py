"""Scoring a run with one or more LLM judges: per-sample verdicts, errors out of the denominator, agreement.

Why a module apart from ``judge`` (the client): this is where a verdict becomes a figure,
and where the rules that keep a judge honest live:

* **The judge is not the model under test.** A judge whose model is the run's model grades
  its own answers (inspect_evals' BrowseComp does so by default); it is refused unless the
  caller says ``allow_self`` (``--judge-self``), and ``scores.json`` records the choice.
* **Failures are never grades.** Each rollout row that was answered is judged; a judge error
  leaves that row out of the judge's metric, a question whose every sample errored leaves
  the question out of its denominator, and the summary counts them. Rows that were not
  answered (abstained, agent errors) are not sent: they are ``not_attempted`` by rule and
  score 0, as in EM.
* **K samples** are judged one by one and reduced like EM (mean@K, and pass@k / maj@K when
  every sample got a verdict).
* **Two or more judges** each give their own metric (the first ``judge``, the others
  ``judge:<name>``) and are compared: Cohen's kappa between every two and against EM, the
  paired delta of their scores with a bootstrap CI, and the ids where they disagree.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from aethersearch.errors import ConfigError
from aethersearch.records import Outcome, RunFingerprint
from aethersearch.scoring.judge import JudgeCase, JudgeConfig, Verdict, disagreement_table, judge_cases
from aethersearch.scoring.scores_file import QuestionScore

__all__ = ["ERROR", "JUDGE_METRIC", "JudgedRun", "agreement", "apply_to_questions", "check_not_self", "cohen_kappa",
    "is_judge_metric", "judge_rows", "judge_summaries", "metric_key", "reducible"]

#: the metric key of the first judge; the others are ``judge:<name>``
JUDGE_METRIC = "judge"
ERROR = "error"


def is_judge_metric(metric: str) -> bool:
    """A judge's metric: 0/1 per sample (correct or not), reduced like EM (pass@k, maj@K)."""
    return metric == JUDGE_METRIC or metric.startswith(JUDGE_METRIC + ":")


def metric_key(index: int, config: JudgeConfig) -> str:
    """``judge`` for the first judge (the key every table and report already reads), ``judge:<name>`` after it."""
    return JUDGE_METRIC if index == 0 else f"{JUDGE_METRIC}:{config.label}"


def _same_model(a: str | None, b: str | None) -> bool:
    def norm(name: str) -> str:
        return name.strip().rstrip("/").rsplit("/", 1)[-1].casefold()
    return bool(a) and bool(b) and norm(str(a)) == norm(str(b))


def check_not_self(judges: Sequence[JudgeConfig], fingerprint: RunFingerprint | None, *, allow_self: bool) -> None:
    """Refuse a judge whose model is the run's model (its own grader) unless ``allow_self``."""
    if allow_self or fingerprint is None:
        return
    for judge in judges:
        served = (fingerprint.served_model or {}).get("id")
        models = (fingerprint.model, served if isinstance(served, str) else None)
        if any(_same_model(judge.model, model) for model in models):
            raise ConfigError(f"judge {judge.label!r} is the model under test ({judge.model!r}): it would grade "
                              "its own answers",
                              fix="pass a judge on another model (--judge URL --judge-model M), or --judge-self to "
                                  "judge with the model under test anyway (recorded in scores.json)")


class JudgedRun(NamedTuple):
    """Per judge, each rollout row's verdict (``error`` where the judge gave none) and its summary."""

    verdicts: list[list[str]]
    """[judge][row] verdict: correct / incorrect / not_attempted / error."""
    replies: list[dict[str, Verdict]]
    """[judge] {row key: the judge's reply}, for the rows that were sent."""
    summaries: list[dict[str, Any]]


def _row_key(row: Any) -> str:
    return f"{row.id}#{row.sample}"


def judge_rows(rows: Sequence[Any], judges: Sequence[JudgeConfig], run_dir: Path) -> JudgedRun:
    """Ask every judge about every answered rollout row (cache first); not-answered rows are not_attempted."""
    sent = [row for row in rows if row.prediction is not None and row.outcome == Outcome.ANSWERED.value]
    cases = [JudgeCase(_row_key(r), r.question, r.golds, r.prediction or "") for r in sent]
    verdicts, replies, summaries = [], [], []
    for index, judge in enumerate(judges):
        if judge.cache_path is None:
            judge = judge.model_copy(update={"cache_path": Path(run_dir) / "judge_cache.jsonl"})
        found = judge_cases(cases, judge)
        per_row = []
        for row in rows:
            verdict = found.get(_row_key(row))
            per_row.append("not_attempted" if verdict is None else (verdict.verdict or ERROR))
        verdicts.append(per_row)
        replies.append(found)
        errors = {key: v.error for key, v in found.items() if v.error}
        tokens = {field: sum(int((v.usage or {}).get(field, 0)) for v in found.values())
                  for field in ("prompt_tokens", "completion_tokens")}
        summaries.append({**judge.contract(), "name": judge.label, "metric": metric_key(index, judge),
                          "judged": len(cases), "cached": sum(v.cached for v in found.values()),
                          "errors": errors, "error_count": len(errors), "tokens": tokens})
    return JudgedRun(verdicts, replies, summaries)


def _value(verdict: str) -> float | None:
    return None if verdict == ERROR else (1.0 if verdict == "correct" else 0.0)


def apply_to_questions(scored: list[QuestionScore], rows: Sequence[Any], flat: list[dict[str, Any]],
                       judged: JudgedRun, samples: int) -> list[QuestionScore]:
    """Put each judge's values into the rollout rows (``flat``) and the question rows; errors stay out.

    A question's judge value is the mean over its samples that got a verdict; with none it has no
    value for that judge (left out of the judge's denominator). ``judge_verdicts`` keeps each judge's
    verdict of the question's lead sample, and ``judge_replies`` the judge's raw reply.
    """
    metrics = [summary["metric"] for summary in judged.summaries]
    for j, metric in enumerate(metrics):
        for i, verdict in enumerate(judged.verdicts[j]):
            value = _value(verdict)
            if value is not None:
                flat[i][metric] = value
    out = []
    for q_index, question in enumerate(scored):
        start = q_index * samples
        values = dict(question.values)
        verdicts: dict[str, str] = {}
        replies: dict[str, str] = {}
        kept = list(question.samples)
        for j, (metric, summary) in enumerate(zip(metrics, judged.summaries, strict=True)):
            got = [_value(judged.verdicts[j][start + k]) for k in range(samples)]
            usable = [v for v in got if v is not None]
            if usable:
                values[metric] = float(np.mean(usable))
            lead = start + (question.majority_sample if samples > 1 else 0)
            verdicts[summary["name"]] = judged.verdicts[j][lead]
            reply = judged.replies[j].get(_row_key(rows[lead]))
            if reply is not None and reply.reply is not None:
                replies[summary["name"]] = reply.reply
            if samples > 1:
                kept = [s.model_copy(update={"values": {**s.values, metric: got[k]}}) if got[k] is not None else s
                        for k, s in enumerate(kept)]
        correct = dict(question.correct)
        majority = dict(question.majority)
        if samples == 1:
            for metric in metrics:
                if metric in values:
                    correct[metric], majority[metric] = int(values[metric] == 1.0), values[metric]
        else:
            for metric in metrics:
                sample_values = [s.values.get(metric) for s in kept]
                if all(v is not None for v in sample_values):  # reducers only where every sample has a verdict
                    correct[metric] = int(sum(v == 1.0 for v in sample_values))
                    majority[metric] = float(sample_values[question.majority_sample] or 0.0)
        first = verdicts.get(judged.summaries[0]["name"]) if judged.summaries else None
        out.append(question.model_copy(update={
            "values": values, "judge_verdict": first, "judge_verdicts": verdicts, "judge_replies": replies,
            "samples": kept if samples > 1 else [],
            "correct": correct, "majority": majority}))
    return out


def reducible(scored: Sequence[QuestionScore], metric: str) -> bool:
    """True when every question has ``metric`` in every sample (the K-sample reducers are then defined)."""
    return all(metric in q.values and (not q.samples or all(s.values.get(metric) is not None for s in q.samples))
               for q in scored)


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' yes/no calls on the same items: (p_o - p_e) / (1 - p_e) (Cohen, 1960).

    None with no items, or when both raters are constant and agree (kappa is undefined: 0/0).
    """
    n = len(a)
    if n == 0:
        return None
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    observed = float(np.mean(x == y))
    expected = float(x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean()))
    if expected == 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def judge_summaries(scored: Sequence[QuestionScore], judged: JudgedRun) -> list[dict[str, Any]]:
    """Each judge's summary with its EM-vs-verdict table and its kappa against EM."""
    out = []
    for summary in judged.summaries:
        name = summary["name"]
        verdicts = {q.id: Verdict(None if q.judge_verdicts.get(name) == ERROR else q.judge_verdicts.get(name),
                                  False, None) for q in scored if name in q.judge_verdicts}
        em = {q.id: q.values.get("em", 0.0) for q in scored}
        both = [q for q in scored if summary["metric"] in q.values]
        kappa = cohen_kappa([q.values[summary["metric"]] >= 0.5 for q in both], [em[q.id] >= 0.5 for q in both])
        out.append({**summary, "disagreement": disagreement_table(em, verdicts), "kappa_vs_em": kappa,
                    "questions_scored": len(both), "questions_without_verdict": len(scored) - len(both)})
    return out


def agreement(scored: Sequence[QuestionScore], summaries: Sequence[Mapping[str, Any]], *, resamples: int,
              seed: int) -> list[dict[str, Any]]:
    """Every two judges: kappa, the paired delta of their scores (b - a) with a 95% CI, and where they disagree.

    Over the questions both judges scored (a judge error on either side leaves the question out).
    """
    from aethersearch.scoring.aggregate import estimate

    pairs = []
    for a, b in itertools.combinations(summaries, 2):
        both = [q for q in scored if a["metric"] in q.values and b["metric"] in q.values]
        va = np.array([q.values[a["metric"]] for q in both])
        vb = np.array([q.values[b["metric"]] for q in both])
        delta = estimate(vb - va, resamples=resamples, seed=seed, name=f"judges/{a['name']}/{b['name']}")
        pairs.append({"a": a["name"], "b": b["name"], "n": len(both),
                      "kappa": cohen_kappa(list(va >= 0.5), list(vb >= 0.5)),
                      "a_mean": float(va.mean()) if len(both) else None,
                      "b_mean": float(vb.mean()) if len(both) else None,
                      "delta": delta.mean if len(both) else None,
                      "ci_low": delta.ci_low if len(both) else None, "ci_high": delta.ci_high if len(both) else None,
                      "disagree": [q.id for q, x, y in zip(both, va, vb, strict=True) if (x >= 0.5) != (y >= 0.5)]})
    return pairs
