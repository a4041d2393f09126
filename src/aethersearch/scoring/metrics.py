"""Answer metrics: pure ``(prediction, golds) -> float`` functions, one per published definition.

Why each exists and where it comes from:

* ``em`` / ``subem``: Search-R1's ``qa_em`` reward (``em_check`` / ``subem_check``).
  Normalise (lower -> delete ASCII punctuation -> drop ``a/an/the`` -> collapse
  whitespace); EM = some gold equals the prediction, sub-EM = some gold is a
  substring of the prediction (character substring, as Search-R1 does, so
  ``"1972"`` matches ``"december 1972"``).
* ``squad_em`` / ``f1``: SQuAD v1.1 ``evaluate-v1.1.py`` (exact match and token F1
  over the multiset of normalised tokens, max over golds). ``squad_em`` equals
  ``em`` by construction (same normalisation); it is kept as its own name so a
  table says which definition it reports.
* ``cover_em``: every token of some normalised gold occurs among the prediction's
  tokens (multiplicity respected: ``"new york new york"`` needs both pairs), order
  free. Lenient to extra words, strict about missing ones.
* ``popqa_acc``: PopQA's containment accuracy on the *raw* strings: some gold
  ``a`` with ``a``, ``a.lower()`` or ``a.capitalize()`` a substring of the
  prediction (the authors' ``run_model.py`` rule, no normalisation).

Golds are a sequence of aliases *or a single gold string*, as Search-R1's
``em_check`` and FlashRAG accept (``em("Paris", "Paris")`` is 1.0; a bare string
is never iterated character by character). Anything else (bytes, a mapping, a
number, a list holding a non-string) raises ``TypeError`` naming what was
passed: a silent 0 would look like a score. A ``None`` prediction (no answer at
all) scores 0 everywhere; an empty string is scored exactly as the published
code scores it. A missing answer's *outcome*
(no answer tag, budget, endpoint error...) is reported separately.
Averaging never happens here; it lives in ``aggregate.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from aethersearch.text import normalize_answer

__all__ = [
    "ABSTENTION_AWARE",
    "ALL_METRICS",
    "BINARY_METRICS",
    "Golds",
    "METRICS",
    "cover_em",
    "em",
    "f1",
    "gold_list",
    "popqa_acc",
    "score_all",
    "squad_em",
    "subem",
]


Golds = str | Sequence[str]
"""One gold string or a sequence of gold aliases."""

Metric = Callable[[str | None, Golds], float]


def gold_list(golds: Golds | Iterable[str]) -> Sequence[str]:
    """``golds`` as a sequence of aliases: a bare string is one alias; anything not made of strings is refused.

    Why strict: iterating a string scores it character by character and a list
    holding ``None`` crashes deep inside the normaliser; both must fail here,
    saying what was passed. Iterables of strings (tuples, numpy string arrays
    as verl passes them) are accepted.
    """
    if isinstance(golds, str):
        return (golds,)
    if type(golds) is list or type(golds) is tuple:
        items: Sequence[object] = golds
    elif isinstance(golds, (bytes, bytearray, Mapping)) or not isinstance(golds, Iterable):
        raise TypeError(f"golds must be a str or a sequence of str, not {type(golds).__name__}: {golds!r:.80}")
    else:
        items = list(golds)
    for index, gold in enumerate(items):
        if not isinstance(gold, str):
            raise TypeError(f"golds[{index}] must be a str, not {type(gold).__name__}: {gold!r:.80}")
    return items  # type: ignore[return-value]  # every item was checked to be a str


def _prediction(prediction: object) -> str | None:
    if prediction is None or isinstance(prediction, str):
        return prediction
    raise TypeError(f"prediction must be a str or None, not {type(prediction).__name__}: {prediction!r:.80}")


def em(prediction: str | None, golds: Golds) -> float:
    """Search-R1 ``em_check``: 1.0 when the normalised prediction equals some normalised gold."""
    prediction, golds = _prediction(prediction), gold_list(golds)
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return 1.0 if any(normalize_answer(gold) == pred for gold in golds) else 0.0


def subem(prediction: str | None, golds: Golds) -> float:
    """Search-R1 ``subem_check``: 1.0 when some normalised gold is a substring of the normalised prediction."""
    prediction, golds = _prediction(prediction), gold_list(golds)
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return 1.0 if any(normalize_answer(gold) in pred for gold in golds) else 0.0


def squad_em(prediction: str | None, golds: Golds) -> float:
    """SQuAD v1.1 ``exact_match_score`` maximised over golds (same normalisation as ``em``)."""
    prediction, golds = _prediction(prediction), gold_list(golds)
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return max((1.0 if normalize_answer(gold) == pred else 0.0 for gold in golds), default=0.0)


def _token_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def f1(prediction: str | None, golds: Golds) -> float:
    """SQuAD v1.1 token F1 (multiset overlap of normalised tokens), maximised over golds."""
    prediction, golds = _prediction(prediction), gold_list(golds)
    if prediction is None:
        return 0.0
    pred_tokens = normalize_answer(prediction).split()
    return max((_token_f1(pred_tokens, normalize_answer(gold).split()) for gold in golds), default=0.0)


def cover_em(prediction: str | None, golds: Golds) -> float:
    """1.0 when every token of some normalised gold is among the prediction's tokens (with multiplicity)."""
    prediction, golds = _prediction(prediction), gold_list(golds)
    if prediction is None:
        return 0.0
    pred_counts = Counter(normalize_answer(prediction).split())
    for gold in golds:
        gold_counts = Counter(normalize_answer(gold).split())
        if gold_counts and not (gold_counts - pred_counts):
            return 1.0
    return 0.0


