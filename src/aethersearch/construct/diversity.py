"""Long-tail and diverse selection: questions that test search, not memory of the few famous pages.

Why: built first-come over real Wikispeedia, 13 of 16 answers were "Europe",
one subject came twice and two chains shared their hops; a model answers such
questions from memory. The construction therefore

* records a **popularity proxy** of each question's subject and answer page
  (:func:`popularity`: in-degree in the link graph, page length in characters),
  and tries seeds **tail first** (:func:`tail_order`: ascending by the
  subject's and answer's in-degree, in powers of two, the seeded shuffle
  kept inside a bucket), so every first-come rule below favours the tail;
* takes **one question per subject** (``subject_taken``);
* takes no chain sharing :data:`MAX_SHARED_HOPS` + 1 or more hops (page pairs)
  with an accepted one (``chain_overlap``);
* keeps **no answer on more than** ``max_answer_share`` of the release
  (:func:`cap_answers`, on the final count; the most popular subjects go
  first; ``answer_share_cap``). Fewer than ``1 / max_answer_share`` questions
  cannot meet the share with one question per answer; the manifest says so.

:func:`distributions` is the manifest's ``construction.diversity`` record.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from aethersearch.corpus.graph import LinkGraph
from aethersearch.records import Document

#: two chains may share at most this many hops (page pairs)
MAX_SHARED_HOPS = 1


Popularity = Callable[[str], dict[str, int]]


def popularity(graph: LinkGraph, pages: Mapping[str, Document]) -> Popularity:
    """Page id -> ``{"in_degree", "chars"}``: how linked and how long a page is (the popularity proxy)."""
    in_degree = np.bincount(np.asarray(graph.indices), minlength=graph.n_nodes)
    cache: dict[str, dict[str, int]] = {}

    def of(page: str) -> dict[str, int]:
        if page not in cache:
            degree = int(in_degree[graph.index_of(page)]) if page in graph else 0
            cache[page] = {"in_degree": degree, "chars": len(pages[page].text) if page in pages else 0}
        return cache[page]

    return of


def tail_order(subjects_answers: Sequence[tuple[str, str]], pop: Popularity) -> list[int]:
    """Indices of ``(subject, answer)`` pairs, least linked first, bucketed by powers of two (stable)."""
    def bucket(i: int) -> int:
        subject, answer = subjects_answers[i]
        return (pop(subject)["in_degree"] + 1).bit_length() + (pop(answer)["in_degree"] + 1).bit_length()

    return sorted(range(len(subjects_answers)), key=bucket)


def hops_of(path: Sequence[str]) -> set[tuple[str, str]]:
    """The page pairs a chain walks."""
    return set(pairwise(path))


def overlaps(path: Sequence[str], taken: Iterable[set[tuple[str, str]]]) -> bool:
    """Whether ``path`` shares more than :data:`MAX_SHARED_HOPS` hops with one of the ``taken`` chains."""
    mine = hops_of(path)
    return any(len(mine & other) > MAX_SHARED_HOPS for other in taken)


def answer_cap(count: int, share: float) -> int:
    """The most questions one answer may have in a release of ``count`` (at least one)."""
    return max(1, math.floor(count * share + 1e-9))


def cap_answers(answers: Sequence[str], subject_popularity: Sequence[int], share: float) -> list[int]:
    """Indices kept so that no answer exceeds ``answer_cap`` of the *final* count (most popular dropped first)."""
    kept = list(range(len(answers)))
    while True:
        cap = answer_cap(len(kept), share)
        by_answer: dict[str, list[int]] = {}
        for i in kept:
            by_answer.setdefault(answers[i], []).append(i)
        drop = {i for group in by_answer.values() if len(group) > cap
                for i in sorted(group, key=lambda j: (subject_popularity[j], j))[cap:]}
        if not drop:
            return kept
        kept = [i for i in kept if i not in drop]


def _quantiles(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {}
    array = np.asarray(values, dtype=float)
    return {f"p{q}": float(np.percentile(array, q)) for q in (0, 25, 50, 75, 100)}


def distributions(answers: Sequence[str], subjects: Sequence[str], paths: Sequence[Sequence[str]],
                  popularity_records: Sequence[Mapping[str, Any]], share: float | None) -> dict[str, Any]:
    """The manifest's ``construction.diversity``: answer shares, subjects, shared hops and popularity.

    ``popularity_records``: per question ``{"subject": {...}, "answer": {...}}`` (:func:`popularity` of
    each), as recorded in its row, so the figures describe exactly the rows written.
    """
    count = len(answers)
    top = Counter(answers).most_common(5)
    shared = max((len(hops_of(a) & hops_of(b)) for i, a in enumerate(paths) for b in paths[i + 1:]), default=0)
    records = [r for r in popularity_records if r]

    def spread(side: str, key: str) -> dict[str, float]:
        return _quantiles([int(r[side][key]) for r in records])

    out: dict[str, Any] = {
        "rules": {"max_answer_share": share, "one_question_per_subject": True, "max_shared_hops": MAX_SHARED_HOPS,
                  "order": "tail first: ascending in-degree of subject and answer (powers of two), seeded within"},
        "questions": count,
        "top_answers": [{"answer_page": a, "questions": n, "share": round(n / count, 4)} for a, n in top],
        "max_answer_share_achieved": round(top[0][1] / count, 4) if count else None,
        "distinct_answers": len(set(answers)),
        "subjects_repeated": count - len(set(subjects)),
        "max_shared_hops_achieved": shared,
        "popularity": {"subject_in_degree": spread("subject", "in_degree"),
                       "answer_in_degree": spread("answer", "in_degree"),
                       "subject_chars": spread("subject", "chars"), "answer_chars": spread("answer", "chars")},
    }
    if share is not None and count and top[0][1] / count > share:
        out["answer_share_note"] = (f"{count} questions cannot keep every answer at or under {share:.0%} "
                                    f"(one question is {1 / count:.0%}): the corpus gave too few")
    return out


#: the release goals of issue 48 (a benchmark that measures search): questions, question relations, the
#: largest answer share, and the share of chains with 3 or 4 hops
GOALS = {"questions": 100, "relations": 5, "max_answer_share": 0.10, "multi_hop_share": 0.30}
#: rejection reasons that are about the seed lists, not the construction's rules
_SEED_REASONS = ("seed_",)


def goals(relations: Sequence[str], answers: Sequence[str], hops: Sequence[int],
          rejected: Mapping[str, int]) -> dict[str, Any]:
    """The manifest's ``construction.goals``: each goal's target, what was achieved, and whether it was met;
    when one is not, the rules that rejected most candidates (``stopped_by``, with their counts)."""
    count = len(answers)
    share = Counter(answers).most_common(1)[0][1] / count if count else None
    multi = sum(h in (3, 4) for h in hops) / count if count else None
    rows: dict[str, dict[str, Any]] = {
        "questions": {"target": GOALS["questions"], "achieved": count, "met": count >= GOALS["questions"]},
        "relations": {"target": GOALS["relations"], "achieved": len(set(relations)),
                      "by_relation": dict(sorted(Counter(relations).items())),
                      "met": len(set(relations)) >= GOALS["relations"]},
        "max_answer_share": {"target": GOALS["max_answer_share"], "achieved": None if share is None else round(share, 4),
                             "met": share is not None and share <= GOALS["max_answer_share"]},
        "multi_hop_share": {"target": GOALS["multi_hop_share"], "achieved": None if multi is None else round(multi, 4),
                            "met": multi is not None and multi >= GOALS["multi_hop_share"]},
    }
    out: dict[str, Any] = {"goals": rows, "all_met": all(row["met"] for row in rows.values())}
    if not out["all_met"]:
        rules = sorted(((n, reason) for reason, n in rejected.items() if not reason.startswith(_SEED_REASONS)),
                       reverse=True)
        out["stopped_by"] = {reason: n for n, reason in rules[:8]}
        if rows["questions"]["achieved"] < GOALS["questions"]:
            out["questions_short_by"] = GOALS["questions"] - count
    return out


__all__ = ["GOALS", "MAX_SHARED_HOPS", "answer_cap", "goals", "cap_answers", "distributions", "hops_of", "overlaps", "popularity",
           "tail_order"]
