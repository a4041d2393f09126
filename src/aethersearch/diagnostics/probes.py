"""Run-level diagnostics: ``factorised.json`` and ``probes.json`` beside a run's ``scores.json``.

Why a separate stage: like scoring, diagnostics read only files (the run's
``run.json``/``traces.jsonl`` and the release's ``eval.jsonl``/``diagnostics.jsonl``),
so they can be recomputed at no model cost; the two probes rerun agents, and do
it through the ordinary runner into sub-directories of the run
(``<run>/probes/forget``, ``<run>/probes/lead_astray-r<ratio>-s<seed>``), so they
resume like any run and never touch the original traces.

* :func:`factorise_run` — the factorised metrics (see ``factorised.py``); it picks
  up the Forget probe's confirmed parametric evidence from ``probes.json`` when
  the probe has been run.
* :func:`forget_probe` — the hop sub-questions (a hint-free release's
  ``hop_questions``, or MuSiQue decompositions on the 7-source benchmark) through
  the ``direct`` agent (no tools), compared with the full run (see ``forget.py``).
* :func:`lead_astray_probe` — the paper's Lead-astray: the run's own agent and
  settings re-asked on its sufficient-evidence failures with only the clean
  hop statements its trajectory was served (see ``lead_astray.py``).
* :func:`distractor_probe` — this project's robustness probe: the run's agent
  rerun with seeded corpus distractors in every observation (``distractors.py``).

Both paper probes are rates over the same failures (``S \\ C``); ``probes.json``
carries them side by side under ``degradation`` with Forget minus Lead-astray.
Formulas: ``docs/webdetective-metrics.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aethersearch.corpus.base import DocumentStore
from aethersearch.diagnostics.chain_evidence import chain_evidence
from aethersearch.diagnostics.distractors import NoisyEnvironment, distractor_summary
from aethersearch.diagnostics.factorised import (
    FACTORISED_ROWS_FILE,
    EpisodeEvidence,
    FactorisedRow,
    episode_from_sandbox,
    episode_from_text,
    episode_rows,
    factorise,
    is_correct,
    supporting_titles,
)
from aethersearch.diagnostics.forget import (
    agent_text,
    failure_hop,
    forget_over_failures,
    forget_summary,
    probe_questions,
    rollout_rows,
)
from aethersearch.diagnostics.lead_astray import (
    CleanEvidenceEnvironment,
    clean_evidence,
    lead_astray_summary,
    sufficient_failures,
)
from aethersearch.diagnostics.probes_file import (
    FACTORISED_FILE,
    PROBES_FILE,
    Degradation,
    DistractorProbe,
    ForgetProbe,
    LeadAstrayProbe,
    ProbesFile,
    read_probes,
    write_factorised,
    write_probes,
)
from aethersearch.environment import Environment
from aethersearch.errors import ConfigError, DataError
from aethersearch.jsonl import (
    iter_jsonl,
    loads,
    validate_row,
    write_jsonl,
)
from aethersearch.records import (
    ERROR_OUTCOMES,
    Budget,
    DiagnosticsRow,
    EvalRow,
    Outcome,
    RolloutQuestion,
    RunFingerprint,
    Trace,
)
from aethersearch.release_layout import release_layout
from aethersearch.rollout.samples import unit_label
from aethersearch.scoring.extract import Extraction, resolve_trace
from aethersearch.scoring.join import load_release
from aethersearch.scoring.judge import JudgeCase, JudgeConfig, judge_cases
from aethersearch.scoring.reducers import SAMPLE_MEAN_RULE, mean_over_samples

if TYPE_CHECKING:
    from aethersearch.agents.llm import LLM

__all__ = ["DIAGNOSTICS_FILE", "FACTORISED_FILE", "FACTORISED_ROWS_FILE", "InnerFactory", "PROBES_FILE",
    "ROLLOUT_FILE", "RUN_FILE", "TRACES_FILE", "degradation", "distractor_probe", "episodes_for_run",
    "factorise_run", "forget_probe", "judged_correct", "lead_astray_probe", "load_diagnostics", "load_fingerprint",
    "load_sample_traces", "load_traces", "parametric_from_probes", "read_probes", "scored_judge_correct"]

DIAGNOSTICS_FILE = "diagnostics.jsonl"
TRACES_FILE = "traces.jsonl"
RUN_FILE = "run.json"
ROLLOUT_FILE = "rollout_questions.jsonl"

InnerFactory = Callable[[RolloutQuestion], Environment | Awaitable[Environment]]


# ----------------------------------------------------------------------------- loading


def load_diagnostics(release_dir: Path) -> dict[str, DiagnosticsRow]:
    """The release's ``diagnostics.jsonl`` by id (an error naming the file when it is missing)."""
    path = release_layout(release_dir).diagnostics
    if not path.is_file():
        raise DataError(path, "release has no diagnostics.jsonl",
                        fix="factorised metrics need the release's diagnostics sidecar; rebuild the release")
    return {row.id: row for row in (validate_row(path, n, v, DiagnosticsRow) for n, v in iter_jsonl(path))}


