"""The human pass over constructed questions, in the benchmark audit's review form.

WebDetective ends construction with a person reading each question. The
decisions are a file under version control in exactly the form the
near-duplicate audit uses (``audit.review``), so ``aether review``
merges a filled-in template the same way:

    [{"pair": ["<question>", "<answer>"], "decision": "exclude" | "retain",
      "reason": "<why>", "decided_by": "review"}, ...]

``retain`` keeps the question, ``exclude`` drops it (counted as
``human_rejected``). Each build writes ``<release>.question_review.todo.json``
beside the release: every decision already made plus a ``TODO`` entry per
undecided question, with its chain and hop statements for the reader. The
manifest records who or what decided each released question
(``construction.review.decisions``): the review file's ``decided_by``, or
``construction (no human decision yet)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.audit.review import TODO, ReviewDecision, load_reviews, pair_key
from aethersearch.construct.hintfree import ConstructedQuestion
from aethersearch.jsonl import dumps_pretty

__all__ = ["ReviewOutcome", "TEMPLATE_NAME", "UNDECIDED", "apply_question_review"]

UNDECIDED = "construction (no human decision yet)"
TEMPLATE_NAME = "question_review.todo.json"


class ReviewOutcome(NamedTuple):
    """Questions kept, how many a person excluded, the per-question decisions and the template to write."""

    kept: list[ConstructedQuestion]
    excluded: int
    decisions: list[dict[str, Any]]
    template: bytes


def _key(question: ConstructedQuestion) -> tuple[str, str]:
    return pair_key(question.triple.question, question.triple.answers[0])


def apply_question_review(questions: Sequence[ConstructedQuestion], review_file: Path | None,
                          pages: Mapping[str, Any]) -> ReviewOutcome:
    """Apply the decisions of ``review_file`` (audit form; malformed entries are DataErrors naming them)."""
    decisions: Mapping[tuple[str, str], ReviewDecision] = load_reviews(review_file)
    kept: list[ConstructedQuestion] = []
    records: list[dict[str, Any]] = []
    template: list[dict[str, Any]] = [d.model_dump(mode="json") for d in decisions.values()]
    excluded = 0
    for q in questions:
        decision = decisions.get(_key(q))
        if decision is None:
            records.append({"triple_id": q.triple.id, "decision": "retain", "decided_by": UNDECIDED})
            template.append({
                "pair": [q.triple.question, q.triple.answers[0]], "decision": TODO, "reason": "",
                "chain": [pages[p].title for p in q.path],
                "hop_statements": [h.get("statement") for h in q.hop_questions],
                "chain_entailment": q.chain_entailment.get("validator")})
            kept.append(q)
            continue
        records.append({"triple_id": q.triple.id, "decision": decision.decision, "decided_by": decision.decided_by,
                        "reason": decision.reason})
        if decision.decision == "exclude":
            excluded += 1
        else:
            kept.append(q)
    return ReviewOutcome(kept, excluded, records, dumps_pretty(template))
