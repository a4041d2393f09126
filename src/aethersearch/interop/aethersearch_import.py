"""``aether import aethersearch``: AetherSearch's fixed-eval ``predictions.jsonl`` as a run directory.

Their eval worker (``runtime/async_eval_worker.py`` at d2a21bd) writes one line
per question with ``dataset_row_id`` (the parquet's ``id``: our release row id
when the parquet came from ``aether export verl``), ``domain``,
``dataset_source_index``, ``model_actions`` (each generation's text, EOS
dropped), ``queries``, ``search_count``, ``answer``, ``system_valid``,
``environment_failure_code`` and their scores (``R_task``, ``exact``, ``F_ans``).
Importing writes ``traces.jsonl`` (one step per action, the executed searches as
tool calls) and a ``run.json`` bound to the release, so ``aether score``
(``--compat aethersearch`` rescores their R_task from the actions), ``compare``,
``report`` and the viewer read their runs like ours. Their file does not keep
the retrieved documents, so the traces have no observations.

Every line must name a row of the release, with the same source and position
(their ``prompt_global_id`` is ``eval:{source}:{id}:{index}``); anything else
is refused with the line number, since a score bound to the wrong gold is worse
than none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.agents.aethersearch_protocol import check_action
from aethersearch.agents.base import finish
from aethersearch.errors import DataError
from aethersearch.interop.exports import question_as_searchr1_sees_it, read_release
from aethersearch.interop.verl_import import refuse_occupied, write_imported_run
from aethersearch.jsonl import iter_jsonl, sha256_file
from aethersearch.records import LLMCall, Outcome, Step, ToolCall, Trace

__all__ = ["AGENT", "AetherSearchImport", "import_predictions", "prediction_trace"]

AGENT = "aethersearch (imported)"
_REQUIRED = ("dataset_row_id", "domain", "model_actions", "queries", "answer", "system_valid")


class AetherSearchImport(NamedTuple):
    """What an import wrote."""

    run_dir: Path
    imported: int
    release_rows: int
    reported_f1: float


def _field(line: dict[str, Any], path: Path, number: int) -> None:
    missing = [key for key in _REQUIRED if key not in line]
    if missing:
        raise DataError(path, f"missing {', '.join(missing)}", line=number,
                        fix="pass the predictions.jsonl AetherSearch's eval worker wrote (eval/update_NNN/)")
    if not isinstance(line["model_actions"], list) or not isinstance(line["queries"], list):
        raise DataError(path, "model_actions and queries must be lists", line=number, field="model_actions",
                        fix="pass the predictions.jsonl AetherSearch's eval worker wrote")


def prediction_trace(line: dict[str, Any], question_seen: str) -> Trace:
    """One of their prediction lines as a trace: one step per action, the executed queries as searches."""
    queries = [str(q) for q in line["queries"]]
    steps: list[Step] = []
    searched = 0
    for index, action in enumerate(str(a) for a in line["model_actions"]):
        calls = []
        if check_action(action).kind == "search" and searched < len(queries):
            calls = [ToolCall(tool="search", arguments={"query": queries[searched]})]
            searched += 1
        steps.append(Step(index=index, llm=LLMCall(text=action), tool_calls=calls))
    response = "".join(str(a) for a in line["model_actions"])
    if not line["system_valid"]:
        code = line.get("environment_failure_code") or "unknown"
        return Trace(id=str(line["dataset_row_id"]), question_seen=question_seen, agent=AGENT, steps=steps,
                     response=response, outcome=Outcome.TOOL_ERROR, stop_reason="environment_failure",
                     error=f"their retrieval failed: {code}")
    answer = line["answer"]
    output = finish(response, None if answer is None else str(answer), "answer" if answer is not None else "end")
    return Trace(id=str(line["dataset_row_id"]), question_seen=question_seen, agent=AGENT, steps=steps,
                 response=response, prediction=output.prediction, outcome=output.outcome,
                 stop_reason=output.stop_reason)


def import_predictions(predictions: Path, release_dir: Path, out: Path, *, model: str | None = None,
                       force: bool = False) -> AetherSearchImport:
    """Write ``out`` (run.json, traces.jsonl, import.json) from their ``predictions.jsonl``."""
    predictions, release_dir, out = Path(predictions), Path(release_dir), Path(out)
    if not predictions.is_file():
        raise DataError(predictions, "predictions file does not exist",
                        fix="pass eval/update_NNN/predictions.jsonl from an AetherSearch run directory")
    refuse_occupied(out, force)
    release = read_release(release_dir)
    index_of = {row.id: index for index, row in enumerate(release.rows)}
    traces: list[Trace] = []
    seen: dict[str, int] = {}
    reported: list[float] = []
    updates: set[int] = set()
    for number, line in iter_jsonl(predictions):
        if not isinstance(line, dict):
            raise DataError(predictions, "expected a JSON object", line=number,
                            fix="pass the predictions.jsonl AetherSearch's eval worker wrote")
        _field(line, predictions, number)
        row_id = str(line["dataset_row_id"])
        if row_id not in index_of:
            raise DataError(predictions, f"dataset_row_id {row_id!r} is not a row of {release_dir}", line=number,
                            field="dataset_row_id",
                            fix="import against the release whose `aether export verl` parquet they evaluated")
        row = release.rows[index_of[row_id]]
        position = line.get("dataset_source_index", index_of[row_id])
        if str(line["domain"]).lower() != row.source_dataset.lower() or position != index_of[row_id]:
            raise DataError(predictions, f"row {row_id!r} is {line['domain']!r} at index {position} there but "
                                         f"{row.source_dataset!r} at index {index_of[row_id]} in the release",
                            line=number, field="domain", fix="import against the release they evaluated")
        if row_id in seen:
            raise DataError(predictions, f"row {row_id!r} appears twice (lines {seen[row_id]} and {number})",
                            line=number, field="dataset_row_id", fix="keep one evaluation per file")
        seen[row_id] = number
        if isinstance(line.get("successful_update_step"), int):
            updates.add(line["successful_update_step"])
        if isinstance(line.get("R_task"), (int, float)):
            reported.append(float(line["R_task"]))
        traces.append(prediction_trace(line, question_as_searchr1_sees_it(row.question)))
    if not traces:
        raise DataError(predictions, "no predictions in the file", fix="check the eval worker's output folder")
    update = max(updates) if updates else None
    mean = sum(reported) / len(release.rows)
    write_imported_run(out, traces, release_dir, len(release.rows), agent=AGENT,
                       agent_config={"source": "AetherSearch fixed-eval predictions.jsonl", "update": update},
                       model=model or (f"update-{update}" if update is not None else predictions.parent.name),
                       record={"kind": "aethersearch-predictions-import", "predictions": str(predictions),
                               "predictions_sha256": sha256_file(predictions), "lines": len(traces),
                               "update": update, "reported_f1_over_release": mean,
                               "note": "their file keeps no retrieved documents: traces have no observations"})
    return AetherSearchImport(out, len(traces), len(release.rows), mean)
