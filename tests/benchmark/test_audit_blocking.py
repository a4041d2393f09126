"""The pool audit's n-gram blocking, measured for recall against the exhaustive cdist.

Stated recall (k=8 rarest 4-grams, fuzz.ratio >= 95): 1.000 on 300 real NQ dev
questions + 300 one-or-two-character edits of real training questions against
~27k real training keys (306 true pairs); >= 0.99 is asserted. The synthetic
test asserts the same bound where the real data is absent.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from aethersearch.audit.blocking import blocked_similarity, build_gram_index
from aethersearch.audit.similarity import exhaustive_similarity
from aethersearch.text import question_key
from tests.conftest import require_shared


def _edit(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(text))
        c = rng.choice(string.ascii_lowercase)
        text = [text[:i] + c + text[i + 1:], text[:i] + c + text[i:], text[:i] + text[i + 1:]][rng.randrange(3)]
    return text


def _recall(queries: list[str], training: list[str], threshold: float = 95.0) -> tuple[float, int, bool]:
    exhaustive = exhaustive_similarity(queries, training, threshold=threshold)
    blocked = blocked_similarity(queries, build_gram_index(training), training, threshold=threshold, k=8)
    truth = set(zip(exhaustive.query_index.tolist(), exhaustive.choice_index.tolist(), strict=True))
    found = set(zip(blocked.query_index.tolist(), blocked.choice_index.tolist(), strict=True))
    return len(truth & found) / max(1, len(truth)), len(truth), found <= truth


def test_blocking_recall_on_synthetic_questions() -> None:
    rng = random.Random(3)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(3000)]
    heads = ["who wrote", "when was", "where is", "which film starred", "how many"]
    training = sorted({f"{rng.choice(heads)} {' '.join(rng.choices(words, k=rng.randint(3, 7)))}"
                       for _ in range(6000)})
    queries = [_edit(q, rng) for q in rng.sample(training, 200)] + [
        f"{rng.choice(heads)} {' '.join(rng.choices(words, k=5))}" for _ in range(200)]
    recall, true_pairs, exact = _recall(queries, training)
    assert true_pairs >= 150, "the sample must contain real near-duplicates to measure recall"
    assert exact, "blocking only proposes candidates; every reported pair is an exact-scored true pair"
    assert recall >= 0.99


@pytest.mark.realdata
def test_blocking_recall_on_real_questions() -> None:
    nq_train = require_shared("train/nq/topics.dpr.nq.dev.txt")
    musique = require_shared("train/musique/musique_ans_train_questions_and_answers.json")
    dev = require_shared("qa/nq_open/NQ-open.dev.jsonl")
    training = [line.split("\t")[0] for line in nq_train.read_text(encoding="utf-8").split("\n") if line]
    training += [row["question"] for row in json.loads(musique.read_text(encoding="utf-8"))]
    training = sorted({question_key(q) for q in training})
    held_out = [json.loads(line)["question"] for line in dev.read_text(encoding="utf-8").split("\n") if line]
    rng = random.Random(7)
    queries = [question_key(q) for q in rng.sample(held_out, 300)] + [_edit(q, rng) for q in rng.sample(training, 300)]
    recall, true_pairs, exact = _recall(queries, training)
    assert true_pairs >= 250 and exact
    assert recall >= 0.99