def load_sample_traces(run_dir: Path) -> dict[int, dict[str, Trace]]:
    """Per sample index, the latest trace per question id of a run (a resumed run appends retries)."""
    path = Path(run_dir) / TRACES_FILE
    if not path.is_file():
        raise DataError(path, "run has no traces.jsonl",
                        fix="diagnostics need the full traces; point at a run directory made by `aether run`")
    latest: dict[int, dict[str, Trace]] = {}
    for number, value in iter_jsonl(path):
        trace = validate_row(path, number, value, Trace)
        latest.setdefault(trace.sample, {})[trace.id] = trace
    return dict(sorted(latest.items()))


def load_traces(run_dir: Path) -> dict[str, Trace]:
    """The latest trace per question id of a one-sample run; a run of K > 1 samples is refused.

    Why refused: a probe reruns one question's episode; picking one of K samples
    (or the last one written) would describe a sample nobody chose.
    """
    by_sample = load_sample_traces(run_dir)
    if len(by_sample) > 1 or any(by_sample.keys() - {0}):
        raise DataError(Path(run_dir) / TRACES_FILE, f"run has {max(by_sample) + 1} samples per question; "
                        "this diagnostic reads one trace per question",
                        fix="run the probes on a one-sample run (aether run without --samples); factorised "
                            "metrics (aether factorise) do read every sample")
    return by_sample.get(0, {})


def load_fingerprint(run_dir: Path) -> RunFingerprint:
    """The run's ``run.json``."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise DataError(path, "run has no run.json", fix="point at a run directory made by the runner")
    try:
        value = loads(path.read_bytes())
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix="restore run.json") from None
    return validate_row(path, 1, value, RunFingerprint)


def degradation(probes: ProbesFile) -> Degradation:
    """Forget and Lead-astray side by side, and Forget minus Lead-astray when both are over the same failures."""
    forget, astray = probes.forget, probes.lead_astray
    f_rate = forget.forget_rate if forget is not None else None
    l_rate = astray.lead_astray_rate if astray is not None else None
    same = (forget is not None and astray is not None and forget.eligible_ids is not None
            and forget.eligible_ids == astray.eligible_ids)
    difference = (f_rate - l_rate) if same and f_rate is not None and l_rate is not None else None
    fields: dict[str, Any] = {
        "forget_rate": f_rate, "forget_n_eligible": forget.n_eligible if forget is not None else None,
        "lead_astray_rate": l_rate, "lead_astray_n_eligible": astray.n_eligible if astray is not None else None,
        "forget_minus_lead_astray": difference}
    if difference is None:
        fields["difference_reason"] = ("both rates are needed, over the same sufficient-evidence failures (run the "
                                       "Forget probe first: its parametric evidence decides sufficiency)")
    return Degradation(**fields)


#: the record each probe's summary is checked against before it is written
_SECTIONS: dict[str, type[ForgetProbe | LeadAstrayProbe | DistractorProbe]] = {
    "forget": ForgetProbe, "lead_astray": LeadAstrayProbe, "distractors": DistractorProbe}


def _write_probe(run_dir: Path, key: str, summary: dict[str, Any]) -> ProbesFile:
    """Merge one probe's summary into ``probes.json`` (typed: a summary field the record lacks is refused)."""
    probes = read_probes(run_dir).model_copy(update={key: _SECTIONS[key].model_validate(summary)})
    probes = probes.model_copy(update={"degradation": degradation(probes)})
    write_probes(run_dir, probes)
    return probes


