"""AetherSearch's own outcome scorer (``--compat aethersearch``): validity, R_task, exact, per-source keys.

Why: the Eval-1400 card is published by the AetherSearch project, whose
training-time evaluation scores episodes differently from Search-R1's ``qa_em``.
Every rule below was read in its code at commit ``d2a21bd`` (GitHub
``Muradil-mamat-211/AetherSearch``) and checked against it case by case
(``tests/scoring/fixtures/aethersearch_parity.json.gz``, recorded by running
their functions); ``docs/aethersearch-compat.md`` ties each rule to its file.

* **An action** (one model generation, as text) is checked by their grammar,
  :func:`aethersearch.agents.aethersearch_protocol.check_action` (the loop stops
  on it too, so it lives with the agents).
* **A trajectory** has a terminal answer when its *last* action is a valid answer
  and it is the only valid answer; invalid actions before it are recorded as the
  first error but do not void the answer (``parse_model_trajectory``).
* **R_task** is 0 unless the terminal answer is valid and no retrieval failed;
  then the max over aliases of a *set*-token F1 after lower-casing, ASCII
  punctuation → space and whitespace collapse, articles kept
  (``outcome/token_f1.py: compute_f1``, IGPO's scorer). Their wrapper puts the
  answer back between ``<answer>`` tags and re-checks tag balance over
  ``code``/``tool_call``/``think``/``answer``: an answer with an unbalanced
  ``<code>`` scores **-2.0**, kept here because it is their number.
* **exact** is R_task = 1 (``runtime/async_eval_worker.py``); it is not EM.

Aggregation (:func:`aethersearch_summary`) reproduces ``_aggregate`` of
``async_eval_worker.py`` per source and ``overall`` (micro), and adds
``overall_macro``: the unweighted mean of the per-source values, which is how
their README's "Overall / Avg." column is computed (e.g. 0.3560 = mean of the
seven per-source EMs). ``overall_macro`` is our name, not theirs.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from aethersearch.agents.aethersearch_protocol import ActionCheck, check_action
from aethersearch.errors import ConfigError
from aethersearch.records import ERROR_OUTCOMES, Trace

__all__ = [
    "AETHERSEARCH_COMMIT",
    "AETHERSEARCH_METRICS",
    "EpisodeActions",
    "EpisodeScore",
    "TrajectoryCheck",
    "aethersearch_summary",
    "check_trajectory",
    "episode_score",
    "set_token_f1",
    "trace_actions",
]

AETHERSEARCH_COMMIT = "d2a21bd23b414d81b38b19fcc2390ca060a5ba1b"
#: Per-question values added to ``scores.json`` under ``--compat aethersearch``.
AETHERSEARCH_METRICS: tuple[str, ...] = ("aethersearch_f1", "aethersearch_exact", "aethersearch_format")

_FIRST_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_WHITESPACE = re.compile(r"\s+")
_PUNCTUATION = str.maketrans(dict.fromkeys(string.punctuation, " "))
_ALIAS_SPLIT = "<|answer_split|>"
_RESCORED_TAGS = ("code", "tool_call", "think", "answer")
#: Their scorer reads these sources' gold as JSON labels (a fact-checking reduction no release here has).
_LABEL_SOURCES = frozenset({"Factbench", "politifact", "liar2"})
_FORMAT_PENALTY = -2.0
_MAX_TURN_SEARCHES = 5


class TrajectoryCheck(NamedTuple):
    """A whole episode under their parser."""

    answer: str | None
    terminal_answer_valid: bool
    first_error: str | None
    searches: tuple[str, ...]
    actions: tuple[ActionCheck, ...]

    @property
    def valid(self) -> bool:
        """Their ``trajectory_valid``: a terminal answer and no error anywhere."""
        return self.first_error is None and self.terminal_answer_valid


class EpisodeActions(NamedTuple):
    """What their scorer reads of one recorded episode."""

    actions: tuple[str, ...]
    queries: tuple[str, ...]
    system_valid: bool


class EpisodeScore(NamedTuple):
    """Their per-prediction fields: R_task, exact, F_ans, the answer, the executed queries."""

    r_task: float
    exact: bool
    format_indicator: int
    terminal_answer_valid: bool
    answer: str | None
    first_error: str | None
    queries: tuple[str, ...]


def check_trajectory(actions: Sequence[str]) -> TrajectoryCheck:
    """Their ``parse_model_trajectory``: the answer counts only as the last action and the only answer."""
    if not actions:
        return TrajectoryCheck(None, False, "empty_model_trajectory", (), ())
    checks = tuple(check_action(str(action)) for action in actions)
    errors: list[str] = []
    searches: list[str] = []
    answers = 0
    terminal: str | None = None
    last = len(checks) - 1
    for index, check in enumerate(checks):
        if check.error is not None:
            errors.append(check.error)
        elif check.kind == "search":
            if answers:
                errors.append("search_after_answer")
            searches.append(str(check.value))
        else:
            answers += 1
            if index == last and answers == 1:
                terminal = check.value
            else:
                errors.append("answer_not_unique_final_action")
    if answers == 0:
        errors.append("missing_final_answer")
    elif answers > 1:
        errors.append("multiple_answers")
        terminal = None
    if checks[-1].kind != "answer":
        terminal = None
        errors.append("answer_not_final_action")
    return TrajectoryCheck(terminal, terminal is not None, errors[0] if errors else None, tuple(searches), checks)


def _preprocess(text: str) -> str:
    return _WHITESPACE.sub(" ", text.translate(_PUNCTUATION)).strip()


def _tags_nest(text: str) -> bool:
    """IGPO's ``check_tags_balance``: equal counts, and every opening tag has a closing one after it."""
    for tag in _RESCORED_TAGS:
        opening, closing = f"<{tag}>", f"</{tag}>"
        if text.count(opening) != text.count(closing):
            return False
        start = text.find(opening)
        while start != -1:
            end = text.find(closing, start)
            if end == -1:
                return False
            start = text.find(opening, end + 1)
    return True


