"""``write_report``: one static, self-contained HTML file for one or more scored runs.

Why static and inlined: a report is evidence attached to a paper or a PR; it
must open from disk, offline, with no server, and show the same thing forever.
Charts are inline SVG (``charts.py``, colour-blind-safe), styles and the one small
self-check script are inline, nothing is fetched (the only request is a probe of a
local ``aether view``, which shows links into it when one runs). The page records any
script error into ``#console-errors`` so a headless browser can verify it rendered cleanly.

Sections, as a paper lays them out: the runs x metrics table under the papers'
names with CIs, Search Score against GenScore, per-hop curves (``paper.py``), raw
``factorised.json`` / ``probes.json`` behind a disclosure; then the source x run
EM table and its charts, per-run tables, outcomes and budget, the checkpoint
comparison (paired deltas, Holm-corrected marks, flips linking to their traces),
the training curve of an ``aether watch`` history, and the flipped traces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from aethersearch import __version__
from aethersearch.compare.checkpoints import compare_runs, noise_verdict, run_names
from aethersearch.compare.watch import read_history
from aethersearch.errors import AetherError, DataError, IntegrityError
from aethersearch.jsonl import atomic_write_text, dumps_pretty, iter_jsonl
from aethersearch.report import charts
from aethersearch.report.layout import display_labels, fmt, has_model_usage, release_groups, source_matrix
from aethersearch.report.metric_names import DECOUPLING_AXES, PER_HOP_METRICS
from aethersearch.report.paper import RAW_TITLES, Cell, run_metrics, shown_columns
from aethersearch.report.samples_view import samples_view
from aethersearch.report.viewer import VIEWER_URL
from aethersearch.scoring.aggregate import OUTCOME_LABELS
from aethersearch.scoring.api import read_fingerprint, score_run
from aethersearch.scoring.scores_file import MetricEstimate, Scores, read_scores

__all__ = ["CHART_METRICS", "DEFAULT_VIEWER_URL", "TABLE_METRICS", "TEMPLATES", "write_report"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
DEFAULT_VIEWER_URL = VIEWER_URL
"""Where `aether view` listens by default: the report's flip lists link there when a viewer answers."""
TABLE_METRICS: tuple[str, ...] = ("em", "subem", "subem_answered", "f1", "f1_answered", "cover_em", "squad_em",
                                  "popqa_acc", "judge")
CHART_METRICS: tuple[str, ...] = ("em", "f1")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


def _anchor(run_index: int, qid: str) -> str:
    return f"trace-{run_index}-{_slug(qid)}"


def _score_table(scores: Scores) -> tuple[list[str], list[dict[str, Any]]]:
    metrics = [m for m in TABLE_METRICS if m in scores.metrics]

    def cells(block: Mapping[str, MetricEstimate]) -> list[dict[str, str]]:
        return [{"mean": fmt(block[m].mean), "low": fmt(block[m].ci_low), "high": fmt(block[m].ci_high)}
                for m in metrics]

    rows: list[dict[str, Any]] = [{"label": source, "n": entry.n, "errors": entry.errors,
                                   "cells": cells(entry.metrics)} for source, entry in scores.by_source.items()]
    micro, macro = scores.overall.micro, scores.overall.macro
    rows.append({"label": "overall (micro)", "n": micro.n, "errors": micro.errors, "cells": cells(micro.metrics)})
    rows.append({"label": "overall (macro)", "n": f"{macro.sources} sources", "errors": macro.errors,
                 "cells": cells(macro.metrics)})
    return metrics, rows


def _judge_block(scores: Scores) -> dict[str, Any] | None:
    judge = scores.judge
    if judge is None:
        return None
    table = judge.disagreement.em_vs_verdict
    verdicts = list(next(iter(table.values())).keys())
    return {"model": judge.model, "agreement": fmt(judge.disagreement.agreement),
            "verdicts": verdicts, "table": [(k, [v[x] for x in verdicts]) for k, v in table.items()]}


