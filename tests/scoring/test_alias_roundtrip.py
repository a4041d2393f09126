"""Property: any gold alias, used verbatim as the prediction, scores EM 1 through the whole run -> score path.

A scripted OpenAI-compatible server (real loopback HTTP) plays a Search-R1
policy that searches once and answers ``<answer> {alias} </answer>``; the real
runner writes the run directory (``run.json`` pins the release's eval sha256)
and the real scorer scores it against the release. Refusal-shaped golds
("Unknown", "I Can't Tell You Why", ...) are drawn on purpose: the agent labels
them ``abstained``, and the scorer must still count them as correct answers.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aethersearch.api import evaluate_run
from aethersearch.jsonl import read_jsonl, read_records, sha256_bytes
from aethersearch.records import EvalRow
from aethersearch.release.manifest import (
    encode_release_rows,
)
from aethersearch.release.verify import verify_release
from aethersearch.release_layout import release_layout
from aethersearch.scoring.api import read_scores
from aethersearch.testing.scripted_server import ScriptedServer, search_r1_rule
from tests.compare.test_evaluate_watch import OnePageEnvironment

REFUSAL_SHAPED = ["Unknown", "Don't Know Why", "I Can't Tell You Why", 'I Cannot Say "Farewell"', "I don't know",
                  "N/A", "Na", "Unknown Pleasures", "No", "none"]
# Any printable text a gold alias could hold, except the tag brackets a verbatim answer cannot contain.
ALIAS = st.one_of(
    st.sampled_from(REFUSAL_SHAPED),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="<>"),
            min_size=1, max_size=40).filter(lambda s: s.strip()),
)

ANSWERS: dict[str, str] = {}


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real release built from the demo sources (``evaluate_run`` verifies the release it runs on)."""
    from aethersearch.curation.build import build_from_config
    from aethersearch.sources.demo import write_demo_sources

    root = tmp_path_factory.mktemp("roundtrip")
    return build_from_config(write_demo_sources(root / "src"), root / "release").release_dir


def release_with_golds(source: Path, out: Path, golds: list[list[str]]) -> list[EvalRow]:
    """A release whose first rows carry ``golds``, built by ``aether build`` from edited source files.

    The demo's sources (beside ``source``) are copied, the NQ rows the release selected
    get the drawn aliases, and the release is rebuilt: a release whose gold *is* these
    aliases, which passes the full verifier and its own independent replay. (Patching
    the rows of a built release and regenerating its hashes is exactly the forgery the
    verifier refuses.)
    """
    import yaml

    from aethersearch.curation.build import build_from_config

    sources = out.parent / "src"
    shutil.copytree(source.parent / "src", sources)
    baseline = read_records(release_layout(source).eval, EvalRow)
    nq_file = sources / "nq_open" / "NQ-open.dev.jsonl"
    lines = nq_file.read_bytes().split(b"\n")
    for row, aliases in zip(baseline, golds, strict=False):
        assert row.source_dataset == "nq"
        record = json.loads(lines[row.source_row_number - 1])
        lines[row.source_row_number - 1] = json.dumps({**record, "answer": aliases}).encode()
    nq_file.write_bytes(b"\n".join(lines))
    config = yaml.safe_load((sources / "build.yaml").read_text(encoding="utf-8"))
    for entry in config["sources"]:
        entry.pop("sha256", None)  # the edited file is a new source file
    (sources / "build.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    build_from_config(sources / "build.yaml", out)
    report = verify_release(out)
    assert report.ok, [check.line() for check in report.failures]
    return read_records(release_layout(out).eval, EvalRow)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(search_r1_rule(lambda question: ANSWERS[question], searches=1)) as running:
        yield running


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(ALIAS, min_size=1, max_size=3), min_size=1, max_size=6), st.data())
def test_any_gold_alias_answered_verbatim_scores_em_1_from_run_to_score(
        server: ScriptedServer, demo_release: Path, alias_lists: list[list[str]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        release = Path(tmp) / "release"
        rows = release_with_golds(demo_release, release, alias_lists)
        ANSWERS.clear()
        for index, row in enumerate(rows):  # the drawn rows answer a drawn alias, the others their first gold
            alias = data.draw(st.sampled_from(row.answers), label=row.id) if index < len(alias_lists) \
                else row.answers[0]
            ANSWERS[row.question if row.question.endswith("?") else row.question + "?"] = alias
        result = evaluate_run(server.url, release, model="scripted", run_dir=Path(tmp) / "run",
                              environment_factory=lambda q: OnePageEnvironment(), concurrency=16)
        traces = {t["id"]: t for t in read_jsonl(Path(tmp) / "run" / "traces.jsonl")}
        scores = read_scores(Path(tmp) / "run")
        shutil.rmtree(Path(tmp) / "run")
    assert scores == result.scores
    assert scores.gold.eval_sha256 == sha256_bytes(encode_release_rows(rows, [])["eval.jsonl"])
    assert [set(row.answers) for row in rows[:len(alias_lists)]] == [set(a) for a in alias_lists]
    for row in scores.per_question:
        trace = traces[row.id]
        assert trace["prediction"] == ANSWERS[trace["question_seen"]].strip()  # verbatim through the agent
        assert row.values["em"] == 1.0, (row, trace["outcome"])
        assert row.outcome == "answered"
    assert scores.overall.micro.metrics["em"].mean == 1.0
