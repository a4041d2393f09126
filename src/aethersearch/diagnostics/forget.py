"""Forget probe: facts the model knows in isolation but loses in the full search context.

WebDetective's first knowledge-degradation probe (arXiv:2510.05137). Each hop of
a hint-free question has a single-hop sub-question (``DiagnosticsRow.hop_questions``).
The ``direct`` agent (no search, parametric knowledge only) answers every
sub-question; then, per hop fact f = (q, i):

* known(f)      = the isolated answer to hop i is correct (exact match against
  the hop's answers, or the LLM judge's verdict when one is given);
* forgotten(f)  = known(f) AND the full-context run answered q wrongly AND it
  failed *at hop i* (:func:`failure_hop`): a hop is never blamed for a failure
  that happened at another hop, e.g. one the model never knew.

The full run fails at the first hop it never reached: hop i is reached when
its evidence was served to the agent (``gathered``, see ``diagnostics.chain_evidence``)
or the agent itself named the hop's answer entity (in a query, a visit, its
reasoning or its answer); a wrong run that reached every hop failed at the
last one (it had the chain but answered wrong).

**The paper's Forget rate** is over *failures*: eligible = the questions with
sufficient evidence that the run failed (``S \\ C``, the same set Lead-astray is
a rate over); forget(q) = eligible(q) AND the hop it failed at is known in
isolation; forget_rate = |forget| / |eligible|. The per-hop rate below is this
project's earlier one, kept as ``known_hop_forget_rate`` = |forgotten| / |known|
(every known hop, also those of questions answered correctly, so it runs lower).
The known hops also feed the factorised metrics as *confirmed parametric*
evidence: knowing hop v_(i-1) -> v_i stands in for reading the page that
states it, so it covers that hop's evidence item (``page``, v_(i-1)).

A hop-question dict needs ``question`` and ``answer`` (str) or ``answers``
(list); its evidence is ``page`` (or ``evidence``), else the i-th item of the
question's evidence chain.

7-source benchmark (no masked path): a MuSiQue row's ``decomposition`` steps
are its hops (:func:`decomposition_hops`). Upstream steps refer to earlier
answers as ``#1``, ``#2``; each reference is replaced by that step's gold
answer so the sub-question stands alone, and a relation step written
``"Green >> performer"`` is asked as ``"What is the performer of Green?"``.
Knowing step i covers its supporting page (``page:<title>``: the i-th
``supporting_pages`` entry when there is one per step, else the step's own
title field); knowing the last step also covers the ``answer`` requirement
(see ``factorised.text_requirements``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from aethersearch.diagnostics.factorised import (
    ANSWER_REQUIREMENT,
    PAGE_PREFIX,
    alias_in_text,
    evidence_of,
    is_correct,
)
from aethersearch.errors import DataError
from aethersearch.records import DiagnosticsRow, RolloutQuestion, Trace

__all__ = ["ForgetResult", "HOP_SEPARATOR", "HopQuestion", "agent_text", "decomposition_hops", "failure_hop",
    "forget_over_failures", "forget_summary", "hop_questions", "probe_questions", "rollout_rows"]

HOP_SEPARATOR = "#hop"
_REFERENCE = re.compile(r"#(\d+)")
_STEP_TITLE_KEYS = ("title", "support_title", "paragraph_title")


class HopQuestion(NamedTuple):
    """One single-hop sub-question of a multi-hop question."""

    probe_id: str
    question_id: str
    hop: int
    question: str
    answers: tuple[str, ...]
    evidence: tuple[str, ...]


def _standalone(row: DiagnosticsRow, index: int, question: str, answers: Sequence[str]) -> str:
    """Step ``index``'s question with ``#k`` replaced by step k's answer and ``A >> r`` phrased as a question."""

    def substitute(match: re.Match[str]) -> str:
        k = int(match.group(1))
        if not 1 <= k <= index:
            raise DataError("diagnostics.jsonl",
                            f"question {row.id!r}: decomposition[{index}] refers to #{k}, which is not an "
                            f"earlier step", field="decomposition",
                            fix="a step may only refer to the answers of the steps before it")
        return answers[k - 1]

    text = _REFERENCE.sub(substitute, question).strip()
    if ">>" in text:
        subject, _, relation = (part.strip() for part in text.partition(">>"))
        text = f"What is the {relation} of {subject}?"
    return text


def decomposition_hops(row: DiagnosticsRow) -> list[dict[str, Any]]:
    """A 7-source row's decomposition steps as stand-alone hop-question dicts (``[]`` when it has none).

    Each dict has ``question``, ``answer`` and ``evidence`` (text-mode requirement
    keys). A step without a string question and answer is a DataError naming the
    row and step: probing half a decomposition would mislabel the hops.
    """
    steps = row.decomposition
    if not steps:
        return []
    answers: list[str] = []
    for index, step in enumerate(steps):
        if not isinstance(step.get("question"), str) or not isinstance(step.get("answer"), str):
            raise DataError("diagnostics.jsonl",
                            f"question {row.id!r}: decomposition[{index}] needs string 'question' and "
                            f"'answer', got keys {sorted(step)}", field="decomposition",
                            fix="keep the upstream question_decomposition steps unchanged")
        answers.append(step["answer"])
    per_step_pages = len(row.supporting_pages) == len(steps)
    out = []
    for index, step in enumerate(steps):
        titles = [row.supporting_pages[index]] if per_step_pages else [
            step[k] for k in _STEP_TITLE_KEYS if isinstance(step.get(k), str) and step[k]][:1]
        evidence = [PAGE_PREFIX + title for title in titles]
        if index == len(steps) - 1:
            evidence.append(ANSWER_REQUIREMENT)
        out.append({"question": _standalone(row, index, step["question"], answers),
                    "answer": step["answer"], "evidence": evidence})
    return out


def hop_questions(row: DiagnosticsRow) -> list[HopQuestion]:
    """The sub-questions of one diagnostics row, each with its answers and evidence page.

    A hint-free row's ``hop_questions``; else a 7-source row's decomposition
    (:func:`decomposition_hops`); else none.
    """
    chain = evidence_of(row)
    items = row.hop_questions or decomposition_hops(row)
    out = []
    for index, item in enumerate(items):
        question = item.get("question")
        answers = item.get("answers")
        if answers is None and isinstance(item.get("answer"), str):
            answers = [item["answer"]]
        if not isinstance(question, str) or not question.strip() or not answers:
            raise DataError("diagnostics.jsonl",
                            f"question {row.id!r}: hop_questions[{index}] needs 'question' and "
                            f"'answer'/'answers', got keys {sorted(item)}",
                            field="hop_questions",
                            fix="rebuild the hint-free release (construct writes both per hop)")
        evidence = tuple(item[k] for k in ("page", "evidence") if isinstance(item.get(k), str))
        if isinstance(item.get("evidence"), list):
            evidence += tuple(str(e) for e in item["evidence"])
        if not evidence:
            evidence = tuple(chain[index:index + 1])
        out.append(HopQuestion(f"{row.id}{HOP_SEPARATOR}{index + 1}", row.id, index + 1,
                               question.strip(), tuple(str(a) for a in answers), evidence))
    return out


def probe_questions(rows: Sequence[DiagnosticsRow]) -> list[HopQuestion]:
    """Every hop sub-question of a release (rows without hop questions contribute none)."""
    return [hop for row in rows for hop in hop_questions(row)]


def rollout_rows(hops: Sequence[HopQuestion]) -> list[RolloutQuestion]:
    """The sub-questions as rollout rows (``{id, question}``) for the no-search runner."""
    return [RolloutQuestion(id=hop.probe_id, question=hop.question) for hop in hops]


class ForgetResult(NamedTuple):
    """The probe's summary (``probes.json["forget"]``) and the parametric evidence per question."""

    summary: dict[str, Any]
    parametric: dict[str, frozenset[str]]


