"""Fidelity: our em/subem equal Search-R1's qa_em and our f1 equals SQuAD v1.1 on real questions.

The references below are independent re-implementations of the published code
(Search-R1 ``verl/utils/reward_score/qa_em.py``: ``normalize_answer``,
``em_check``, ``subem_check``; SQuAD ``evaluate-v1.1.py``: ``f1_score``,
``exact_match_score``, ``metric_max_over_ground_truths``), written here from the
published definitions and sharing no code with ``aethersearch``.
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from collections import Counter

import pytest

from aethersearch.scoring import metrics
from tests.conftest import require_shared


def ref_normalize(s: str) -> str:
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def ref_em_check(prediction: str, golden_answers: list[str]) -> int:
    normalized_prediction = ref_normalize(prediction)
    score = 0
    for golden_answer in golden_answers:
        if ref_normalize(golden_answer) == normalized_prediction:
            score = 1
            break
    return score


def ref_subem_check(prediction: str, golden_answers: list[str]) -> int:
    normalized_prediction = ref_normalize(prediction)
    score = 0
    for golden_answer in golden_answers:
        if ref_normalize(golden_answer) in normalized_prediction:
            score = 1
            break
    return score


def ref_f1_score(prediction: str, ground_truth: str) -> float:
    prediction_tokens = ref_normalize(prediction).split()
    ground_truth_tokens = ref_normalize(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def ref_exact_match_score(prediction: str, ground_truth: str) -> bool:
    return ref_normalize(prediction) == ref_normalize(ground_truth)


def ref_max_over_ground_truths(metric_fn, prediction: str, ground_truths: list[str]) -> float:
    return max(metric_fn(prediction, gt) for gt in ground_truths)


def adversarial(gold: str, other: str) -> list[str]:
    """Predictions that stress normalisation: case, punctuation, articles, unicode, extra words, partial spans."""
    words = gold.split()
    half = " ".join(words[: max(1, len(words) // 2)])
    variants = [
        gold, gold.upper(), gold.lower(), gold.title(), gold.swapcase(),
        f"{gold}.", f'"{gold}"', f"({gold})!", gold.replace(" ", ", "), gold.replace(" ", "-"),
        f"{gold}?!...", f"'{gold}'s", gold.replace(" ", "  \t "),
        f"the {gold}", f"The {gold}", f"a {gold}", f"An {gold}", f"{gold} the", f"theater {gold}",
        unicodedata.normalize("NFKD", gold), gold.replace(" ", "\u00a0"), f"\u201c{gold}\u201d",
        f"{gold}\u2014indeed", gold.replace("e", "\u00e9"), gold.upper().replace("SS", "\u1e9e"),
        "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in gold),
        f"It is {gold}", f"{gold}, I think", f"probably {gold} or {other}", f"{gold} {gold}",
        half, words[-1], gold[1:], gold[:-1], other, "", " ", "the", "a an the",
    ]
    return variants


def _cases(questions: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    cases = []
    for index, (_, golds) in enumerate(questions):
        other = questions[(index + 1) % len(questions)][1][0]
        for gold in golds[:3]:
            cases.extend((pred, golds) for pred in adversarial(gold, other))
    return cases


def _nq(limit: int) -> list[tuple[str, list[str]]]:
    path = require_shared("qa/nq_open/NQ-open.dev.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(r["question"], list(r["answer"])) for r in rows[:limit]]


def _hotpot(limit: int) -> list[tuple[str, list[str]]]:
    path = require_shared("qa/hotpotqa/hotpotqa_dev_questions_and_answers.json")
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [(r["question"], [r["answer"]]) for r in rows[:limit]]


@pytest.mark.realdata
@pytest.mark.parametrize("loader", [_nq, _hotpot], ids=["nq_open", "hotpotqa"])
def test_em_subem_f1_match_published_definitions_on_real_questions(loader) -> None:
    cases = _cases(loader(300))
    assert len(cases) > 10_000
    seen = Counter()
    for prediction, golds in cases:
        want_em = ref_em_check(prediction, golds)
        want_sub = ref_subem_check(prediction, golds)
        want_f1 = ref_max_over_ground_truths(ref_f1_score, prediction, golds)
        want_squad_em = ref_max_over_ground_truths(ref_exact_match_score, prediction, golds)
        assert metrics.em(prediction, golds) == want_em, (prediction, golds)
        assert metrics.subem(prediction, golds) == want_sub, (prediction, golds)
        assert metrics.f1(prediction, golds) == pytest.approx(want_f1, abs=0, rel=1e-12), (prediction, golds)
        assert metrics.squad_em(prediction, golds) == float(want_squad_em), (prediction, golds)
        fused = metrics.score_all(prediction, golds)
        assert (fused["em"], fused["subem"], fused["squad_em"]) == (want_em, want_sub, float(want_squad_em))
        assert fused["f1"] == pytest.approx(want_f1, abs=0, rel=1e-12)
        assert fused["cover_em"] == metrics.cover_em(prediction, golds), (prediction, golds)
        assert fused["popqa_acc"] == metrics.popqa_acc(prediction, golds), (prediction, golds)
        seen[(want_em, want_sub, 0.0 < want_f1 < 1.0)] += 1
    # The adversarial set must exercise every branch: exact hits, substring-only hits, partial F1, misses.
    assert seen[(1, 1, False)] and seen[(0, 1, True)] and seen[(0, 0, True)] and seen[(0, 0, False)]
