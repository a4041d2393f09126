"""Hand-written releases and run directories for scoring, compare and report tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aethersearch.jsonl import (
    atomic_write_json,
    encode_jsonl,
    sha256_bytes,
    sha256_file,
    write_jsonl,
)
from aethersearch.records import Budget, Decoding, EvalRow, RunFingerprint

SOURCES = ("nq", "hotpotqa", "bamboogle")


def eval_rows(per_source: int = 8) -> list[EvalRow]:
    """A small release: ``per_source`` questions for each of three sources, ids in release order."""
    rows = []
    number = 0
    for source in SOURCES:
        for i in range(per_source):
            number += 1
            rows.append(EvalRow(
                id=f"eval_{number:04d}", question=f"{source} question {i}?",
                answers=[f"answer {source} {i}", f"alias {i}"], source_dataset=source,
                source_split="dev", source_id=None, source_row_number=i + 1, source_file=f"{source}.jsonl"))
    return rows


def write_release(path: Path, rows: list[EvalRow], release_id: str = "test-release") -> Path:
    """Write ``eval.jsonl``, the rollout file, a manifest naming the release and ``checksums.sha256``."""
    path.mkdir(parents=True, exist_ok=True)
    write_jsonl(path / "eval.jsonl", rows)
    write_jsonl(path / "rollout_questions.jsonl", [{"id": r.id, "question": r.question} for r in rows])
    atomic_write_json(path / "manifest.json", {"release_id": release_id, "question_count": len(rows)})
    write_checksums(path)
    return path


def write_checksums(path: Path) -> None:
    """(Re)write ``checksums.sha256`` over the release's files, as a builder would (or a tamperer could)."""
    names = sorted(p.name for p in path.iterdir() if p.is_file() and p.name != "checksums.sha256")
    (path / "checksums.sha256").write_text("".join(f"{sha256_file(path / n)}  {n}\n" for n in names))


def eval_sha256(rows: list[EvalRow]) -> str:
    """The sha256 of the ``eval.jsonl`` that ``write_release`` writes for ``rows`` (what run.json pins)."""
    return sha256_bytes(encode_jsonl(rows))


def fingerprint(question_count: int, **changes: Any) -> RunFingerprint:
    """A run.json for a run on the test release; ``changes`` override fields."""
    base: dict[str, Any] = dict(
        release_id="test-release", release_data_sha256="a" * 64, rollout_sha256="b" * 64,
        question_count=question_count, corpus_hash="c1", index_hash="i1", agent="searchr1",
        prompt_template_hash="p1", budget=Budget(), endpoint="http://127.0.0.1:1/v1", model="base",
        decoding=Decoding(), software_version="0.1.0")
    base.update(changes)
    return RunFingerprint(**base)


def trace(qid: str, question: str, answer: str | None, *, outcome: str = "answered",
          tokens: int = 100, tool_calls: int = 1) -> dict[str, Any]:
    """A Search-R1-style trace row whose response ends with ``<answer>answer</answer>`` (no tag if None)."""
    response = "<think>reasoning</think><search>q</search>\n\n<information>Doc 1(Title: T) x</information>\n\n"
    if answer is not None:
        response += f"<think>done</think><answer> {answer} </answer>"
    return {
        "id": qid, "question_seen": question, "agent": "searchr1", "response": response,
        "prediction": answer, "outcome": outcome, "stop_reason": "answer" if answer else "max_turns",
        "usage": {"prompt_tokens": tokens, "completion_tokens": tokens // 4, "turns": tool_calls + 1,
                  "tool_calls": tool_calls},
    }


def write_run(path: Path, rows: list[EvalRow], correct: set[str], *, model: str = "base",
              skip: set[str] = frozenset(), outcomes: dict[str, str] | None = None,
              fp_changes: dict[str, Any] | None = None) -> Path:
    """A run dir with run.json and traces.jsonl: ids in ``correct`` answer gold, others a wrong answer."""
    path.mkdir(parents=True, exist_ok=True)
    outcomes = outcomes or {}
    traces = []
    for row in rows:
        if row.id in skip:
            continue
        outcome = outcomes.get(row.id, "answered")
        if outcome != "answered":
            traces.append(trace(row.id, row.question, None, outcome=outcome))
        else:
            traces.append(trace(row.id, row.question, row.answers[0] if row.id in correct else "wrong guess"))
    write_jsonl(path / "traces.jsonl", traces)
    changes = {"release_data_sha256": eval_sha256(rows), **(fp_changes or {})}
    atomic_write_json(path / "run.json", fingerprint(len(rows), model=model, **changes))
    return path


def write_sampled_run(path: Path, rows: list[EvalRow], samples: int, answer: Any, *, model: str = "base",
                      fp_changes: dict[str, Any] | None = None) -> Path:
    """A run dir of K samples per question: ``answer(row, k)`` is sample k's answer (None: no answer tag)."""
    path.mkdir(parents=True, exist_ok=True)
    traces = []
    for row in rows:
        for k in range(samples):
            given = answer(row, k)
            traces.append({**trace(row.id, row.question, given, outcome="answered" if given else "no_answer_tag"),
                           "sample": k})
    write_jsonl(path / "traces.jsonl", traces)
    changes = {"release_data_sha256": eval_sha256(rows), "samples": samples, **(fp_changes or {})}
    atomic_write_json(path / "run.json", fingerprint(len(rows), model=model, **changes))
    return path
