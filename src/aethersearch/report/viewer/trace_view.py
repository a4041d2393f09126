"""One trace as the model lived it: prompt, each turn's text split by tags, searches with their documents,
page visits, the scored answer, and for sandbox questions the evidence chain with its factorised outcome.

Why built here and not in the template: what a reader must trust (which answer
was scored and how, which chain page was locked) comes from the toolkit's own
functions (``resolve_trace`` extracts the answer exactly as the scorer did;
``ChainMask`` decides locks and renders a page as the sandbox served it), so
the page can never disagree with the scores. Gold aliases are marked only in
text the *viewer* shows: it is the evaluator's view, labelled so, never what
the agent saw.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from markupsafe import Markup, escape

from aethersearch.agents.prompts import SEARCH_R1_CONFIDENCE_PROMPT
from aethersearch.diagnostics.factorised import FactorisedRow
from aethersearch.errors import AetherError
from aethersearch.records import DiagnosticsRow, Document, Outcome, Trace
from aethersearch.report.viewer.runs import LoadedRun
from aethersearch.sandbox.mask import ChainMask
from aethersearch.scoring.extract import resolve_trace, searchr1_prompt
from aethersearch.stated_confidence import elicits_confidence

__all__ = ["Corpus", "PROMPTS_KNOWN", "Segment", "TAG", "chain_view", "mark_golds", "pick_trace", "segments",
    "trace_view"]

TAG = re.compile(r"<(think|search|answer|information|tool_call)>(.*?)</\1>", re.DOTALL)
PROMPTS_KNOWN = {"search-r1": searchr1_prompt}
"""Agents whose prompt is a fixed template of the question: the page rebuilds it (labelled as rebuilt)."""


class Segment(NamedTuple):
    """A piece of generated text: ``kind`` is a tag name (``think``, ``search``, ...) or ``text``."""

    kind: str
    html: Markup


def mark_golds(text: str, golds: Sequence[str]) -> Markup:
    """``text`` escaped, with every case-insensitive whole-word occurrence of a gold alias in ``<mark>``."""
    aliases = sorted({g for g in golds if g.strip()}, key=len, reverse=True)
    if not aliases:
        return escape(text)
    pattern = re.compile(r"(?<!\w)(" + "|".join(re.escape(a) for a in aliases) + r")(?!\w)", re.IGNORECASE)
    out, last = [], 0
    for match in pattern.finditer(text):
        out.append(escape(text[last:match.start()]))
        out.append(Markup('<mark class="gold" title="gold alias (evaluator\'s view)">{}</mark>').format(match.group(0)))
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def segments(text: str, golds: Sequence[str]) -> list[Segment]:
    """Generated text cut at its tags; retrieved ``<information>`` blocks get the gold marks."""
    found, last = [], 0
    for match in TAG.finditer(text):
        if match.start() > last:
            found.append(Segment("text", escape(text[last:match.start()])))
        kind, inner = match.group(1), match.group(2)
        found.append(Segment(kind, mark_golds(inner, golds) if kind == "information" else escape(inner)))
        last = match.end()
    if last < len(text):
        found.append(Segment("text", escape(text[last:])))
    return found


class Corpus(NamedTuple):
    """The document store the run searched (optional: without it only ids and recorded observations show)."""

    store: Any
    content_hash: str


def _document(corpus: Corpus | None, doc_id: str) -> Document | None:
    if corpus is None or doc_id not in corpus.store:
        return None
    doc: Document = corpus.store.get(doc_id)
    return doc


def _documents(call: Mapping[str, Any], corpus: Corpus | None, mask: ChainMask | None, golds: Sequence[str]
               ) -> list[dict[str, Any]]:
    scores = call.get("returned_scores") or []
    docs = []
    for rank, doc_id in enumerate(call.get("returned_ids") or [], start=1):
        doc = _document(corpus, doc_id)
        if doc is not None and mask is not None:
            doc = mask.render(doc)  # the page as the sandbox served it
        docs.append({"rank": rank, "id": doc_id, "score": scores[rank - 1] if rank <= len(scores) else None,
                     "title": doc.title if doc else None,
                     "text": mark_golds(doc.text[:1500], golds) if doc else None})
    return docs


def _turns(trace: Mapping[str, Any], corpus: Corpus | None, mask: ChainMask | None, golds: Sequence[str]
           ) -> list[dict[str, Any]]:
    turns = []
    for step in trace.get("steps") or []:
        llm = step.get("llm") or {}
        calls = []
        for call in step.get("tool_calls") or []:
            calls.append({"tool": call.get("tool"), "arguments": call.get("arguments") or {},
                          "error": call.get("error"), "suppressed": call.get("suppressed_ids") or [],
                          "documents": _documents(call, corpus, mask, golds)})
        observation = step.get("observation")
        turns.append({"index": step.get("index"), "agent": step.get("agent"),
                      "generated": segments(llm.get("text") or "", golds) if llm else [],
                      "finish_reason": llm.get("finish_reason"), "tokens": (llm.get("prompt_tokens"),
                                                                            llm.get("completion_tokens")),
                      "calls": calls, "observation": mark_golds(observation, golds) if observation else None,
                      "notes": step.get("notes") or {}})
    return turns


def _extraction(trace: Mapping[str, Any], compat: str | None, golds: Sequence[str], *,
                stated_confidence: bool = False) -> dict[str, Any]:
    """How the scored answer was taken from the response: the scorer's own ``resolve_trace``
    (with the stated confidence split off, as the scorer does, for stated-confidence runs)."""
    try:
        record = Trace.model_validate({k: v for k, v in trace.items() if k in Trace.model_fields})
        found = resolve_trace(record, compat=compat, golds=list(golds) or None, stated_confidence=stated_confidence)
    except (AetherError, ValueError) as exc:
        return {"prediction": trace.get("prediction"), "outcome": trace.get("outcome"),
                "rule": f"the trace does not validate as a Trace record ({exc}); shown as recorded"}
    if compat == "searchr1":
        rule = "Search-R1 compatibility: the last <answer> span of prompt + response, only when there are two or more"
    elif found.matches:
        rule = f"the last of {found.matches} <answer> span(s) the model wrote (retrieved <information> skipped)"
    elif found.prediction is not None:
        rule = "the agent's recorded prediction (it reports its answer without <answer> tags)"
    elif found.outcome is not Outcome.NO_ANSWER_TAG:
        rule = f"the episode stopped ({found.outcome.value}): nothing is scored"
    else:
        rule = "no <answer> tag in the response: scored as no_answer_tag, never as a wrong answer"
    if found.confidence_status is not None:
        stated = "no confidence" if found.confidence is None else f"confidence {100 * found.confidence:g}%"
        rule += f"; stated confidence split off the answer: {stated} ({found.confidence_status})"
    return {"prediction": found.prediction, "outcome": found.outcome.value, "rule": rule}


def chain_view(diagnostics: DiagnosticsRow | None, trace: Mapping[str, Any], factorised: FactorisedRow | None
               ) -> dict[str, Any] | None:
    """The question's chain v0 -> ... -> vn with each page visited, unlocked or still masked, and the outcome.

    A page ``v_i`` is unlocked once ``v_(i-1)`` was visited (``ChainMask.is_locked``);
    evidence pages are marked gathered as the factorised scorer classified them.
    """
    if diagnostics is None or not diagnostics.path:
        return None
    visited: set[str] = set()
    for step in trace.get("steps") or []:
        for call in step.get("tool_calls") or []:
            if call.get("tool") == "visit" and not call.get("error"):
                visited.update(call.get("returned_ids") or [])
    mask_json = diagnostics.extra.get("mask")
    mask = ChainMask.from_json(mask_json) if isinstance(mask_json, dict) else None
    gathered = set(factorised.gathered if factorised is not None else ())
    evidence = set(factorised.evidence if factorised is not None and factorised.evidence else diagnostics.evidence)
    nodes = []
    for position, page in enumerate(diagnostics.path):
        locked = mask.is_locked(page, visited) if mask is not None else False
        state = "visited" if page in visited else "masked" if locked else "unlocked"
        nodes.append({"page": page, "state": state, "evidence": page in evidence, "gathered": page in gathered,
                      "role": "subject" if position == 0 else "answer" if position == len(diagnostics.path) - 1
                      else f"hop {position}"})
    outcome = None
    if factorised is not None:
        sufficient = factorised.sufficient
        outcome = {"sufficient": sufficient, "refused": factorised.outcome == Outcome.ABSTAINED,
                   "utilised": factorised.correct if sufficient else None,
                   "search_credit": factorised.search_score, "hops": factorised.hops}
    return {"nodes": nodes, "outcome": outcome}


def pick_trace(lines: Sequence[dict[str, Any]], sample: int | None) -> tuple[dict[str, Any] | None, list[int]]:
    """The scored line: the latest attempt (of ``sample`` when the traces carry samples), and the sample numbers."""
    samples = sorted({line["sample"] for line in lines if isinstance(line.get("sample"), int)})
    chosen = None
    for line in lines:
        if samples and line.get("sample") != (sample if sample in samples else samples[0]):
            continue
        if chosen is None or int(line.get("attempt", 1)) >= int(chosen.get("attempt", 1)):
            chosen = line
    return chosen, samples


def _scored_values(scored: Any, sample: Any, samples: int) -> dict[str, Any]:
    """The page's scores: this sample's own values, and apart from them the question's mean over K samples.

    A K-sample question's ``values`` are mean@K; showing them on one sample's page would give a plainly
    wrong answer EM 0.2. So ``values`` is the shown sample's own row and ``question_mean`` the mean@K.
    """
    if scored is None:
        return {"values": {}, "question_mean": None}
    own = next((s for s in scored.samples if s.sample == sample), None) if samples > 1 else None
    if own is None:
        return {"values": dict(scored.values), "question_mean": None}
    return {"values": dict(own.values), "question_mean": {"k": len(scored.samples), "values": dict(scored.values)}}


def trace_view(run: LoadedRun, qid: str, golds: Sequence[str], diagnostics: DiagnosticsRow | None,
               corpus: Corpus | None, sample: int | None = None) -> dict[str, Any] | None:
    """Everything the one-trace page shows for ``qid`` in ``run`` (None when the run has no trace of it)."""
    trace, samples = pick_trace(run.read_traces(qid), sample)
    if trace is None:
        return None
    mask_json = diagnostics.extra.get("mask") if diagnostics is not None else None
    mask = ChainMask.from_json(mask_json) if isinstance(mask_json, dict) else None
    agent = str(trace.get("agent") or "")
    template = PROMPTS_KNOWN.get(run.fingerprint.agent if run.fingerprint else agent)
    stated = bool(run.fingerprint and elicits_confidence(run.fingerprint.agent_config))
    if stated:  # the stated-confidence variant's prompt, not Search-R1's own

        def template(question: str) -> str:
            return SEARCH_R1_CONFIDENCE_PROMPT.format(question=question)
    question = str(trace.get("question_seen") or "")
    scored = run.questions.get(qid)
    return {
        "id": qid, "agent": agent, "question": question, "golds": list(golds),
        "prompt": template(question) if template else None,
        "turns": _turns(trace, corpus, mask, golds),
        "response": segments(str(trace.get("response") or ""), golds),
        "extraction": _extraction(trace, run.scores.compat if run.scores else None, golds, stated_confidence=stated),
        **_scored_values(scored, trace.get("sample"), len(samples)),
        "judges": [{"name": name, "verdict": verdict, "reply": scored.judge_replies.get(name)}
                   for name, verdict in scored.judge_verdicts.items()] if scored else [],
        "stop_reason": trace.get("stop_reason"), "error": trace.get("error"), "usage": trace.get("usage") or {},
        "elapsed_s": trace.get("elapsed_s"), "attempt": trace.get("attempt", 1),
        "samples": samples, "sample": trace.get("sample"),
        "chain": chain_view(diagnostics, trace, run.factorised.get(qid)),
        "masked_view": mask is not None and corpus is not None,
    }
