"""Two scored Search-R1-style runs on one small release, with a sandbox chain, for the viewer's tests.

Each trace is written turn by turn as the runner writes it (generated text with
tags, a search with the returned ids and the observation, page visits), the
release carries a diagnostics row with a masked chain for its first questions,
the runs carry ``factorised_questions.jsonl`` rows, and both runs are scored by
the real scorer, so the viewer reads exactly what it reads in use.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.corpus.store import build_store
from aethersearch.diagnostics.factorised import episodes_from_rows, factorise, read_factorised_rows
from aethersearch.jsonl import atomic_write_json, write_jsonl
from aethersearch.records import Document, EvalRow
from aethersearch.scoring.api import score_run
from tests.scoring.factory import eval_rows, eval_sha256, fingerprint, write_checksums, write_release

PER_SOURCE = 30
CHAIN_QUESTIONS = 6


class ViewerRuns(NamedTuple):
    """What the viewer tests open: the release, the corpus, two runs, and the expected flips."""

    release: Path
    corpus: Path
    sft: Path
    rl: Path
    rows: list[EvalRow]
    gained: set[str]
    lost: set[str]


def chain_of(row: EvalRow) -> list[str]:
    """The chain pages of a question: subject, one bridge, the answer page."""
    number = row.id.split("_")[-1]
    return [f"subject_{number}", f"bridge_{number}", f"answer_{number}"]


def _diagnostics(rows: list[EvalRow]) -> list[dict[str, Any]]:
    out = []
    for row in rows[:CHAIN_QUESTIONS]:
        path = chain_of(row)
        out.append({"id": row.id, "source_dataset": row.source_dataset, "path": path, "hops": 2,
                    "evidence": path[:2],
                    "extra": {"mask": {"path": path, "hidden_terms": {path[1]: [f"Bridge {row.id}"],
                                                                      path[2]: [row.answers[0]]}}}})
    return out


def _documents(rows: list[EvalRow]) -> list[Document]:
    docs = []
    for row in rows:
        docs.append(Document(id=f"doc_{row.id}", title=f"Page of {row.id}",
                             text=f"This page says the answer is {row.answers[0]}. Other text <b>not bold</b>."))
        for page in chain_of(row):
            docs.append(Document(id=page, title=page.replace("_", " ").title(), text=f"{page} is a page."))
    return docs


def trace(row: EvalRow, answer: str | None, *, chain: bool, sample: int | None = None) -> dict[str, Any]:
    """A Search-R1-style trace, turn by turn; chain questions also visit the first ``len(path) - 1`` pages."""
    search = f"<think>I need to find {row.question}</think><search>{row.question}</search>"
    observation = f"\n\n<information>Doc 1(Title: Page of {row.id}) the answer is {row.answers[0]}</information>\n\n"
    final = f"<think>found it</think><answer> {answer} </answer>" if answer is not None else "<think>lost</think>"
    steps: list[dict[str, Any]] = [
        {"index": 0, "agent": "main", "notes": {},
         "llm": {"text": search, "prompt_tokens": 200, "completion_tokens": 20, "finish_reason": "stop",
                 "elapsed_s": 0.1, "tool_calls_raw": []},
         "tool_calls": [{"tool": "search", "arguments": {"query": row.question, "k": 3},
                         "returned_ids": [f"doc_{row.id}"], "suppressed_ids": [], "error": None,
                         "elapsed_s": 0.01, "started_at": None}],
         "observation": observation}]
    if chain:
        visits = [{"tool": "visit", "arguments": {"page": page}, "returned_ids": [page], "suppressed_ids": [],
                   "error": None, "elapsed_s": 0.01, "started_at": None} for page in chain_of(row)[:1]]
        steps.append({"index": 1, "agent": "main", "notes": {}, "llm": None, "tool_calls": visits,
                      "observation": None})
    steps.append({"index": len(steps), "agent": "main", "notes": {},
                  "llm": {"text": final, "prompt_tokens": 300, "completion_tokens": 10, "finish_reason": "stop",
                          "elapsed_s": 0.1, "tool_calls_raw": []},
                  "tool_calls": [], "observation": None})
    line: dict[str, Any] = {
        "id": row.id, "question_seen": row.question, "agent": "search-r1", "schema_version": 1,
        "response": search + observation + final, "prediction": answer,
        "outcome": "answered" if answer is not None else "no_answer_tag",
        "stop_reason": "answer" if answer is not None else "max_turns", "error": None, "error_kind": None,
        "usage": {"prompt_tokens": 500, "completion_tokens": 30, "turns": 2, "tool_calls": len(steps) - 1},
        "elapsed_s": 0.25, "attempt": 1, "steps": steps}
    if sample is not None:
        line["sample"] = sample
    return line


def write_traced_run(path: Path, rows: list[EvalRow], correct: set[str], model: str,
                     release_data_sha256: str | None = None) -> Path:
    """A run directory of full traces (and factorised rows for the chain questions), not yet scored."""
    path.mkdir(parents=True, exist_ok=True)
    chains = {row.id for row in rows[:CHAIN_QUESTIONS]}
    write_jsonl(path / "traces.jsonl", [trace(row, row.answers[0] if row.id in correct else "a wrong guess",
                                              chain=row.id in chains) for row in rows])
    atomic_write_json(path / "run.json", fingerprint(len(rows), model=model, agent="search-r1",
                                                     release_data_sha256=release_data_sha256 or eval_sha256(rows)))
    write_jsonl(path / "factorised_questions.jsonl", factorised_rows(rows, correct, chains))
    atomic_write_json(path / "factorised.json",
                      factorise(episodes_from_rows(read_factorised_rows(path / "factorised_questions.jsonl"))))
    led = sorted(correct)[:3]
    atomic_write_json(path / "probes.json", {"lead_astray": {"lead_astray_rate": len(led) / 12, "n_led_astray": len(led),
                                                             "n_eligible": 12, "led_astray_ids": led},
                                             "forget": {"applicable": False, "reason": "no model"}})
    return path


def factorised_rows(rows: list[EvalRow], correct: set[str], chains: set[str]) -> list[dict[str, Any]]:
    """``factorised_questions.jsonl`` as the diagnostics write it: chain questions gather only their subject page,
    the others 2-4 hops with a varying share of their evidence gathered."""
    out = []
    for i, row in enumerate(rows):
        hops = 2 if row.id in chains else 2 + i % 3
        evidence = chain_of(row)[:2] if row.id in chains else [f"{row.id}_e{k}" for k in range(hops)]
        gathered = evidence[:1] if row.id in chains else evidence[:min(hops, (i * 7) % 5)]
        out.append({"id": row.id, "source": row.source_dataset, "hops": hops, "evidence": evidence,
                    "gathered": gathered, "parametric": [], "sufficient": gathered == evidence,
                    "search_score": int(gathered == evidence), "evidence_coverage": len(gathered) / len(evidence),
                    "outcome": "abstained" if i % 11 == 5 else "answered", "correct": row.id in correct})
    return out


def make_viewer_runs(root: Path) -> ViewerRuns:
    """Write and score the release, corpus and the two runs under ``root``."""
    rows = eval_rows(PER_SOURCE)
    release = write_release(root / "release", rows)
    write_jsonl(release / "diagnostics.jsonl", _diagnostics(rows))
    write_checksums(release)
    corpus = root / "corpus"
    build_store(_documents(rows), corpus)
    right_sft = {row.id for i, row in enumerate(rows) if i % 2 == 0}
    right_rl = {row.id for i, row in enumerate(rows) if i % 3 == 0}
    sft = write_traced_run(root / "sft", rows, right_sft, "sft-ckpt")
    rl = write_traced_run(root / "rl", rows, right_rl, "rl-ckpt")
    for run in (sft, rl):
        score_run(run, release, resamples=200)
    return ViewerRuns(release, corpus, sft, rl, rows, right_rl - right_sft, right_sft - right_rl)


def write_bad_runs(root: Path, runs: ViewerRuns) -> dict[str, Path]:
    """A missing run, a half-written one, one with a malformed line, one scored against another release."""
    half = root / "half"
    shutil.copytree(runs.rl, half)
    for name in ("scores.json", "scores_questions.jsonl"):
        (half / name).unlink()
    with (half / "traces.jsonl").open("ab") as handle:
        handle.write(b'{"id": "eval_0001", "question_seen": "tor')
    malformed = root / "malformed"
    shutil.copytree(runs.sft, malformed)
    lines = (malformed / "traces.jsonl").read_bytes().split(b"\n")
    lines[4] = b'{"id": "eval_0005", "oops'
    (malformed / "traces.jsonl").write_bytes(b"\n".join(lines))
    other_rows = eval_rows(2)
    other_release = write_release(root / "other_release", other_rows)
    other = write_traced_run(root / "other", other_rows, set(), "other-ckpt")
    score_run(other, other_release, resamples=50)
    return {"missing": root / "missing", "half": half, "malformed": malformed, "other": other}


def snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``directory`` with its mtime and bytes: equal before and after means nothing was written."""
    return {str(p.relative_to(directory)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(directory.rglob("*")) if p.is_file()}


def make_sampled_demo_run(root: Path) -> tuple[Path, Path]:
    """The demo release rolled out 5 times per question by the sampling ``lexical`` agent, scored: (run, release)."""
    from typer.testing import CliRunner

    from aethersearch.cli import app

    out = root / "demo"
    result = CliRunner().invoke(app, ["eval", "--out", str(out), "--no-sandbox", "--no-progress", "--samples", "5",
                                      "--temperature", "0.8"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out / "run", out / "release"


def mixed_question(run: Path) -> tuple[str, int, int]:
    """A question of a scored K-sample run with a right and a wrong sample: (id, a right sample, a wrong sample)."""
    from aethersearch.jsonl import read_jsonl

    for row in read_jsonl(run / "scores_questions.jsonl"):
        ems = {s["sample"]: s["values"]["em"] for s in row["samples"]}
        right = [k for k, v in ems.items() if v == 1.0]
        wrong = [k for k, v in ems.items() if v == 0.0]
        if right and wrong:
            return row["id"], right[0], wrong[0]
    raise AssertionError("no question with both a right and a wrong sample")