def parametric_from_probes(run_dir: Path) -> dict[str, frozenset[str]]:
    """Confirmed parametric evidence per question recorded by an earlier Forget probe."""
    forget = read_probes(run_dir).forget
    parametric = forget.parametric if forget is not None else None
    return {qid: frozenset(pages) for qid, pages in (parametric or {}).items()}


def _scored(traces: Mapping[str, Trace]) -> dict[str, Extraction]:
    """The scorer's answer and outcome per trace, errors left out (they are retried, not scored)."""
    out = {qid: resolve_trace(trace) for qid, trace in traces.items()}
    return {qid: scored for qid, scored in out.items() if scored.outcome not in ERROR_OUTCOMES}


def _answered(traces: Mapping[str, Trace]) -> dict[str, Extraction]:
    """Only the traces that gave an answer (an isolated "I don't know" is not knowledge)."""
    return {qid: s for qid, s in _scored(traces).items() if s.outcome is Outcome.ANSWERED}


def _gold(release_dir: Path) -> dict[str, EvalRow]:
    return {row.id: row for row in load_release(release_dir)}


# ----------------------------------------------------------------------------- factorised


def episodes_for_run(traces: Mapping[str, Trace], diagnostics: Mapping[str, DiagnosticsRow],
                     gold: Mapping[str, EvalRow], *, environment: str,
                     store: DocumentStore | None = None,
                     parametric: Mapping[str, frozenset[str]] | None = None,
                     gathering_tools: Sequence[str] | None = None,
                     correct: Mapping[str, bool] | None = None) -> list[EpisodeEvidence]:
    """Classify every traced question of the release (chain mode or 7-source text mode).

    Chain mode (a hint-free release: every row has a multi-hop path) judges
    each hop from the text served to the agent, rebuilt from ``store``
    (``diagnostics.chain_evidence``); the masked rendering applies when the run
    browsed the sandbox. Text mode needs ``store`` too. ``correct`` (question id
    -> verdict, e.g. from the LLM judge) overrides exact match.
    """
    parametric = parametric or {}
    correct = correct or {}
    hint_free = bool(diagnostics) and all(len(row.path) >= 3 for row in diagnostics.values())
    if store is None:
        what = "judge each hop from the text served to the agent" if hint_free else \
            "read the retrieved text (the 7-source benchmark has no evidence chains)"
        raise ConfigError(f"factorised metrics {what} and need the corpus",
                          fix="pass --corpus DIR (the document store the run searched)")
    out: list[EpisodeEvidence] = []
    for qid in gold:
        trace = traces.get(qid)
        if trace is None:
            continue
        if qid not in diagnostics:
            raise DataError(DIAGNOSTICS_FILE, f"question {qid!r} has no diagnostics row",
                            fix="the release's diagnostics.jsonl must cover every question")
        row, golds = diagnostics[qid], gold[qid].answers
        if hint_free:
            out.append(episode_from_sandbox(trace, row, golds, store=store, masked=environment == "sandbox",
                                            parametric=parametric.get(qid, ()), correct=correct.get(qid)))
        else:
            out.append(episode_from_text(trace, row, golds, store, parametric=parametric.get(qid, ()),
                                         gathering_tools=gathering_tools or ("search", "visit", "access"),
                                         correct=correct.get(qid)))
    return out


def judged_correct(traces: Mapping[str, Trace], golds: Mapping[str, Sequence[str]], judge: JudgeConfig | None,
                   cache_dir: Path, *, questions: Mapping[str, str] | None = None) -> dict[str, bool]:
    """Question id -> the LLM judge's verdict is "correct", for every answered trace (``{}`` without a judge).

    The same judge, prompt and cache as ``aether score --judge`` (``scoring.judge``). A question
    the judge could not rule on is left out of the map (a judge error is never a grade): its
    correctness falls back to exact match. ``questions`` supplies the question text (default:
    what the agent saw).
    """
    if judge is None:
        return {}
    if judge.cache_path is None:
        judge = judge.model_copy(update={"cache_path": Path(cache_dir) / "judge_cache.jsonl"})
    cases = []
    for qid, scored in _answered(traces).items():
        if qid in golds and scored.prediction is not None:
            text = (questions or {}).get(qid, traces[qid].question_seen)
            cases.append(JudgeCase(qid, text, list(golds[qid]), scored.prediction))
    verdicts = judge_cases(cases, judge)
    return {qid: verdict.verdict == "correct" for qid, verdict in verdicts.items() if verdict.verdict is not None}


