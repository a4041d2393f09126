"""The budget curve read from one run, against real reruns at smaller budgets (issue: deltas that hold up).

One command: ``python benchmarks/budget_curve.py [--budgets 1,2] [--full 4]``. It builds the
embedded demo (corpus, BM25 index, release), runs the agent once at the full tool-call budget,
scores it with ``--budget-curve``, then really reruns it at each smaller budget and scores
those. It prints, per budget, the accuracy the curve reads off the full run, the rerun's
accuracy (both with 95% bootstrap CIs), the gap, and whether the rerun falls inside the
curve's interval. The curve counts a question that would have run out as exhausted (0); a
rerun gives that question one forced final answer, so the gap is that forced answer's worth.

Default agent: ``lexical`` (no model). A real model: ``--agent search-r1 --endpoint
http://127.0.0.1:8080/v1 --model smollm2`` (``scripts/serve_gguf.py``), with ``--concurrency 1``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from aethersearch import demo, pipeline
from aethersearch.records import Budget
from aethersearch.scoring.api import score_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default="1,2", help="smaller tool-call budgets to rerun at")
    parser.add_argument("--full", type=int, default=4, help="the full run's tool-call budget")
    parser.add_argument("--agent", default="lexical")
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="budget_curve_"))
    release, index = demo.build_demo_inputs(out / "demo")
    search = pipeline.index_search(index)

    def run(budget: int) -> Path:
        run_dir = out / f"run-b{budget}"
        pipeline.run_agent(release, run_dir, search, agent=args.agent, endpoint=args.endpoint, model=args.model,
                           budget=Budget(max_tool_calls=budget, max_turns=budget + 1),
                           concurrency=args.concurrency)
        return run_dir

    full = score_run(run(args.full), release, budget_curve=True)
    assert full.budget_curve is not None
    points = {p["budget"]: p for p in full.budget_curve["axes"]["tool_calls"]["points"]}
    print(f"agent {args.agent} on the demo release ({full.question_count} questions), full budget {args.full} "
          f"tool calls: EM {100 * full.overall.micro.metrics['em'].mean:.1f}")
    print(f"{'budget':>6}  {'curve EM [95% CI]':>22}  {'exhausted':>9}  {'rerun EM [95% CI]':>22}  {'gap':>6}  inside")
    for budget in [int(b) for b in args.budgets.split(",")]:
        curve = points[budget]["em"]
        rerun = score_run(run(budget), release).overall.micro.metrics["em"]
        assert rerun.mean is not None and rerun.ci_low is not None and rerun.ci_high is not None
        inside = curve["ci_low"] <= rerun.mean <= curve["ci_high"]
        print(f"{budget:>6}  {100 * curve['mean']:6.1f} [{100 * curve['ci_low']:5.1f}, {100 * curve['ci_high']:5.1f}]"
              f"  {points[budget]['exhausted']:>9}  {100 * rerun.mean:6.1f} [{100 * rerun.ci_low:5.1f}, "
              f"{100 * rerun.ci_high:5.1f}]  {100 * (rerun.mean - curve['mean']):+6.1f}  {'yes' if inside else 'no'}")
    print(f"runs kept under {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
