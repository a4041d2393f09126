"""WebDetective factorised metrics: *why* an agent fails, not only how often.

Reference: Song et al., "Demystifying Deep Search: A Holistic Evaluation with
Hint-free Multi-Hop Questions and Factorised Metrics" (WebDetective,
arXiv:2510.05137). Each question q has an evidence chain E(q) = {e1..en} (one
item per hop of its masked path). The metrics factor one pass rate into *did
the agent have the knowledge* x *did it use it or refuse appropriately*. The
paper's equations were not reachable; every formula, the paper's prose beside
it, the evidence for the form chosen (its results table, read as arithmetic)
and each convention of this project's own are written out in
``docs/webdetective-metrics.md``; the keys and labels are listed once in
:mod:`aethersearch.scoring.metric_names`.

Per question, with G(q) the evidence the agent **was served** and P(q) the
evidence **confirmed parametric** (the Forget probe's isolated answer to that
hop's sub-question was correct):

* sufficient(q)   = 1[ E(q) ⊆ G(q) ∪ P(q) ]            (Knowledge Sufficiency, reference chain)
* search(q)       = 1[ some route's hops ⊆ served ∪ P, one at least served ]   (Search Score, 0/1)
* coverage(q)     = |E(q) ∩ (G(q) ∪ P(q))| / |E(q)|     (evidence coverage; project's partial credit)

Over a set Q of episodes, S = {q: sufficient(q)}, I = Q \\ S, R = refused
(``Outcome.ABSTAINED``), A = answered (``Outcome.ANSWERED``), C = answered correctly:
F1_GR = 2|R∩I| / (|R| + |I|), F1_KU = 2|C∩S| / (|A| + |S|) (precision over every
answered question), GenScore = (F1_GR + F1_KU) / 2 × KS, Pass@1 = |C| / |Q|.

What counts as *served* on a hint-free chain: ``diagnostics.chain_evidence``. For
the 7-source benchmark there is no masked path; see ``text_requirements`` /
``episode_from_text``: the requirements are "a gold alias occurs in retrieved
text" plus each supporting page having been retrieved.

Endpoint and tool *errors* (``ERROR_OUTCOMES``) say nothing about knowledge use:
they are excluded from every denominator and counted as ``n_errors``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from aethersearch.corpus.base import DocumentStore
from aethersearch.diagnostics.chain_evidence import chain_evidence, edges_served, hops_gathered, route_found
from aethersearch.errors import DataError
from aethersearch.jsonl import iter_jsonl, validation_problem
from aethersearch.records import ERROR_OUTCOMES, DiagnosticsRow, Outcome, Record, Trace
from aethersearch.scoring.extract import resolve_trace
from aethersearch.scoring.metric_names import definitions
from aethersearch.scoring.metrics import em
from aethersearch.text import normalize_answer

__all__ = ["ANSWER_REQUIREMENT", "DEFINITIONS", "EpisodeEvidence", "FACTORISED_ROWS_FILE", "FactorisedRow",
    "PAGE_PREFIX", "RATE_KEYS", "YES_NO", "alias_in_text", "episode_from_sandbox", "episode_from_text",
    "episode_rows", "episodes_from_rows", "evidence_of", "factorise", "factorised_metrics", "gathered_ids",
    "gen_score", "good_refusal_f1", "is_correct", "knowledge_utilisation_f1",
    "knowledge_utilisation_f1_on_sufficient", "read_factorised_rows", "supporting_titles", "text_requirements"]

ANSWER_REQUIREMENT = "answer"
PAGE_PREFIX = "page:"


def is_correct(prediction: str | None, golds: Sequence[str]) -> bool:
    """Correct = Search-R1 exact match (``scoring.metrics.em``) against any gold alias."""
    return em(prediction, golds) == 1.0


class EpisodeEvidence(NamedTuple):
    """What the factorised metrics need to know about one finished episode."""

    id: str
    source: str
    hops: int | None
    evidence: tuple[str, ...]
    gathered: frozenset[str]
    parametric: frozenset[str]
    outcome: Outcome
    correct: bool
    searched_route: bool
    """Search Score of this question (0/1): some route served or known, at least one hop served by a tool."""

    @property
    def covered(self) -> frozenset[str]:
        """Evidence items held by any means (tools or confirmed parametric memory)."""
        return frozenset(self.evidence) & (self.gathered | self.parametric)

    @property
    def sufficient(self) -> bool:
        """Knowledge Sufficiency: every evidence item gathered or known parametrically."""
        return len(self.covered) == len(set(self.evidence))

    @property
    def evidence_coverage(self) -> float:
        """The covered fraction of E (partial credit; the project's own, never below sufficiency)."""
        unique = set(self.evidence)
        return len(self.covered) / len(unique) if unique else 1.0

    @property
    def sufficient_by_search(self) -> bool:
        """Sufficiency from tool use alone (no parametric credit)."""
        return set(self.evidence) <= self.gathered

    @property
    def refused(self) -> bool:
        return self.outcome is Outcome.ABSTAINED

    @property
    def answered(self) -> bool:
        return self.outcome is Outcome.ANSWERED


# ----------------------------------------------------------------------------- trace events


def gathered_ids(trace: Trace, gathering_tools: Sequence[str] = ("visit",)) -> frozenset[str]:
    """Ids of documents the agent actually received from successful ``gathering_tools`` calls.

    A call's own masked (suppressed) ids never count, even if a buggy tool also
    listed them as returned; a page masked earlier and opened later (once its
    predecessor was visited) does count from that later call.
    """
    found: set[str] = set()
    for step in trace.steps:
        for call in step.tool_calls:
            if call.error is None and call.tool in gathering_tools:
                found.update(set(call.returned_ids) - set(call.suppressed_ids))
    return frozenset(found)


def evidence_of(row: DiagnosticsRow) -> tuple[str, ...]:
    """The evidence chain E of a hint-free question: one item per hop, named by the page stating it.

    For a path v0..vn that is ``(v0, ..., v(n-1))`` (hop i is stated on the page
    of v(i-1); WebDetective's evidence is the facts along the path, so the
    answer page vn is not in E). A row without a path falls back to its
    recorded ``evidence``.
    """
    if len(row.path) >= 2:
        return tuple(row.path[:-1])
    return tuple(row.evidence)


def _hops(row: DiagnosticsRow, evidence: tuple[str, ...]) -> int:
    """Hop count: the sidecar's ``hops``, else its hop questions, else path edges, else |E|."""
    if row.hops is not None:
        return row.hops
    if row.hop_questions:
        return len(row.hop_questions)
    if len(row.path) > 1:
        return len(row.path) - 1
    return len(evidence)


def episode_from_sandbox(
    trace: Trace,
    diagnostics: DiagnosticsRow,
    golds: Sequence[str],
    *,
    store: Any,
    masked: bool = True,
    parametric: Iterable[str] = (),
    correct_fn: Callable[[str | None, Sequence[str]], bool] = is_correct,
    correct: bool | None = None,
) -> EpisodeEvidence:
    """Classify one episode of a hint-free question against its chain evidence.

    ``store`` holds the chain's pages (the served text is rebuilt from it);
    ``masked`` says whether the run browsed the masked sandbox (else a plain
    search environment served pages in full). The answer and outcome are the
    scorer's (``scoring.extract.resolve_trace``), so Pass@1 here always agrees
    with ``scores.json``; ``correct`` (e.g. the LLM judge's verdict) overrides
    ``correct_fn`` for an answered episode.
    """
    scored = resolve_trace(trace, golds=golds)  # gold wins over a refusal-shaped answer
    if len(diagnostics.path) < 3:
        raise DataError(
            "diagnostics.jsonl",
            f"question {diagnostics.id!r} has no evidence chain (no multi-hop 'path')",
            field="path",
            fix="factorised metrics need a hint-free release; for the 7-source benchmark use "
                "the text mode (episode_from_text)",
        )
    chain = chain_evidence(diagnostics, store)
    evidence = chain.evidence
    answered = scored.outcome is Outcome.ANSWERED
    served = edges_served(trace, chain, store, masked=masked)
    known = frozenset(parametric) & frozenset(evidence)
    return EpisodeEvidence(
        id=trace.id,
        source=diagnostics.source_dataset,
        hops=_hops(diagnostics, evidence),
        evidence=evidence,
        gathered=hops_gathered(trace, chain, store, masked=masked) & frozenset(evidence),
        parametric=known,
        outcome=scored.outcome,
        correct=answered and (correct if correct is not None else correct_fn(scored.prediction, golds)),
        searched_route=route_found(chain, served, known),
    )


# ----------------------------------------------------------------------------- 7-source (text) mode


def supporting_titles(row: DiagnosticsRow) -> tuple[str, ...]:
    """Titles of the supporting pages recorded for a 7-source question (deduplicated, in order).

    HotpotQA/2Wiki: ``supporting_pages`` and the titles of ``supporting_facts``.
    MuSiQue: each ``decomposition`` step's supporting paragraph title, when the
    sidecar recorded one (keys ``title``/``support_title``/``paragraph_title``).
    """
    titles: list[str] = list(row.supporting_pages)
    titles += [title for title, _ in row.supporting_facts]
    for step in row.decomposition:
        for key in ("title", "support_title", "paragraph_title"):
            value = step.get(key)
            if isinstance(value, str) and value:
                titles.append(value)
                break
    seen: set[str] = set()
    unique = []
    for title in titles:
        key = _title_key(title)
        if key and key not in seen:
            seen.add(key)
            unique.append(title)
    return tuple(unique)


YES_NO = frozenset({"yes", "no"})


def text_requirements(row: DiagnosticsRow, golds: Sequence[str] = ()) -> tuple[str, ...]:
    """Evidence requirements of a 7-source question: the answer, then ``page:<title>`` per supporting page.

    A yes/no answer (HotpotQA comparison questions) is not a span of any page, so
    it is not required to appear; such a question is sufficient once its
    supporting pages are retrieved.
    """
    pages = tuple(PAGE_PREFIX + title for title in supporting_titles(row))
    if golds and all(normalize_answer(gold) in YES_NO for gold in golds):
        return pages
    return (ANSWER_REQUIREMENT,) + pages


def _title_key(title: str) -> str:
    return " ".join(title.casefold().replace("_", " ").split())


def alias_in_text(golds: Sequence[str], text: str) -> bool:
    """True if any gold alias occurs in ``text`` as a whole-token span after answer normalisation."""
    haystack = f" {normalize_answer(text)} "
    for gold in golds:
        needle = normalize_answer(gold)
        if needle and f" {needle} " in haystack:
            return True
    return False


def episode_from_text(
    trace: Trace,
    diagnostics: DiagnosticsRow,
    golds: Sequence[str],
    store: DocumentStore,
    *,
    parametric: Iterable[str] = (),
    gathering_tools: Sequence[str] = ("search", "visit", "access"),
    correct_fn: Callable[[str | None, Sequence[str]], bool] = is_correct,
    hops: int | None = None,
    correct: bool | None = None,
) -> EpisodeEvidence:
    """Classify one 7-source episode: gold alias in retrieved text + supporting pages retrieved.

    The retrieved text is resolved through ``store`` from every id the tools
    returned; an id missing from the store is a DataError (the run and the corpus
    do not match).
    """
    scored = resolve_trace(trace, golds=golds)  # gold wins over a refusal-shaped answer
    requirements = text_requirements(diagnostics, golds)
    ids = gathered_ids(trace, gathering_tools)
    texts: list[str] = []
    titles: set[str] = set()
    for doc_id in sorted(ids):
        if doc_id not in store:
            raise DataError(
                "traces.jsonl",
                f"episode {trace.id!r} returned document {doc_id!r}, which is not in the corpus",
                fix="score the run against the corpus it was rolled out on (see run.json corpus_hash)",
            )
        document = store.get(doc_id)
        texts.append(document.contents)
        titles.add(_title_key(document.title))
    gathered: set[str] = set()
    if ANSWER_REQUIREMENT in requirements and alias_in_text(golds, "\n".join(texts)):
        gathered.add(ANSWER_REQUIREMENT)
    pages = [r for r in requirements if r.startswith(PAGE_PREFIX)]
    for requirement in pages:
        if _title_key(requirement[len(PAGE_PREFIX):]) in titles:
            gathered.add(requirement)
    if hops is None:
        hops = diagnostics.hops
    if hops is None and pages:
        hops = len(pages)
    known = frozenset(parametric) & frozenset(requirements)
    return EpisodeEvidence(
        id=trace.id,
        source=diagnostics.source_dataset,
        hops=hops,
        evidence=requirements,
        gathered=frozenset(gathered),
        parametric=known,
        outcome=scored.outcome,
        correct=scored.outcome is Outcome.ANSWERED and (
            correct if correct is not None else correct_fn(scored.prediction, golds)),
        # no graph here: the one route is the requirement list, and one requirement must be retrieved
        searched_route=set(requirements) <= (gathered | known) and bool(gathered),
    )


# ----------------------------------------------------------------------------- the metrics


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def good_refusal_f1(episodes: Sequence[EpisodeEvidence]) -> float | None:
    """F1_GR = 2|R∩I| / (|R| + |I|); ``None`` (undefined) when nothing was refused and nothing needed refusing."""
    refused = sum(ep.refused for ep in episodes)
    insufficient = sum(not ep.sufficient for ep in episodes)
    hits = sum(ep.refused and not ep.sufficient for ep in episodes)
    if refused + insufficient == 0:
        return None
    return 2 * hits / (refused + insufficient)


def gen_score(f1_gr: float | None, f1_ku: float, knowledge_score: float) -> float:
    """GenScore = mean of the defined F1 terms × KnowledgeScore (the paper's whenever F1_GR is defined)."""
    terms = [f1_ku] if f1_gr is None else [f1_gr, f1_ku]
    return sum(terms) / len(terms) * knowledge_score


def knowledge_utilisation_f1(episodes: Sequence[EpisodeEvidence]) -> float:
    """F1_KU = 2|C∩S| / (|A| + |S|): precision over every answered question A, recall over sufficient S.

    The form WebDetective's results table pins down (all nine rows have whole
    counts under it, 1 of 9 under the S-only precision). An agent that answers
    without the evidence is penalised. 0.0 when nothing was answered and
    nothing was sufficient.
    """
    answered = sum(ep.answered for ep in episodes)
    sufficient = sum(ep.sufficient for ep in episodes)
    hits = sum(ep.correct and ep.sufficient for ep in episodes)
    return 2 * hits / (answered + sufficient) if answered + sufficient else 0.0


def knowledge_utilisation_f1_on_sufficient(episodes: Sequence[EpisodeEvidence]) -> float:
    """2|C∩S| / (|A∩S| + |S|): precision on sufficient questions only (this project's earlier F1_KU); 0.0 on empty S."""
    sufficient = [ep for ep in episodes if ep.sufficient]
    answered = sum(ep.answered for ep in sufficient)
    correct = sum(ep.correct for ep in sufficient)
    return 2 * correct / (answered + len(sufficient)) if sufficient else 0.0


RATE_KEYS = ("pass_at_1", "knowledge_sufficiency", "knowledge_score", "search_score", "evidence_coverage",
             "search_only_sufficiency", "refusal_rate", "f1_good_refusal", "precision_good_refusal",
             "recall_good_refusal", "f1_knowledge_utilisation", "precision_knowledge_utilisation",
             "recall_knowledge_utilisation", "f1_knowledge_utilisation_on_sufficient", "gen_score")


def factorised_metrics(episodes: Sequence[EpisodeEvidence]) -> dict[str, Any]:
    """Every factorised metric (and the counts it is made of) over one set of episodes.

    Error outcomes are excluded first. Over an empty set the rates are ``None``
    (undefined) and ``n`` is 0; over a non-empty set every value is a number
    except an undefined F1_GR or precision (0/0).
    """
    errors = sum(ep.outcome in ERROR_OUTCOMES for ep in episodes)
    kept = [ep for ep in episodes if ep.outcome not in ERROR_OUTCOMES]
    n = len(kept)
    sufficient = [ep for ep in kept if ep.sufficient]
    insufficient = [ep for ep in kept if not ep.sufficient]
    refused = [ep for ep in kept if ep.refused]
    answered = [ep for ep in kept if ep.answered]
    good_refusals = sum(ep.refused for ep in insufficient)
    suff_correct = sum(ep.correct for ep in sufficient)
    out: dict[str, Any] = {
        "n": n, "n_errors": errors, "n_sufficient": len(sufficient), "n_insufficient": len(insufficient),
        "n_refused": len(refused), "n_refused_insufficient": good_refusals, "n_answered": len(answered),
        "n_correct": sum(ep.correct for ep in kept), "n_correct_sufficient": suff_correct,
        "n_search_route": sum(ep.searched_route for ep in kept),
    }
    if n == 0:
        out.update(dict.fromkeys(RATE_KEYS))
        return out
    ks = len(sufficient) / n
    f1_gr = good_refusal_f1(kept)
    f1_ku = knowledge_utilisation_f1(kept)
    out.update(
        pass_at_1=out["n_correct"] / n,
        knowledge_sufficiency=ks,
        knowledge_score=ks,
        search_score=out["n_search_route"] / n,
        evidence_coverage=sum(ep.evidence_coverage for ep in kept) / n,
        search_only_sufficiency=sum(ep.sufficient_by_search for ep in kept) / n,
        refusal_rate=len(refused) / n,
        f1_good_refusal=f1_gr,
        precision_good_refusal=_ratio(good_refusals, len(refused)),
        recall_good_refusal=_ratio(good_refusals, len(insufficient)),
        f1_knowledge_utilisation=f1_ku,
        precision_knowledge_utilisation=_ratio(suff_correct, len(answered)),
        recall_knowledge_utilisation=_ratio(suff_correct, len(sufficient)),
        f1_knowledge_utilisation_on_sufficient=knowledge_utilisation_f1_on_sufficient(kept),
        gen_score=gen_score(f1_gr, f1_ku, ks),
    )
    return out


def _group(episodes: Iterable[EpisodeEvidence], key: Callable[[EpisodeEvidence], str]
           ) -> dict[str, list[EpisodeEvidence]]:
    groups: dict[str, list[EpisodeEvidence]] = defaultdict(list)
    for ep in episodes:
        groups[key(ep)].append(ep)
    return dict(groups)


def _hops_key(value: str) -> tuple[int, int | str]:
    return (0, int(value)) if value.isdigit() else (1, value)


def factorise(episodes: Sequence[EpisodeEvidence]) -> dict[str, Any]:
    """``factorised.json``: ``{"overall", "by_hops", "by_source", "n"}`` (plus the per-question rows' count).

    Hop groups are keyed by the hop count as a string ("2", "3", ...; "unknown"
    when the sidecar has none) and sorted numerically; sources alphabetically.
    """
    by_hops = _group(episodes, lambda ep: str(ep.hops) if ep.hops is not None else "unknown")
    by_source = _group(episodes, lambda ep: ep.source)
    overall = factorised_metrics(episodes)
    return {
        "overall": overall,
        "by_hops": {k: factorised_metrics(by_hops[k]) for k in sorted(by_hops, key=_hops_key)},
        "by_source": {k: factorised_metrics(by_source[k]) for k in sorted(by_source)},
        "n": overall["n"],
        "definitions": DEFINITIONS,
    }


#: the per-question rows beside ``factorised.json`` (one :class:`FactorisedRow` a line)
FACTORISED_ROWS_FILE = "factorised_questions.jsonl"


class FactorisedRow(Record):
    """One line of ``factorised_questions.jsonl``: how one question (of one sample) was classified.

    Written by ``aether factorise``; read back by the report's and the paired
    comparison's bootstraps (:func:`episodes_from_rows`) and by the viewer. ``sample``
    is on the line only when the run has K > 1 samples (one line per question and
    sample); ``parametric`` is absent from files written before the Forget probe fed it.
    """

    id: str
    source: str
    hops: int | None
    evidence: list[str]
    gathered: list[str]
    parametric: list[str] = []
    sufficient: bool
    search_score: int
    evidence_coverage: float
    outcome: Outcome
    correct: bool
    sample: int | None = None

    def line(self) -> dict[str, Any]:
        """The JSON fields written (``sample`` only when there is one)."""
        return self.model_dump(mode="json", exclude={"sample"} if self.sample is None else None)


def episode_rows(episodes: Sequence[EpisodeEvidence], sample: int | None = None) -> list[FactorisedRow]:
    """Per-question classification rows (for ``factorised_questions.jsonl``); ``sample`` when K > 1."""
    return [FactorisedRow(id=ep.id, source=ep.source, hops=ep.hops, evidence=list(ep.evidence),
                          gathered=sorted(ep.gathered), parametric=sorted(ep.parametric), sufficient=ep.sufficient,
                          search_score=int(ep.searched_route), evidence_coverage=ep.evidence_coverage,
                          outcome=ep.outcome, correct=ep.correct, sample=sample)
            for ep in episodes]


def read_factorised_rows(path: Path) -> list[FactorisedRow]:
    """The rows of a ``factorised_questions.jsonl``; a line that is not one is a DataError naming it."""
    rows = []
    for line, value in iter_jsonl(path):
        try:
            rows.append(FactorisedRow.model_validate(value))
        except ValidationError as exc:
            raise DataError(path, f"not a factorised row: {validation_problem(exc)}", line=line,
                            fix="rerun `aether factorise` on the run") from None
    return rows


def episodes_from_rows(rows: Sequence[FactorisedRow]) -> list[EpisodeEvidence]:
    """The inverse of :func:`episode_rows`: episodes read back from ``factorised_questions.jsonl``.

    Why: a report draws confidence intervals for the factorised metrics by
    resampling questions and recomputing :func:`factorised_metrics`, so the
    interval always belongs to the same definition as the published point.
    """
    return [EpisodeEvidence(id=row.id, source=row.source, hops=row.hops, evidence=tuple(row.evidence),
                            gathered=frozenset(row.gathered), parametric=frozenset(row.parametric),
                            outcome=row.outcome, correct=row.correct, searched_route=bool(row.search_score))
            for row in rows]


DEFINITIONS: Mapping[str, str] = {
    **definitions(),
    "evidence": "hint-free: one item per hop, the page v(i-1) that states the link to v(i); the answer page is "
                "not evidence",
    "gathered": "hint-free: a served text (visited page or search snippet) contains the sentence stating the "
                "hop; 7-source: a gathering tool returned the text/page",
    "errors": "endpoint/tool error outcomes are excluded from every denominator (n_errors)",
}