def scored_judge_correct(run_dir: Path, name: str) -> dict[str, bool]:
    """Question id -> the named judge's verdict is "correct", read from the run's ``aether score`` rows.

    ``factorise --correct judge:NAME``: no judge is called again, so the factorised metrics use exactly
    the verdicts the scores do. A question that judge gave no verdict on is left out (exact match then).
    """
    from aethersearch.scoring.scores_file import read_scores

    scores = read_scores(run_dir)
    names = [j.name or j.model for j in scores.judges] or ([scores.judge.name or scores.judge.model]
                                                            if scores.judge is not None else [])
    if name not in names:
        raise ConfigError(f"{run_dir} was not scored with a judge named {name!r}",
                          fix=(f"use one of: {', '.join('judge:' + n for n in names)}" if names else
                               "score the run with `aether score RUN --release DIR --judge URL` first"))
    return {q.id: q.judge_verdicts[name] == "correct" for q in scores.per_question
            if q.judge_verdicts.get(name) not in (None, "error")}


def factorise_run(run_dir: Path, release_dir: Path, *, store: DocumentStore | None = None,
                  gathering_tools: Sequence[str] | None = None, write: bool = True,
                  judge: JudgeConfig | None = None, correct_from: str = "em") -> dict[str, Any]:
    """Compute ``factorised.json`` for a run (and ``factorised_questions.jsonl``), writing both atomically.

    Release questions without a trace (a partial run) are listed under ``missing``
    and left out of ``n``; error outcomes are counted as ``n_errors``. With
    ``judge``, correctness (Pass@1, F1_KU) is the LLM judge's verdict; ``correct_from="judge:NAME"``
    takes it from that judge's verdicts in the run's scores instead (no call), recorded in the output.
    """
    run_dir, release_dir = Path(run_dir), Path(release_dir)
    fingerprint = load_fingerprint(run_dir)
    parametric = parametric_from_probes(run_dir)
    by_sample, gold = load_sample_traces(run_dir), _gold(release_dir)
    diagnostics = load_diagnostics(release_dir)
    per_sample: list[dict[str, Any]] = []
    rows: list[FactorisedRow] = []
    missing: list[str] = []
    for sample in range(fingerprint.samples):  # each sample index is one replicate of the whole evaluation
        traces = by_sample.get(sample, {})
        correct = (scored_judge_correct(run_dir, correct_from.split(":", 1)[1]) if correct_from.startswith("judge:")
                   else judged_correct(traces, {qid: list(row.answers) for qid, row in gold.items()}, judge,
                                       run_dir))
        episodes = episodes_for_run(traces, diagnostics, gold, environment=fingerprint.environment, store=store,
                                    parametric=parametric, gathering_tools=gathering_tools, correct=correct)
        per_sample.append(factorise(episodes))
        rows.extend(episode_rows(episodes, sample if fingerprint.samples > 1 else None))
        # questions the run has no trace for cannot be classified: listed, never silently dropped
        missing.extend(unit_label((qid, sample)) for qid in gold if qid not in traces)
    result = per_sample[0] if fingerprint.samples == 1 else {
        **mean_over_samples(per_sample), "samples": fingerprint.samples, "reduced": SAMPLE_MEAN_RULE}
    result["missing"] = missing
    result["run"] = {"agent": fingerprint.agent, "model": fingerprint.model,
                     "environment": fingerprint.environment, "release_id": fingerprint.release_id,
                     "agent_config": fingerprint.agent_config,
                     "budget": fingerprint.budget.model_dump(mode="json")}
    result["parametric_source"] = "probes.json forget" if parametric else None
    result["correctness"] = (
        {"from": correct_from, "source": "scores_questions.jsonl judge_verdicts (exact match where none)"}
        if correct_from.startswith("judge:") else
        {"judge": judge.model, "base_url": judge.base_url, "prompt_sha256": judge.prompt_sha256,
         "parser": judge.parser, "judge_errors": "exact match"} if judge is not None else "exact match")
    if write:
        write_jsonl(run_dir / FACTORISED_ROWS_FILE, [row.line() for row in rows])
        write_factorised(run_dir, result)
    return result


# ----------------------------------------------------------------------------- probes


