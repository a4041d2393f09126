"""Export -> verl reward on generations -> import as a run -> `aether score` agrees on every row.

verl's side is reproduced call for call (our code, not theirs): the validation
parquet is read with HF ``datasets`` as ``RLHFDataset`` does; the reward is called
as ``NaiveRewardManager.__call__`` does (``extra_info`` gains ``num_turns`` and
``rollout_reward_scores``; a dict return's keys become ``reward_extra_info`` lists);
the dump is written as ``RayPPOTrainer._dump_generations`` writes it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.errors import DataError, IntegrityError
from aethersearch.interop.metric_keys import validation_metrics
from aethersearch.interop.verl_import import import_generations
from aethersearch.interop.verl_reward import compute_score
from aethersearch.jsonl import iter_jsonl, loads
from aethersearch.scoring.api import score_run
from aethersearch.scoring.extract import searchr1_prompt
from aethersearch.scoring.scores_file import read_scores
from tests.scoring.factory import eval_rows, write_release

runner = CliRunner()


def _generation(i: int, golds: list[str]) -> str:
    """Responses covering every way an episode ends: right, wrong, no tag, abstention, alias, several tags."""
    kind = i % 7
    think = "<think>reasoning</think><search>q</search>\n\n<information>Doc 1(Title: T) x</information>\n\n"
    if kind == 0:
        return think + f"<answer> {golds[0]} </answer>"
    if kind == 1:
        return think + "<answer> something else </answer>"
    if kind == 2:
        return think + "I think it is " + golds[0]  # no tag: not an answer, never a right one
    if kind == 3:
        return think + "<answer> I don't know </answer>"
    if kind == 4:
        return think + f"<answer>{golds[-1].upper()}.</answer>"  # an alias, normalised
    if kind == 5:
        return think + f"<answer>wrong</answer> then <answer>{golds[0]}</answer>"  # the last tag counts
    return think + f"<answer>The {golds[0]}</answer>"  # article removed by normalisation


def _verl_validation(parquet: Path, dump_dir: Path, step: int) -> tuple[Path, list[float], list[str]]:
    import datasets

    rows = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    inputs, outputs, gts, scores, sources = [], [], [], [], []
    reward_extra_info: dict[str, list[Any]] = defaultdict(list)
    for i, item in enumerate(rows):
        golds = list(item["reward_model"]["ground_truth"]["target"])
        response_str = _generation(i, golds)
        prompt_str = f"user\n{item['prompt'][0]['content']}\nassistant\n"  # chat template, special tokens skipped
        ground_truth = item["reward_model"]["ground_truth"]
        data_source = item["data_source"]
        extra_info = item.get("extra_info", {})
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        score = compute_score(data_source=data_source, solution_str=response_str, ground_truth=ground_truth,
                              extra_info=extra_info)
        if isinstance(score, dict):
            reward = score["score"]
            for key, value in score.items():
                reward_extra_info[key].append(value)
        else:
            reward = score
        inputs.append(prompt_str)
        outputs.append(response_str)
        gts.append(ground_truth)
        scores.append(reward)
        sources.append(data_source)
    reward_extra_info["reward"] = list(scores)  # ray_trainer adds the summed reward tensor under "reward"
    n = len(inputs)
    base_data: dict[str, list[Any]] = {"input": inputs, "output": outputs, "gts": gts, "score": scores,
                                       "step": [step] * n}
    for key, values in reward_extra_info.items():
        if len(values) == n:
            base_data[key] = values
    dump_dir.mkdir(parents=True, exist_ok=True)
    filename = dump_dir / f"{step}.jsonl"
    lines = [json.dumps({k: v[i] for k, v in base_data.items()}, ensure_ascii=False) for i in range(n)]
    filename.write_text("\n".join(lines) + "\n")
    return filename, scores, sources


@pytest.fixture()
def release(tmp_path: Path) -> Path:
    return write_release(tmp_path / "release", eval_rows(per_source=10))


def test_export_reward_import_score_agree_on_every_row(tmp_path: Path, release: Path) -> None:
    exported = runner.invoke(app, ["export", "verl", str(release), "--out", str(tmp_path / "val.parquet")])
    assert exported.exit_code == 0, exported.output
    sidecar = loads((tmp_path / "val.parquet.aether.json").read_bytes())
    assert sidecar["release_id"] == "test-release" and sidecar["rows"] == 30 and sidecar["carries_gold"]

    dump, rewards, sources = _verl_validation(tmp_path / "val.parquet", tmp_path / "val_generations", step=120)
    imported = runner.invoke(app, ["import", "verl", str(dump), "--release", str(release), "--out",
                                   str(tmp_path / "run")])
    assert imported.exit_code == 0, imported.output
    scored = runner.invoke(app, ["score", str(tmp_path / "run"), "--release", str(release)])
    assert scored.exit_code == 0, scored.output

    per_row = [row for _, row in iter_jsonl(tmp_path / "run" / "scores_questions.jsonl")]
    assert [row["values"]["em"] for row in per_row] == rewards  # every row, in release order
    assert 0 < sum(rewards) < len(rewards)  # both right and wrong answers were exercised
    outcomes = {row["outcome"] for row in per_row}
    assert {"answered", "no_answer_tag", "abstained"} <= outcomes

    keys = validation_metrics(read_scores(tmp_path / "run"), "both")
    for source in set(sources):
        mine = [r for r, s in zip(rewards, sources, strict=True) if s == source]
        assert keys[f"val-core/{source}/reward/mean@1"] == pytest.approx(sum(mine) / len(mine))
        assert keys[f"val/test_score/{source}"] == keys[f"val-core/{source}/reward/mean@1"]
    assert keys["val/test_score/all"] == pytest.approx(sum(rewards) / len(rewards))
    assert keys["val-core/all/reward/mean@1"] == keys["val/test_score/all"]


def test_exported_rows_match_searchr1_data_process(tmp_path: Path, release: Path) -> None:
    import pyarrow.parquet as pq

    runner.invoke(app, ["export", "verl", str(release), "-o", str(tmp_path / "val.parquet")])
    rows = pq.read_table(tmp_path / "val.parquet").to_pylist()
    first = eval_rows(per_source=10)[0]
    assert rows[0] == {
        "id": first.id,
        "question": first.question,
        "golden_answers": first.answers,
        "data_source": "nq",
        "prompt": [{"role": "user", "content": searchr1_prompt(first.question)}],
        "ability": "fact-reasoning",
        "reward_model": {"style": "rule", "ground_truth": {"target": first.answers}},
        "extra_info": {"split": "test", "index": 0, "release_id": "test-release", "row_id": first.id,
                       "question": first.question},
    }
    flash = runner.invoke(app, ["export", "flashrag", str(release), "--out", str(tmp_path / "test.jsonl")])
    assert flash.exit_code == 0, flash.output
    lines = [row for _, row in iter_jsonl(tmp_path / "test.jsonl")]
    assert lines[0] == {"id": first.id, "question": first.question, "golden_answers": first.answers}
    assert (tmp_path / "test.jsonl.aether.json").is_file()


def test_export_carries_what_aethersearch_fixed_eval_pins(tmp_path: Path, release: Path) -> None:
    """Their loader reads ``id`` and ``data_source`` and pins the sha256 and lower-cased per-source counts."""
    import hashlib

    import pyarrow.parquet as pq

    result = runner.invoke(app, ["export", "verl", str(release), "-o", str(tmp_path / "val.parquet")])
    assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "val.parquet", columns=["id", "data_source"]).to_pylist()
    assert [row["id"] for row in table] == [row.id for row in eval_rows(per_source=10)]
    sha = hashlib.sha256((tmp_path / "val.parquet").read_bytes()).hexdigest()
    assert f"expected_validation_sha256: {sha}" in result.output
    assert "    bamboogle: 10\n    hotpotqa: 10\n    nq: 10" in result.output
    assert "per source: bamboogle=10, hotpotqa=10, nq=10" in result.output


def test_missing_release_is_a_message(tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", "verl", str(tmp_path / "nope"), "--out", str(tmp_path / "v.parquet")])
    assert result.exit_code != 0 and not (tmp_path / "v.parquet").exists()


def test_lines_without_row_ids_are_matched_by_question(tmp_path: Path, release: Path) -> None:
    runner.invoke(app, ["export", "verl", str(release), "--out", str(tmp_path / "val.parquet")])
    dump, rewards, _ = _verl_validation(tmp_path / "val.parquet", tmp_path / "gen", step=7)
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    for line in lines:
        line.pop("aether_row_id")
    stripped = tmp_path / "stripped.jsonl"
    stripped.write_text("".join(json.dumps(line) + "\n" for line in reversed(lines)))
    result = import_generations(stripped, release, tmp_path / "run")
    assert result.imported == 30 and result.step == 7
    runner.invoke(app, ["score", str(tmp_path / "run"), "--release", str(release)])
    per_row = [row for _, row in iter_jsonl(tmp_path / "run" / "scores_questions.jsonl")]
    assert [row["values"]["em"] for row in per_row] == rewards


def test_generations_scored_against_other_gold_are_refused(tmp_path: Path, release: Path) -> None:
    runner.invoke(app, ["export", "verl", str(release), "--out", str(tmp_path / "val.parquet")])
    dump, _, _ = _verl_validation(tmp_path / "val.parquet", tmp_path / "gen", step=1)
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    lines[3]["gts"] = {"target": ["a different answer"]}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(IntegrityError, match=r"bad.jsonl:4: gold"):
        import_generations(bad, release, tmp_path / "run")
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text(dump.read_text() + dump.read_text().splitlines()[0] + "\n")
    first = json.loads(dump.read_text().splitlines()[0])["aether_row_id"]
    with pytest.raises(DataError, match=f"row '{first}' has 2 generation.*other rows have 1") as caught:
        import_generations(doubled, release, tmp_path / "run2")
    assert caught.value.line == 1


def test_n_generations_per_prompt_are_imported_as_k_samples(tmp_path: Path, release: Path) -> None:
    """verl's val_kwargs.n = 3 repeats each prompt 3 times in the dump: imported as 3 samples, scored as mean@3."""
    runner.invoke(app, ["export", "verl", str(release), "--out", str(tmp_path / "val.parquet")])
    dump, _, sources = _verl_validation(tmp_path / "val.parquet", tmp_path / "gen", step=5)
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    sampled, by_source = [], defaultdict(list)
    for i, line in enumerate(lines):  # interleaved as verl repeats a batch: a prompt's n samples together
        golds = list(line["gts"]["target"])
        for k in range(3):
            output = _generation(i + k, golds)
            reward = compute_score(sources[i], output, line["gts"], {})
            sampled.append({**line, "output": output, "score": reward["score"]})
            by_source[sources[i]].append(reward["score"])
    path = tmp_path / "n3.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in sampled))
    result = import_generations(path, release, tmp_path / "run")
    assert result.imported == 90
    assert json.loads((tmp_path / "run" / "run.json").read_text())["samples"] == 3
    traces = [row for _, row in iter_jsonl(tmp_path / "run" / "traces.jsonl")]
    assert [t["sample"] for t in traces[:6]] == [0, 1, 2, 0, 1, 2]
    scores = score_run(tmp_path / "run", release)
    keys = validation_metrics(scores, "verl")
    for source, values in by_source.items():  # verl's own reward/mean@3: the mean over every sample
        assert keys[f"val-core/{source}/reward/mean@3"] == pytest.approx(sum(values) / len(values))
    assert set(scores.overall.micro.reducers["em"]) == {"mean@3", "pass@1", "pass@2", "pass@3", "maj@3"}


def test_reward_accepts_every_ground_truth_shape() -> None:
    import numpy as np

    response = "<answer>Paris</answer>"
    for truth in ({"target": ["Paris"]}, {"target": np.array(["Paris"], dtype=object)}, ["Paris"], "Paris"):
        assert compute_score("nq", response, truth, {})["score"] == 1.0
    assert compute_score("nq", "Paris", {"target": ["Paris"]}, None)["score"] == 0.0  # no tag: no answer