def popqa_acc(prediction: str | None, golds: Golds) -> float:
    """PopQA containment accuracy: some gold (as is, lower-cased or capitalised) occurs in the raw prediction."""
    prediction, golds = _prediction(prediction), gold_list(golds)
    if prediction is None:
        return 0.0
    return _popqa(prediction, golds)


def _popqa(prediction: str, golds: Sequence[str]) -> float:
    for gold in golds:
        if not gold:
            continue
        if gold in prediction or gold.lower() in prediction or gold.capitalize() in prediction:
            return 1.0
    return 0.0


METRICS: dict[str, Metric] = {
    "em": em,
    "subem": subem,
    "squad_em": squad_em,
    "f1": f1,
    "cover_em": cover_em,
    "popqa_acc": popqa_acc,
}
"""Every answer metric by name, in the order tables show them."""

ABSTENTION_AWARE: dict[str, str] = {f"{name}_answered": name for name in ("subem", "f1", "cover_em", "popqa_acc")}
"""Abstention-aware twins of the lenient metrics: the same value on an ``answered`` question, 0 on an abstention.

Why separate names: Search-R1's ``qa_em`` gives "I don't know" sub-EM 1 against
gold "No"; ``subem`` must stay equal to Search-R1's number, so the figure that
does not reward refusals is reported beside it, never instead of it. (EM needs
no twin: an answer with EM 1 is never an abstention, see ``abstention.py``.)
"""

ALL_METRICS: tuple[str, ...] = (*METRICS, *ABSTENTION_AWARE)
"""Every per-question value ``score_run`` records, in table order."""

BINARY_METRICS: frozenset[str] = frozenset({"em", "subem", "squad_em", "cover_em", "popqa_acc", "subem_answered",
                                            "cover_em_answered", "popqa_acc_answered"})
"""Metrics whose per-question value is 0 or 1 (compared with McNemar; F1 gets a paired bootstrap)."""


def score_all(prediction: str | None, golds: Golds) -> dict[str, float]:
    """Every metric of one prediction, normalising the prediction and each gold once (the hot path).

    Equal, case by case, to calling each named metric (a test checks it); the
    token overlap avoids building a Counter per gold when the gold's tokens are
    distinct (the usual case), where the multiset overlap is a membership count.
    """
    prediction, golds = _prediction(prediction), gold_list(golds)
    if prediction is None:
        return dict.fromkeys(METRICS, 0.0)
    pred_norm = normalize_answer(prediction)
    pred_tokens = pred_norm.split()
    pred_counts = Counter(pred_tokens)
    n_pred = len(pred_tokens)
    out_em = out_sub = out_cover = out_f1 = 0.0
    for gold in golds:
        gold_norm = normalize_answer(gold)
        if gold_norm == pred_norm:
            out_em = 1.0
        if gold_norm in pred_norm:
            out_sub = 1.0
        gold_tokens = gold_norm.split()
        n_gold = len(gold_tokens)
        if not n_gold:
            continue
        if len(set(gold_tokens)) == n_gold:
            same = sum(1 for token in gold_tokens if token in pred_counts)
            covered = same == n_gold
        else:
            gold_counts = Counter(gold_tokens)
            same = sum(min(count, pred_counts.get(token, 0)) for token, count in gold_counts.items())
            covered = same == n_gold
        if covered:
            out_cover = 1.0
        if same and out_f1 < 1.0:
            precision = same / n_pred
            recall = same / n_gold
            out_f1 = max(out_f1, (2 * precision * recall) / (precision + recall))
    return {
        "em": out_em,
        "subem": out_sub,
        "squad_em": out_em,
        "f1": out_f1,
        "cover_em": out_cover,
        "popqa_acc": _popqa(prediction, golds),
    }