def forget_probe(run_dir: Path, release_dir: Path, *, llm: LLM | None,
                 concurrency: int = 8, budget: Budget | None = None, store: DocumentStore | None = None,
                 judge: JudgeConfig | None = None) -> dict[str, Any]:
    """Run the Forget probe for a run and record it in ``probes.json`` (returns the probe summary).

    A run whose agent uses no LLM has no parametric memory: the probe is recorded
    as not applicable, with the reason, rather than faked. ``store`` lets the
    per-hop attribution see which hops' evidence the full run was served
    (without it only the entities the agent named count as reached) and judges
    sufficiency, which the paper's Forget rate (over sufficient-evidence
    failures) needs; without it that rate is ``None`` with the reason.
    ``judge`` rules on isolated and full-context answers instead of exact match.
    """
    from aethersearch.agents.base import make_agent
    from aethersearch.rollout.fingerprint import rollout_file_info
    from aethersearch.rollout.runner import NoEnvironment
    from aethersearch.rollout.session import RunSettings, SearchSetup, start_run

    run_dir, release_dir = Path(run_dir), Path(release_dir)
    fingerprint = load_fingerprint(run_dir)
    traces = load_traces(run_dir)
    hops = probe_questions([row for qid, row in load_diagnostics(release_dir).items() if qid in traces])
    if not hops:
        raise DataError(Path(release_dir) / DIAGNOSTICS_FILE, "no hop_questions for any traced question",
                        fix="the Forget probe needs hop sub-questions: a hint-free release (construct writes "
                                "hop_questions) or MuSiQue decompositions in the sidecar")
    if llm is None:
        eligible = None
        if store is not None:
            eligible = sufficient_failures(episodes_for_run(traces, load_diagnostics(release_dir), _gold(release_dir),
                                                            environment=fingerprint.environment, store=store,
                                                            parametric=parametric_from_probes(run_dir)))
        summary: dict[str, Any] = {"applicable": False, "n_hops": len(hops), "forget_rate": None,
                                   "n_eligible": None if eligible is None else len(eligible),
                                   "eligible_ids": eligible,
                                   "reason": f"agent {fingerprint.agent!r} runs without a model, so it has no "
                                             "parametric knowledge to forget; pass --endpoint/--model to probe a model"}
        _write_probe(run_dir, "forget", summary)
        return summary
    probe_dir = run_dir / "probes" / "forget"
    questions_path = probe_dir / ROLLOUT_FILE
    write_jsonl(questions_path, rollout_rows(hops))
    agent = make_agent("direct")
    budget = budget or Budget(max_tool_calls=0, max_turns=1)
    # the one run path: same fingerprint fields and error rule as `aether run` (a probe of errors is no probe)
    settings = RunSettings(agent=agent.name, budget=budget, decoding=fingerprint.decoding, concurrency=concurrency,
                           endpoint=llm.endpoint if llm is not None else None, model=llm.model if llm is not None else None)
    start_run(rollout_file_info(questions_path), settings,
              SearchSetup(lambda _q: NoEnvironment(), None, None, "no tools", environment="none"), probe_dir,
              questions=rollout_rows(hops), agent=agent, llm=llm)
    probe_traces = load_traces(probe_dir)
    isolated = {qid: scored.prediction for qid, scored in _answered(probe_traces).items()}
    gold = _gold(release_dir)
    golds = {qid: list(row.answers) for qid, row in gold.items()}
    judged = judged_correct(traces, golds, judge, run_dir)
    hop_golds = {hop.probe_id: list(hop.answers) for hop in hops}
    isolated_correct = (judged_correct(probe_traces, hop_golds, judge, run_dir) if judge is not None else None)
    full_correct = {qid: scored.outcome is Outcome.ANSWERED and judged.get(
                        qid, judge is None and is_correct(scored.prediction, gold[qid].answers))
                    for qid, scored in _scored(traces).items() if qid in gold}
    gathered: dict[str, frozenset[str]] = {}
    if store is not None:
        diagnostics = load_diagnostics(release_dir)
        gathered = {ep.id: ep.gathered for ep in episodes_for_run(
            traces, diagnostics, gold, environment=fingerprint.environment, store=store)}
    by_question: dict[str, list[Any]] = {}
    for hop in hops:
        by_question.setdefault(hop.question_id, []).append(hop)
    failed_at = {qid: failure_hop(by_question.get(qid, []), gathered.get(qid, frozenset()),
                                  agent_text(traces[qid]))
                 for qid, ok in full_correct.items() if not ok}
    result = forget_summary(hops, isolated, full_correct, failed_at, isolated_correct)
    eligible = None
    if store is not None:  # sufficiency counts the parametric hops this probe just confirmed
        eligible = sufficient_failures(episodes_for_run(traces, load_diagnostics(release_dir), gold,
                                                        environment=fingerprint.environment, store=store,
                                                        parametric=result.parametric, correct=judged))
    summary = {"applicable": True, **forget_over_failures(result.summary, eligible), **result.summary,
               "model": llm.model if llm is not None else None,
               "probe_dir": str(probe_dir.relative_to(run_dir)),
               "parametric": {qid: sorted(pages) for qid, pages in sorted(result.parametric.items())}}
    _write_probe(run_dir, "forget", summary)
    return summary