def _paper_view(run_dirs: Sequence[Path], labels: Sequence[str], all_scores: Sequence[Scores],
                members: Sequence[int]) -> dict[str, Any]:
    """The opening of a release group: runs x paper metrics with CIs, the decoupling figure, per-hop curves."""
    rows = [run_metrics(run_dirs[i], labels[i], all_scores[i]) for i in members]
    columns = shown_columns(rows)
    x_label, y_label = DECOUPLING_AXES
    points = {row.label: (row.cells[x_label], row.cells[y_label]) for row in rows
              if row.cells.get(x_label) is not None and row.cells.get(y_label) is not None}
    curves = {row.label: row.by_hops for row in rows if row.by_hops}
    return {"columns": [{"label": m.label, "meaning": m.meaning} for m in columns],
            "rows": [{"label": row.label, "n": row.n,
                      "cells": [_cell_view(row.cells.get(m.label)) for m in columns]} for row in rows],
            "decoupling": charts.decoupling_chart(points, x_label, y_label) if points else "",
            "per_hop": charts.per_hop_chart(curves, PER_HOP_METRICS) if curves else "",
            "raw": [{"label": row.label, "titles": " and ".join(RAW_TITLES[name] for name in row.raw),
                     "files": [(name, dumps_pretty(value).decode("utf-8")) for name, value in row.raw.items()]}
                    for row in rows if row.raw]}


def _cell_view(cell: Cell | None) -> dict[str, str]:
    if cell is None:
        return {"mean": "—", "ci": ""}
    ci = f"[{fmt(cell.low)}, {fmt(cell.high)}]" if cell.low is not None and cell.high is not None else ""
    return {"mean": fmt(cell.mean), "ci": ci}