def agent_text(trace: Trace) -> str:
    """Everything the agent itself wrote in an episode: model outputs, tool arguments, response, answer."""
    parts: list[str] = [trace.response, trace.prediction or ""]
    for step in trace.steps:
        if step.llm is not None:
            parts.append(step.llm.text)
        for call in step.tool_calls:
            parts.extend(str(v) for k, v in call.arguments.items() if not k.startswith("_"))
    return "\n".join(parts)


def failure_hop(hops: Sequence[HopQuestion], gathered: frozenset[str], text: str) -> int | None:
    """The hop (1-based) at which a wrong full-context run failed: the first one it never reached.

    Hop i is reached when its evidence is in ``gathered`` (served to the agent)
    or the agent named one of its answers in ``text`` (:func:`agent_text`); if
    every hop was reached the run failed at the last hop. ``None`` for a
    question without hop questions.
    """
    if not hops:
        return None
    for hop in sorted(hops, key=lambda h: h.hop):
        served = bool(hop.evidence) and set(hop.evidence) <= gathered
        if not served and not alias_in_text(list(hop.answers), text):
            return hop.hop
    return max(h.hop for h in hops)


def forget_summary(hops: Sequence[HopQuestion], isolated: Mapping[str, str | None],
                   full_correct: Mapping[str, bool], failed_at: Mapping[str, int | None],
                   isolated_correct: Mapping[str, bool] | None = None) -> ForgetResult:
    """Compare isolated hop answers (probe id → prediction) with the full-context run (id → correct).

    ``failed_at``: question id → the hop its wrong full run failed at
    (:func:`failure_hop`). ``isolated_correct`` (probe id → verdict, e.g. the
    LLM judge's) overrides exact match for the isolated answers. Hops whose
    question is missing from the full run are left out (it was not run); a hop
    missing from ``isolated`` counts as not known (the probe gave no answer).
    """
    known: list[HopQuestion] = []
    forgotten: list[HopQuestion] = []
    parametric: dict[str, set[str]] = {}
    considered = [hop for hop in hops if hop.question_id in full_correct]
    for hop in considered:
        ok = (isolated_correct.get(hop.probe_id, False) if isolated_correct is not None
              else is_correct(isolated.get(hop.probe_id), hop.answers))
        if not ok:
            continue
        known.append(hop)
        parametric.setdefault(hop.question_id, set()).update(hop.evidence)
        if not full_correct[hop.question_id] and failed_at.get(hop.question_id) == hop.hop:
            forgotten.append(hop)
    questions_known = {hop.question_id for hop in known}
    questions_forgot = {hop.question_id for hop in forgotten}
    wrong = [q for q, ok in full_correct.items() if not ok]
    summary = {
        "n_hops": len(considered),
        "n_known_in_isolation": len(known),
        "n_forgotten": len(forgotten),
        "known_hop_forget_rate": len(forgotten) / len(known) if known else None,
        "isolated_accuracy": len(known) / len(considered) if considered else None,
        "n_questions_with_known_hop": len(questions_known),
        "n_questions_forgetting": len(questions_forgot),
        "question_forget_rate": (len(questions_forgot) / len(questions_known)
                                 if questions_known else None),
        "forgotten": [hop.probe_id for hop in forgotten],
        "failed_at": {q: failed_at.get(q) for q in sorted(wrong)},
        "known_hop_definition": "known = hop sub-question answered correctly without search; forgotten = known, "
                                "the full-context run answered wrongly, and it failed at this hop (the first hop "
                                "it never reached: evidence not served and entity never named; the last hop if all "
                                "were reached); known_hop_forget_rate = forgotten / known",
    }
    return ForgetResult(summary, {q: frozenset(v) for q, v in parametric.items()})


def forget_over_failures(summary: Mapping[str, Any], eligible: Sequence[str] | None) -> dict[str, Any]:
    """The paper's Forget rate from a :func:`forget_summary`: forgetting failures / sufficient-evidence failures.

    ``eligible``: ids of the run's sufficient-evidence failures (``S \\ C``), or
    ``None`` when sufficiency could not be judged (no corpus given): then the
    rate is ``None`` and ``forget_rate_reason`` says why.
    """
    if eligible is None:
        return {"forget_rate": None, "n_eligible": None, "eligible_ids": None, "forget_ids": None,
                "forget_rate_reason": "needs the corpus to judge evidence sufficiency (pass --corpus)"}
    forgetting = {probe_id.rsplit(HOP_SEPARATOR, 1)[0] for probe_id in summary["forgotten"]}
    ids = [qid for qid in eligible if qid in forgetting]
    return {"forget_rate": len(ids) / len(eligible) if eligible else None, "n_eligible": len(eligible),
            "n_forget": len(ids), "eligible_ids": list(eligible), "forget_ids": ids,
            "definition": "eligible = sufficient-evidence failures (|S \\ C|, errors excluded); forget = eligible "
                          "and the hop the run failed at is answered correctly without search; rate = forget / "
                          "eligible"}