def set_token_f1(answer: str, aliases: Sequence[str], *, source: str = "") -> float:
    """Their ``max_alias_token_f1``: max over aliases of set-token F1 (see the module doc; -2.0 is theirs)."""
    if source in _LABEL_SOURCES:
        raise ConfigError(f"source {source!r} is scored by AetherSearch as fact-checking labels, not answers",
                          fix="--compat aethersearch covers question-answering sources only")
    if not aliases:
        raise ConfigError("a question has no gold alias", fix="every release row needs at least one answer")
    solution = f"<answer>{answer}</answer>".lower()
    if not _tags_nest(solution):
        return _FORMAT_PENALTY
    found = _FIRST_ANSWER.search(solution)
    if found is None:
        return _FORMAT_PENALTY
    predicted = set(_preprocess(found.group(1).strip()).split())
    best = 0.0
    for alias in _ALIAS_SPLIT.join(str(a) for a in aliases).lower().split(_ALIAS_SPLIT):
        gold = set(_preprocess(alias).split())
        common = len(predicted & gold)
        if predicted and gold and common:
            precision, recall = common / len(predicted), common / len(gold)
            best = max(best, 2.0 * precision * recall / (precision + recall))
    return best


def usable_aliases(golds: Sequence[str]) -> list[str]:
    """Their loader keeps only aliases with a non-blank text (``dataset_view._as_text_list``)."""
    return [str(gold) for gold in golds if str(gold).strip()]


def episode_score(actions: Sequence[str], golds: Sequence[str], *, source: str = "",
                  system_valid: bool = True, queries: Sequence[str] | None = None) -> EpisodeScore:
    """One episode's R_task, exact and F_ans from its action texts (``score_trajectory_outcome``).

    ``queries``: the searches the loop executed (their ``search_count``); by
    default every valid search action of ``actions``.
    """
    parsed = check_trajectory(actions)
    eligible = parsed.terminal_answer_valid and system_valid and parsed.answer is not None
    r_task = set_token_f1(str(parsed.answer), usable_aliases(golds), source=source) if eligible else 0.0
    executed = tuple(parsed.searches if queries is None else queries)
    return EpisodeScore(float(r_task), abs(r_task - 1.0) <= 1e-12, int(parsed.terminal_answer_valid),
                        parsed.terminal_answer_valid, parsed.answer, parsed.first_error, executed)


