"""A verl dump's one response per episode, cut back into AetherSearch's actions: their R_task or a refusal.

The episodes are what AetherSearch's own eval worker produced (``aethersearch_demo_predictions.jsonl``,
d2a21bd, with their R_task) and the per-action cases their scorer scored
(``tests/scoring/fixtures/aethersearch_parity.json.gz``), written as their loop writes a
response: each action, its end-of-sequence, and after an executed search the observation.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aethersearch.agents.aethersearch_protocol import check_action, split_response
from aethersearch.cli import app
from aethersearch.errors import AetherError
from aethersearch.scoring.aethersearch_compat import episode_score
from aethersearch.scoring.api import score_run

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"
PARITY = Path(__file__).parents[1] / "scoring" / "fixtures" / "aethersearch_parity.json.gz"
EOS = "<|im_end|>"


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aethersearch.curation.build import build_from_config
    from aethersearch.sources.demo import write_demo_sources

    root = tmp_path_factory.mktemp("demo")
    build_from_config(write_demo_sources(root / "demo_release_sources"), root / "demo_release")
    return root / "demo_release"


def as_response(actions: list[str], executed: int, eos: str) -> str:
    """Their loop's response: action, EOS, and an observation after each of the first ``executed`` searches."""
    text, searched = "", 0
    for action in actions:
        text += action + eos
        if check_action(action).kind == "search" and searched < executed:
            searched += 1
            text += f"<information>\"Doc {searched}\"\nsome text about it\nmore</information>"
    return text


def _predictions() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "aethersearch_demo_predictions.jsonl").read_text().splitlines()]


def _dump(path: Path, eos: str) -> Path:
    lines = [{"input": "prompt", "output": as_response(p["model_actions"], p["search_count"], eos),
              "aether_row_id": p["dataset_row_id"], "step": 3} for p in _predictions()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_dump_with_its_eos_imports_to_their_r_task_on_every_row(demo_release: Path, tmp_path: Path) -> None:
    dump = _dump(tmp_path / "3.jsonl", EOS)
    result = runner.invoke(app, ["import", "verl", str(dump), "--release", str(demo_release), "--out",
                                 str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    scores = score_run(tmp_path / "run", demo_release, compat="aethersearch", resamples=10)
    theirs = {p["dataset_row_id"]: p for p in _predictions()}
    mine = {q.id: q.values for q in scores.per_question}
    assert {i: mine[i]["aethersearch_f1"] for i in theirs} == {i: p["R_task"] for i, p in theirs.items()}
    assert {i: mine[i]["aethersearch_format"] for i in theirs} == {i: p["F_ans"] for i, p in theirs.items()}
    assert scores.aethersearch is not None
    assert scores.aethersearch["overall"]["avg_search"] == pytest.approx(
        sum(p["search_count"] for p in theirs.values()) / len(theirs))
    # the dump records no tokens or calls: usage is absent and says so, not a mean of zero
    assert scores.usage.questions_with_usage == 0
    assert scores.usage.completion_tokens.mean is None


def test_a_dump_decoded_without_eos_is_refused_with_exit_2_and_the_fix(demo_release: Path, tmp_path: Path) -> None:
    dump = _dump(tmp_path / "3.jsonl", "")  # verl decodes with skip_special_tokens: the EOS is gone
    result = runner.invoke(app, ["import", "verl", str(dump), "--release", str(demo_release), "--out",
                                 str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "cannot be cut into actions" in result.output
    record = json.loads((tmp_path / "run" / "import.json").read_text())
    searched = {p["dataset_row_id"] for p in _predictions() if p["search_count"]}
    assert set(record["actions_unrecovered"]) == searched  # the searchless ones are exact
    scored = runner.invoke(app, ["score", str(tmp_path / "run"), "--release", str(demo_release),
                                 "--compat", "aethersearch"])
    assert isinstance(scored.exception, AetherError) and scored.exception.exit_code == 2  # `aether` exits 2
    message = str(scored.exception)
    assert "--eos-text" in message and "aether import aethersearch" in message
    plain = runner.invoke(app, ["score", str(tmp_path / "run"), "--release", str(demo_release)])
    assert plain.exit_code == 0, plain.output  # the default scorer reads the whole response, as before


def test_a_compat_score_of_a_run_in_another_protocol_is_refused(demo_release: Path, tmp_path: Path) -> None:
    dump = _dump(tmp_path / "3.jsonl", EOS)
    assert runner.invoke(app, ["import", "verl", str(dump), "--release", str(demo_release), "--out",
                               str(tmp_path / "run")]).exit_code == 0
    run_json = tmp_path / "run" / "run.json"
    run_json.write_text(run_json.read_text().replace('"agent": "verl"', '"agent": "react"'))
    for compat in ("aethersearch", "searchr1"):
        scored = runner.invoke(app, ["score", str(tmp_path / "run"), "--release", str(demo_release),
                                     "--compat", compat])
        assert isinstance(scored.exception, AetherError) and scored.exception.exit_code == 2
        assert "tag protocol" in str(scored.exception) and "'react'" in str(scored.exception)


def _loop_cases() -> list[dict]:
    """Their scorer's recorded cases that their loop can produce: every action before the last a valid search."""
    cases = json.loads(gzip.open(PARITY).read())["cases"]
    return [c for c in cases if 0 < len(c["actions"]) <= 6
            and all(check_action(a).kind == "search" for a in c["actions"][:-1])]


def test_every_loop_shaped_case_of_their_scorer_splits_to_their_r_task() -> None:
    cases = _loop_cases()
    assert len(cases) > 1000
    kinds_with_searches = set()
    for case in cases:
        executed = len(case["searches"])  # every search observed (a last one too: a cap ended the episode)
        split = split_response(as_response(case["actions"], executed, EOS), EOS)
        assert split.ambiguous is None, case["kind"]
        assert list(split.actions) == case["actions"], case["kind"]
        assert list(split.queries) == case["searches"], case["kind"]
        score = episode_score(split.actions, case["golds"], source=case["source"])
        assert (score.r_task, score.format_indicator, list(score.queries)) == \
            (case["r_task"], case["format"], case["searches"]), case["kind"]
        if executed:
            kinds_with_searches.add(case["kind"])
    assert kinds_with_searches


def test_without_eos_a_case_is_exact_or_refused_never_different() -> None:
    exact = refused = 0
    for case in _loop_cases():
        split = split_response(as_response(case["actions"], len(case["searches"]), ""), None)
        if split.ambiguous is not None:
            refused += 1
            continue
        exact += 1
        score = episode_score(split.actions, case["golds"], source=case["source"], queries=split.queries)
        assert score.r_task == case["r_task"], case["kind"]
    assert exact and refused


def test_a_model_written_information_block_ends_the_episode_inside_its_action() -> None:
    after_think = "<think>x</think><information>made up</information><answer>Paris</answer>"
    assert split_response(after_think + EOS, EOS).actions == (after_think,)
    after_search = "<search>q</search><information>made up</information><answer>Paris</answer>"
    # no EOS after </search>: the model's block, or the loop's after a 500-token cut; refused either way
    assert split_response(after_search + EOS, EOS).ambiguous is not None
    assert split_response(after_search, None).ambiguous is not None


@pytest.mark.parametrize("response", [
    "<search>q</search>" + EOS + "<information>unterminated",
    "<search>q</search>" + EOS + "<information>a</information>b</information><answer>x</answer>",
    "not valid" + EOS + "<answer>x</answer>",
])
def test_responses_their_loop_cannot_write_are_refused(response: str) -> None:
    assert split_response(response, EOS).ambiguous is not None