def lead_astray_probe(run_dir: Path, release_dir: Path, *, store: DocumentStore, llm: LLM | None = None,
                      concurrency: int = 8, agent: Any | None = None) -> dict[str, Any]:
    """The paper's Lead-astray: re-ask the run's agent on its sufficient-evidence failures with only clean evidence.

    Eligible are the run's failures whose evidence was sufficient (parametric
    evidence from an earlier Forget probe counts, as in ``factorise``); each is
    re-asked through the ordinary runner (into ``<run>/probes/lead_astray``) by
    the run's own agent and settings, with tools that serve only the hop
    statements its own trajectory was served. Needs a hint-free release (hop
    statements); the 7-source benchmark has the distractor probe instead.
    """
    from aethersearch.agents.base import make_agent
    from aethersearch.rollout.fingerprint import release_info
    from aethersearch.rollout.session import RunSettings, SearchSetup, start_run

    run_dir, release_dir = Path(run_dir), Path(release_dir)
    fingerprint = load_fingerprint(run_dir)
    traces, diagnostics, gold = load_traces(run_dir), load_diagnostics(release_dir), _gold(release_dir)
    if not diagnostics or any(len(row.path) < 3 for row in diagnostics.values()):
        raise ConfigError("the Lead-astray probe re-asks with the hop statements of a hint-free chain, and this "
                          "release has questions without one",
                          fix="run it on a hint-free release; on the 7-source benchmark use "
                              "`aether probe distractors` (the injected-noise robustness probe)")
    agent = agent or make_agent(fingerprint.agent, **fingerprint.agent_config)
    if agent.needs_llm and llm is None:
        raise ConfigError(f"the lead-astray probe re-asks agent {fingerprint.agent!r}, which needs a model",
                          fix="pass --endpoint URL --model NAME (the run's own model)")
    episodes = episodes_for_run(traces, diagnostics, gold, environment=fingerprint.environment, store=store,
                                parametric=parametric_from_probes(run_dir))
    eligible = sufficient_failures(episodes)
    masked = fingerprint.environment == "sandbox"
    clean = {qid: clean_evidence(traces[qid], chain_evidence(diagnostics[qid], store), store, masked=masked)
             for qid in eligible}
    tools = ("search", "visit") if masked else ("search",)
    probe_dir = run_dir / "probes" / "lead_astray"
    reasked: dict[str, bool] = {}
    if eligible:
        rollout_path = release_layout(release_dir).rollout
        if not rollout_path.is_file():
            raise DataError(rollout_path, "missing from the release", fix="point --release at the run's release")
        questions = [q for q in (validate_row(rollout_path, n, v, RolloutQuestion) for n, v in iter_jsonl(rollout_path))
                     if q.id in clean]
        settings = RunSettings(agent=fingerprint.agent, agent_config=fingerprint.agent_config,
                               endpoint=llm.endpoint if llm is not None else None, model=llm.model if llm is not None else None,
                               budget=fingerprint.budget, decoding=fingerprint.decoding, concurrency=concurrency)
        search = SearchSetup(lambda q: CleanEvidenceEnvironment(clean[q.id], tools), fingerprint.corpus_hash,
                             fingerprint.index_hash, "clean evidence of the run's own trajectory",
                             environment=fingerprint.environment, sandbox=fingerprint.sandbox)
        start_run(release_info(release_dir), settings, search, probe_dir, questions=questions, agent=agent, llm=llm)
        for qid, scored in _scored(load_traces(probe_dir)).items():
            reasked[qid] = scored.outcome is Outcome.ANSWERED and is_correct(scored.prediction, gold[qid].answers)
    summary = {**lead_astray_summary(eligible, reasked, {qid: len(docs) for qid, docs in clean.items()}),
               "probe_dir": str(probe_dir.relative_to(run_dir))}
    _write_probe(run_dir, "lead_astray", summary)
    return summary