def _load_traces(run_dir: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    path = run_dir / "traces.jsonl"
    if not wanted or not path.is_file():
        return {}
    found: dict[str, dict[str, Any]] = {}
    for _, row in iter_jsonl(path):
        if isinstance(row, dict) and row.get("id") in wanted:
            previous = found.get(row["id"])
            if previous is None or int(row.get("attempt", 1)) >= int(previous.get("attempt", 1)):
                found[row["id"]] = row  # the latest attempt is the one that was scored
    return found


def _judges_view(scores: Scores) -> tuple[list[dict[str, Any]], list[str]]:
    """Each judge's contract, score, errors and kappa vs EM; one sentence per two judges' agreement."""
    rows = []
    for judge in scores.judges:
        estimate = scores.overall.micro.metrics.get(judge.metric)
        rows.append({"name": (judge.name or judge.model) + (" (the model under test)" if judge.judge_self else ""),
                     "metric": judge.metric, "score": fmt(estimate.mean if estimate else None),
                     "ci": f"[{fmt(estimate.ci_low)}, {fmt(estimate.ci_high)}]" if estimate else "",
                     "scored": judge.questions_scored, "errors": judge.error_count, "kappa": fmt(judge.kappa_vs_em),
                     "parser": judge.parser, "prompt": f"{judge.prompt_source} {judge.prompt_sha256[:12]}",
                     "model": judge.model, "tokens": f"{judge.tokens.get('prompt_tokens', 0):,} + "
                                                     f"{judge.tokens.get('completion_tokens', 0):,}"})
    pairs = [f"{p.b} vs {p.a} on {p.n} questions: kappa {fmt(p.kappa)}, score delta {fmt(p.delta)} "
             f"[{fmt(p.ci_low)}, {fmt(p.ci_high)}]; they disagree on {len(p.disagree)}"
             + (f": {' '.join(p.disagree[:20])}" if p.disagree else "") for p in scores.judge_agreement]
    return rows, pairs


def _cost_view(cost: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cost table: agent, each judge, total; an unpriced part shows why instead of a number."""
    if cost is None:
        return None

    def money(line: dict[str, Any], key: str = "cost", why: str = "why") -> str:
        return f"{line[key]:.4f}" if line.get(key) is not None else f"— ({line.get(why)})"

    rows = [{"label": label, "model": line["model"], "prompt": f"{line['prompt_tokens']:,}",
             "completion": f"{line['completion_tokens']:,}", "cost": money(line)}
            for label, line in [("agent", cost["agent"]), *((f"judge {j['name']}", j) for j in cost["judges"])]]
    rows.append({"label": "total", "model": "", "prompt": "", "completion": "",
                 "cost": money(cost, "total", "total_why")})
    return {"currency": cost["currency"], "rows": rows}


def _budget_view(scores: Scores) -> dict[str, str]:
    """Display cells of the budget summary."""
    budget = scores.budget
    reasons = ", ".join(f"{k}={v}" for k, v in budget.stop_reasons.items()) or "—"
    return {"exhausted": fmt(budget.exhausted), "answered_after_budget": fmt(budget.answered_after_budget),
            "em": fmt(budget.answered_after_budget_em),
            "unanswered": fmt(budget.exhausted - budget.answered_after_budget), "reasons": reasons}


def _pair_view(pair: Mapping[str, Any], index_of: Mapping[str, int],
               have_trace: Mapping[int, set[str]]) -> dict[str, Any]:
    rows = []
    for scope, by_metric in pair["results"].items():
        for metric, r in by_metric.items():
            ci = (f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]" if r.get("ci_low") is not None
                  and r.get("ci_high") is not None else "")
            rows.append({"scope": scope, "metric": metric, "a": fmt(r["a_mean"]), "b": fmt(r["b_mean"]),
                         "delta": f"{r['delta']:+.3f}" if r["delta"] is not None else "—", "ci": ci,
                         "negative": (r["delta"] or 0) < 0, "significant": r["significant"],
                         "method": r["method"], "p": fmt(r["p_value"], 4), "p_holm": fmt(r["p_holm"], 4),
                         "mde": fmt(r["mde"]), "noise": noise_verdict(r), "within_noise": r.get("within_noise")})
    b_index = index_of[pair["b"]]
    flips = []
    for metric, table in pair["flips"].items():
        for direction, items in table.items():
            flips.append((f"{metric} {direction.replace('_', ' ')}", [
                {"id": item["id"], "source": item["source"],
                 "anchor_b": _anchor(b_index, item["id"]) if item["id"] in have_trace[b_index] else None}
                for item in items]))
    return {"a": pair["a"], "b": pair["b"], "rows": rows, "flips": flips,
            "chart": charts.delta_chart(pair, "em")}


def _history_view(history: Path | None) -> dict[str, Any] | None:
    if history is None:
        return None
    if not Path(history).is_file():
        raise DataError(history, "training history not found",
                        fix="pass --history the JSONL that `aether watch --history` writes, or drop --history")
    rows = read_history(history)
    if not rows:
        return None
    keys = sorted({k for row in rows for k, v in (row.metrics or {}).items()
                   if isinstance(v, int | float) and not isinstance(v, bool)})
    return {"chart": charts.training_curve(rows, keys), "columns": keys,
            "rows": [{"name": row.checkpoint, "step": row.step,
                      "cells": [fmt((row.metrics or {}).get(k)) for k in keys]} for row in rows]}


def _current_scores(run_dir: Path, release_dir: Path | None) -> Scores:
    """The run's scores; with ``release_dir``, a run that is unscored, or changed since it was scored, is rescored."""
    try:
        return read_scores(run_dir)
    except (DataError, IntegrityError):
        if release_dir is None:
            raise
    score_run(run_dir, release_dir)
    return read_scores(run_dir)


def _golds(all_scores: Sequence[Scores], release_dir: Path | None) -> dict[str, list[str]]:
    """Gold aliases by question id from the release the runs were scored on (empty if it is not at hand)."""
    from aethersearch.scoring.join import load_release

    where = Path(release_dir) if release_dir is not None else (
        Path(all_scores[0].gold.release_dir) if all_scores else None)
    if where is None or not where.is_dir():
        return {}
    from aethersearch.errors import DataError
    from aethersearch.release_layout import release_layout

    try:
        if not release_layout(where).eval.is_file():
            return {}
    except DataError:  # not a release directory: no golds at hand
        return {}
    return {row.id: list(row.answers) for row in load_release(where)}


def write_report(run_dirs: list[Path], out_path: Path, *, release_dir: Path | None = None,
                 history: Path | None = None, allow: Sequence[str] = (), compare: bool = True,
                 strict: bool = False, labels: Sequence[str] = (), viewer_url: str | None = DEFAULT_VIEWER_URL) -> Path:
    """Render the report for ``run_dirs`` (first = comparison reference) into ``out_path`` atomically.

    Unscored runs, and runs that changed since they were scored, are (re)scored
    first when ``release_dir`` is given; otherwise their stale scores are refused. With two or
    more runs the checkpoint comparison is included; a contract mismatch that
    was not ``allow``-ed is shown as a refusal instead of a table. ``compare=False``
    puts runs of different evaluations (e.g. the demo's benchmark run and its
    sandbox run) side by side in one file without comparing them. Runs are labelled by ``labels``
    (``--label``), else their model names (:func:`display_labels`). Flipped questions link into an
    ``aether view`` at ``viewer_url`` (the links show only when one answers there). ``strict=True`` (the CLI) still
    writes the report but then raises ``IntegrityError`` when the comparison was refused, so a
    script never mistakes a report without its comparison for a finished one.
    """
    run_dirs = [Path(d) for d in run_dirs]
    if not run_dirs and history is None:
        raise DataError(out_path, "nothing to report", fix="pass at least one run directory or --history")
    all_scores = [_current_scores(run_dir, release_dir) for run_dir in run_dirs]
    names = run_names(run_dirs)
    index_of = {name: i for i, name in enumerate(names)}

    comparison, refused = None, None
    if compare and len(run_dirs) >= 2:
        try:
            comparison = compare_runs(run_dirs, allow=allow)
        except AetherError as exc:
            refused = str(exc)
    flipped: set[str] = set()
    if comparison:
        for pair in comparison["pairs"]:
            for table in pair["flips"].values():
                flipped.update(item["id"] for items in table.values() for item in items)
    traces = {i: _load_traces(d, flipped) for i, d in enumerate(run_dirs)}
    have_trace = {i: set(t) for i, t in traces.items()}
    fingerprints = [read_fingerprint(d) for d in run_dirs]
    run_label = display_labels(names, fingerprints, labels)
    golds = _golds(all_scores, release_dir) if flipped else {}
    em_of = [{row.id: row.values.get("em") for row in scores.per_question} for scores in all_scores]

    runs_view = []
    for i, (name, scores) in enumerate(zip(names, all_scores, strict=True)):
        fingerprint = fingerprints[i]
        metrics, table = _score_table(scores)
        judges, judge_pairs = _judges_view(scores)
        runs_view.append({"index": i, "name": name, "label": run_label[i], "scores": scores, "metrics": metrics,
                          "table": table,
                          "model": fingerprint.model if fingerprint else None,
                          "agent": fingerprint.agent if fingerprint else None,
                          "judge": _judge_block(scores),
                          "judges": judges, "judge_pairs": judge_pairs,
                          "cost": _cost_view(scores.cost),
                          "budget": _budget_view(scores), "samples": samples_view(scores, fmt)})
    trace_view = []
    for i, found in traces.items():
        for qid in sorted(found):
            row = found[qid]
            verdict = em_of[i].get(qid)
            trace_view.append({"anchor": _anchor(i, qid), "id": qid, "run": run_label[i], "outcome": row.get("outcome"),
                               "prediction": row.get("prediction"), "question": row.get("question_seen"),
                               "response": row.get("response", ""), "gold": golds.get(qid),
                               "right": None if verdict is None else verdict >= 1.0,
                               "others": [{"run": run_label[j], "right": (em_of[j].get(qid) or 0.0) >= 1.0}
                                          for j in range(len(run_dirs)) if j != i],
                               "links": [{"anchor": _anchor(j, qid), "run": names[j]}
                                         for j in traces if j != i and qid in have_trace[j]]})
    groups = []
    for group in release_groups(all_scores):  # a table or chart never mixes two releases
        members = group.members
        by_label = {run_label[i]: all_scores[i] for i in members}
        with_usage = {run_label[i]: all_scores[i] for i in members if has_model_usage(all_scores[i], fingerprints[i])}
        groups.append({"release": group.release, "sha": group.eval_sha256[:12], "labels": [run_label[i] for i in members],
                       "matrix": source_matrix(all_scores, members, "em"),
                       "bar_charts": [charts.bars_by_source(by_label, m) for m in CHART_METRICS],
                       "outcome_chart": charts.outcome_chart(by_label),
                       "usage_chart": charts.usage_chart(with_usage) if with_usage else "",
                       "risk_chart": charts.risk_coverage_chart(by_label)
                       if any(s.risk_coverage for s in by_label.values()) else "",
                       "budget_chart": charts.budget_curve_chart(by_label)
                       if any(s.budget_curve for s in by_label.values()) else "",
                       "without_usage": [run_label[i] for i in members if run_label[i] not in with_usage],
                       "paper": _paper_view(run_dirs, run_label, all_scores, members)})
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    html = env.get_template("report.html.j2").render(
        title="aethersearch report: " + ", ".join(names) if names else "aethersearch training curve",
        version=__version__,
        release_label=(f"{Path(all_scores[0].gold.release_dir).name} (eval sha256 "
                       f"{all_scores[0].gold.eval_sha256[:12]})" if all_scores else "—"),
        runs=runs_view,
        groups=groups,
        outcome_labels=OUTCOME_LABELS,
        comparison=comparison,
        comparison_refused=refused,
        pairs=[_pair_view(p, index_of, have_trace) for p in comparison["pairs"]] if comparison else [],
        history=_history_view(history),
        traces=trace_view,
        viewer_url=viewer_url.rstrip("/") if viewer_url else None,
    )
    atomic_write_text(out_path, html)
    if strict and refused is not None:
        raise IntegrityError(f"comparison refused; {out_path} was written without it: {refused}",
                             fix="compare runs made with the same settings, or pass the --allow the message names")
    return Path(out_path)
