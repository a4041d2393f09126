"""Run EvidenceLoop against a served model in the masked sandbox of the demo world; print what it did.

Why a script: ``aether run`` searches an index or a retrieval server, while
EvidenceLoop is a sandbox agent (WebDetective's masked browsing), and this run is
the check that it works end to end with a real model: N solvers × R rounds × B
actions, an EID for every gathered document, claims and their verdicts, then the
factorised metrics of the run. Everything is seeded; the run directory is
resumable (rerun the same command).

    OMP_WAIT_POLICY=passive .venv/bin/python scripts/serve_gguf.py --port 8091 --n-ctx 8192 --threads 1 &
    .venv/bin/python scripts/evidenceloop_real_model.py --endpoint http://127.0.0.1:8091/v1 \\
        --model smollm2 --structured json_object --questions 4 --out runs/evidenceloop-smollm2

``--structured`` is the agent's recorded option: ``json_object`` for llama-cpp-python's
server (also llama-server), ``json_schema`` for vLLM, SGLang or OpenAI, ``off`` for the
free-text tags. ``--release/--corpus/--index`` run a prebuilt sandbox world
instead (e.g. a Wikispeedia release). Writes under ``--out``: the demo world (``sandbox_release/``,
``sandbox_corpus/``, ``sandbox_index/``) and ``run/`` (run.json, traces.jsonl,
factorised.json, evidenceloop_summary.json). Prints one block per question (per round:
each solver's actions with the EIDs they gave, the facts extracted, the claims and
their verdicts), then the totals and the factorised metrics; ``--json`` prints the
summary as JSON instead. Exits 1 when any question ended in an error outcome.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aethersearch.agents.evidenceloop import STRUCTURED, trace_summary
from aethersearch.commands.diagnostics import ROWS as FACTORISED_ROWS
from aethersearch.records import Budget, Decoding, RunLimits
from aethersearch.scoring.metric_names import label


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="http://127.0.0.1:8091/v1", help="OpenAI-compatible base URL")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--structured", default="json_object", choices=STRUCTURED)
    parser.add_argument("--n-solvers", type=int, default=2, help="N parallel solvers")
    parser.add_argument("--max-rounds", type=int, default=2, help="R_max rounds")
    parser.add_argument("--actions", type=int, default=3, help="B actions per solver per round")
    parser.add_argument("--doc-chars", type=int, default=1200, help="characters of a document shown in full")
    parser.add_argument("--questions", type=int, default=4, help="the first K questions of the release")
    parser.add_argument("--max-tokens", type=int, default=300, help="max_tokens of each model call")
    parser.add_argument("--seed", type=int, default=0, help="demo world and decoding seed")
    parser.add_argument("--call-timeout", type=float, default=120.0)
    parser.add_argument("--question-deadline", type=float, default=900.0)
    parser.add_argument("--release", type=Path, help="a prebuilt hint-free sandbox release (default: the demo's)")
    parser.add_argument("--corpus", type=Path, help="its page store (with --release)")
    parser.add_argument("--index", type=Path, help="a search index over that store (with --release)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    given = [args.release, args.corpus, args.index]
    if any(given) and not all(given):
        parser.error("--release, --corpus and --index go together (a prebuilt sandbox world), or none of them")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the demo sandbox world, run EvidenceLoop on its first K questions, factorise; return the summary."""
    from aethersearch.construct.build import build_demo_sandbox_release
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.pipeline import verify_or_refuse
    from aethersearch.rollout.fingerprint import load_rollout_questions, release_info
    from aethersearch.rollout.session import RunSettings, SearchSetup, execute_run, prepare_run
    from aethersearch.rollout.store import TRACES
    from aethersearch.sandbox.episode import open_sandbox
    from aethersearch.diagnostics.probes import factorise_run
    from aethersearch.search.index_dir import build_index

    out: Path = args.out
    if args.release is not None:  # a prebuilt world (e.g. `aether construct wikispeedia` + its store and index)
        from aethersearch.corpus.store import open_store
        from aethersearch.search.index_dir import open_index

        release_dir = args.release
        store = open_store(args.corpus)
        opened = open_index(args.index, store)
    else:
        release_dir = build_demo_sandbox_release(out / "sandbox_release", seed=args.seed)
        store = import_corpus("demo", "demo", out / "sandbox_corpus", seed=args.seed, overwrite=True).store
        opened = build_index(store, "bm25", out / "sandbox_index", config={"numba": False}, overwrite=True)
    verify_or_refuse(release_dir)
    sandbox = open_sandbox(release_dir, opened.index, store)
    search = SearchSetup(lambda q: sandbox.episode(q.id, run_id="evidenceloop"), store.content_hash,
                         opened.index.index_hash, "masked sandbox", environment="sandbox")
    config = {"n_solvers": args.n_solvers, "max_rounds": args.max_rounds, "actions_per_round": args.actions,
              "doc_chars": args.doc_chars, "structured": args.structured}
    # every solver action may be a tool call; model turns are bounded by the loop (N·R·B + 3·R + 1)
    budget = Budget(max_tool_calls=args.n_solvers * args.max_rounds * args.actions, max_turns=None)
    settings = RunSettings(agent="evidenceloop", agent_config=config, endpoint=args.endpoint, model=args.model,
                           budget=budget, decoding=Decoding(max_tokens=args.max_tokens, seed=args.seed),
                           concurrency=1, limits=RunLimits(call_timeout_s=args.call_timeout,
                                                           question_deadline_s=args.question_deadline))
    info = release_info(release_dir)
    questions = load_rollout_questions(info.rollout_path)[: args.questions]
    run_dir = out / "run"
    prepared = prepare_run(info, settings, search, questions=questions)
    execute_run(prepared, run_dir, enforce=False)
    factorised = factorise_run(run_dir, release_dir, store=store)
    traces = [json.loads(line) for line in (run_dir / TRACES).read_text().splitlines() if line.strip()]
    per_question = []
    for trace in traces:
        summary = trace_summary(trace["steps"])
        per_question.append({"id": trace["id"], "question": trace["question_seen"], "outcome": trace["outcome"],
                             "stop_reason": trace.get("stop_reason"), "prediction": trace.get("prediction"),
                             **summary})
    keys = ("valid_actions", "invalid_actions", "tool_actions", "claims", "verified_claims")
    totals: dict[str, Any] = {key: sum(q[key] for q in per_question) for key in keys}
    totals["eids"] = sum(len(q["eids"]) for q in per_question)
    totals["fact_eids"] = sum(len(q["fact_eids"]) for q in per_question)
    totals["accepted_answers"] = sum(q["accepted"] for q in per_question)
    totals["outcomes"] = {o: sum(q["outcome"] == o for q in per_question) for o in {q["outcome"] for q in per_question}}
    # how each question ended: verified, synthesis (the fallback after R_max rounds), budget (the runner's forced
    # final); the loop itself never refuses for running out of rounds
    totals["stop_reasons"] = {r: sum(q["stop_reason"] == r for q in per_question)
                              for r in sorted({str(q["stop_reason"]) for q in per_question})}
    result = {"endpoint": args.endpoint, "model": args.model, "agent_config": prepared.agent.config(),
              "budget": budget.model_dump(), "questions": len(per_question), "totals": totals,
              "factorised": factorised["overall"], "per_question": per_question, "run_dir": str(run_dir)}
    (run_dir / "evidenceloop_summary.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    return result


def render(result: dict[str, Any]) -> str:
    """The per-question, per-round view and the totals as plain text."""
    config = result["agent_config"]
    lines = [f"EvidenceLoop on {result['model']} ({result['endpoint']}): N={config['n_solvers']} "
             f"R_max={config['max_rounds']} B={config['actions_per_round']} structured={config['structured']}"]
    for q in result["per_question"]:
        lines.append(f"\n== {q['id']}: {q['question']}\n   outcome {q['outcome']}, prediction {q['prediction']!r}")
        for r in q["rounds"]:
            lines.append(f"   round {r['round']}")
            for solver, moves in sorted(r["solvers"].items()):
                for m in moves:
                    arg = f" {m['argument']!r}" if m["argument"] else ""
                    eids = f" -> {','.join(m['eids'])}" if m["eids"] else ""
                    new = f" (new {','.join(m['new_eids'])})" if m["new_eids"] else ""
                    lines.append(f"     {solver}: {m['action']}{arg}{eids}{new}")
            for fid, fact in r["facts"].items():
                lines.append(f"     fact {fid}: {fact[:100]}")
            if r["proposed"] is not None:
                lines.append(f"     proposed {r['proposed']!r}")
            for v in r["verdicts"]:
                lines.append(f"     claim {v['claim']} [{v['eid']}] {v['text'][:80]!r}: {v['verdict']}")
            if r["accepted"] is not None:
                lines.append(f"     accepted: {r['accepted']}")
    lines.append(f"\ntotals over {result['questions']} questions: {json.dumps(result['totals'])}")
    lines.append(f"budget: {json.dumps(result['budget'])}")
    lines.append("factorised:")
    for key in FACTORISED_ROWS:
        value = result["factorised"].get(key)
        lines.append(f"  {label(key)}: {'—' if value is None else f'{value:.3f}'}")
    counts = {k: v for k, v in result["factorised"].items() if k.startswith("n")}
    lines.append(f"  counts: {json.dumps(counts)}")
    lines.append(f"run: {result['run_dir']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    result = run(args)
    print(json.dumps(result, indent=1, ensure_ascii=False) if args.json else render(result))
    errors = {o: n for o, n in result["totals"]["outcomes"].items()
              if o in ("endpoint_error", "tool_error", "request_rejected")}
    if errors:
        print(f"FAIL: questions ended in errors {errors}; see {result['run_dir']}/traces.jsonl", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