def distractor_probe(run_dir: Path, release_dir: Path, *, environment_factory: InnerFactory,
                     store: DocumentStore, llm: LLM | None = None, ratio: float = 0.5, seed: int = 0,
                     concurrency: int = 8, agent: Any | None = None) -> dict[str, Any]:
    """Rerun the run's agent with distractors at ``ratio``; record the distractor rate in ``probes.json``.

    This project's robustness probe (not the paper's Lead-astray).
    ``environment_factory`` opens the *clean* environment of a question (the same
    kind the run used); ``store`` supplies distractor documents. The agent is
    rebuilt from run.json (``agent`` + ``agent_config``) unless one is passed.
    """
    from aethersearch.agents.base import make_agent
    from aethersearch.rollout.fingerprint import release_info
    from aethersearch.rollout.session import RunSettings, SearchSetup, start_run

    run_dir, release_dir = Path(run_dir), Path(release_dir)
    fingerprint = load_fingerprint(run_dir)
    traces = load_traces(run_dir)
    diagnostics = load_diagnostics(release_dir)
    gold = _gold(release_dir)
    rollout_path = release_layout(release_dir).rollout
    if not rollout_path.is_file():
        raise DataError(rollout_path, "missing from the release", fix="point --release at the run's release")
    questions = [validate_row(rollout_path, n, v, RolloutQuestion) for n, v in iter_jsonl(rollout_path)]
    questions = [q for q in questions if q.id in traces]
    agent = agent or make_agent(fingerprint.agent, **fingerprint.agent_config)
    if agent.needs_llm and llm is None:
        raise ConfigError(f"the distractor probe reruns agent {fingerprint.agent!r}, which needs a model",
                          fix="pass --endpoint URL --model NAME (the run's own model)")
    pool = None if store.rows is not None else list(store.ids())

    async def noisy(question: RolloutQuestion) -> Environment:
        inner = environment_factory(question)
        if inspect.isawaitable(inner):  # a remote sandbox opens its episode over HTTP
            inner = await inner
        row = diagnostics.get(question.id)
        exclude: set[str] = set()
        titles: tuple[str, ...] = ()
        if row is not None:
            exclude = set(row.path) | set(row.evidence) | {p for alt in row.alternative_paths for p in alt}
            titles = supporting_titles(row)
        return NoisyEnvironment(inner, store, pool, ratio=ratio, seed=seed,
                                key=question.id, exclude=sorted(exclude), exclude_titles=titles)

    probe_dir = run_dir / "probes" / f"distractors-r{ratio:g}-s{seed}"
    # the run's own settings through the one run path; only the tools (noisy) and the question subset differ
    settings = RunSettings(agent=fingerprint.agent, agent_config=fingerprint.agent_config,
                           endpoint=llm.endpoint if llm is not None else None, model=llm.model if llm is not None else None,
                           budget=fingerprint.budget, decoding=fingerprint.decoding, concurrency=concurrency)
    search = SearchSetup(noisy, fingerprint.corpus_hash, fingerprint.index_hash, f"distractors at {ratio:g}",
                         environment=fingerprint.environment, sandbox=fingerprint.sandbox)
    start_run(release_info(release_dir), settings, search, probe_dir, questions=questions, agent=agent, llm=llm)
    parametric = parametric_from_probes(run_dir)
    clean = {ep.id: ep for ep in episodes_for_run(traces, diagnostics, gold, environment=fingerprint.environment,
                                                    store=store, parametric=parametric)
             if ep.outcome not in ERROR_OUTCOMES}
    noisy_eps = {ep.id: ep for ep in episodes_for_run(load_traces(probe_dir), diagnostics, gold,
                                                             environment=fingerprint.environment, store=store,
                                                             parametric=parametric)
                 if ep.outcome not in ERROR_OUTCOMES}
    summary = {**distractor_summary(clean, noisy_eps, ratio=ratio, seed=seed),
               "probe_dir": str(probe_dir.relative_to(run_dir))}
    _write_probe(run_dir, "distractors", summary)
    return summary