def produced_text(text: str, notes: Mapping[str, Any]) -> str:
    """What the model produced in one step, a stop string the server removed included.

    ``stop_restored`` is the stop string the server cut off after the model wrote
    it (``agents/stops.py``); a turn continued past a lower-priority stop keeps its
    whole text in ``context_text``.
    """
    if "continued_for" in notes and "context_text" in notes:
        return str(notes["context_text"])
    return text + str(notes.get("stop_restored", ""))


def trace_actions(trace: Trace) -> EpisodeActions:
    """The action texts, executed search queries and system validity of a recorded episode.

    Every step with a model call is one action; a query counts when its step ran
    a search tool. A tool or endpoint error, or a step noted ``system_valid: false``
    (``--agent aethersearch``: an observation over the token caps), is their
    ``system_valid = False``.
    """
    actions: list[str] = []
    queries: list[str] = []
    for step in trace.steps:
        if step.llm is None:
            continue
        actions.append(produced_text(step.llm.text, step.notes))
        for call in step.tool_calls:
            if call.tool == "search":
                queries.append(str(call.arguments.get("query", "")))
    failed = trace.outcome in ERROR_OUTCOMES or any(step.notes.get("system_valid") is False for step in trace.steps)
    return EpisodeActions(tuple(actions), tuple(queries), not failed)


def _query_key(query: str) -> str:
    return " ".join(str(query).lower().split())


def _rates(rows: Sequence[EpisodeScore]) -> dict[str, float | int]:
    count = len(rows)
    searches = [len(row.queries) for row in rows]
    queries = [_query_key(q) for row in rows for q in row.queries]
    repeats = sum(len(row.queries) != len({_query_key(q) for q in row.queries}) for row in rows)

    def share(n: int) -> float:
        return n / count if count else 0.0

    distinct = len(set(queries)) / len(queries) if queries else 0.0
    return {
        "count": count,
        "f1": sum(row.r_task for row in rows) / count if count else 0.0,
        "exact": share(sum(row.exact for row in rows)),
        "format_rate": share(sum(row.format_indicator for row in rows)),
        "answer_rate": share(sum(row.terminal_answer_valid for row in rows)),
        "no_answer_rate": share(sum(not row.terminal_answer_valid for row in rows)),
        "avg_search": sum(searches) / count if count else 0.0,
        "multi_search_rate": share(sum(n >= 2 for n in searches)),
        "repeat_query_rate": share(repeats),
        "max_turn_rate": share(sum(n >= _MAX_TURN_SEARCHES for n in searches)),
        "query_diversity": distinct,
        "template_similarity": 1.0 - distinct if queries else 0.0,
    }


def aethersearch_summary(rows: Sequence[tuple[str, EpisodeScore]]) -> dict[str, dict[str, float | int]]:
    """Their ``_aggregate`` keys per source (sorted) and ``overall`` (micro), plus ``overall_macro`` (ours).

    ``overall_macro`` averages each key over the sources with equal weight
    (``count`` is the total); their README's "Overall / Avg." column is this mean.
    """
    by_source: dict[str, list[EpisodeScore]] = {}
    for source, row in rows:
        by_source.setdefault(source, []).append(row)
    summary = {source: _rates(by_source[source]) for source in sorted(by_source)}
    per_source = list(summary.values())
    summary["overall"] = _rates([row for _, row in rows])
    macro: dict[str, float | int] = {"count": len(rows)}
    for key in summary["overall"]:
        if key != "count":
            macro[key] = sum(float(entry[key]) for entry in per_source) / len(per_source) if per_source else 0.0
    summary["overall_macro"] = macro
    return summary
