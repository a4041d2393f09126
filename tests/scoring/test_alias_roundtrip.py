"""Property: any gold alias, used verbatim as the prediction, scores EM 1 through the whole run -> score path.

A scripted OpenAI-compatible server (real loopback HTTP) plays a Search-R1
policy that searches once and answers ``<answer> {alias} </answer>``; the real
runner writes the run directory (``run.json`` pins the release's eval sha256)
and the real scorer scores it against the release. Refusal-shaped golds
("Unknown", "I Can't Tell You Why", ...) are drawn on purpose: the agent labels
them ``abstained``, and the scorer must still count them as correct answers.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aethersearch.agents.scripted_server import ScriptedServer, search_r1_rule
from aethersearch.api import evaluate_run
from aethersearch.benchmark.release import (
    FileDigest,
    dataset_card,
    encode_release_rows,
    load_manifest,
    manifest_bytes,
    row_digests,
    write_release_files,
)
from aethersearch.benchmark.verify import verify_release
from aethersearch.jsonl import read_jsonl, read_records, sha256_bytes
from aethersearch.records import DiagnosticsRow, EvalRow
from aethersearch.scoring.api import read_scores
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
    from aethersearch.benchmark.build import build_from_config
    from aethersearch.benchmark.demo_sources import write_demo_sources

    root = tmp_path_factory.mktemp("roundtrip")
    return build_from_config(write_demo_sources(root / "src"), root / "release").release_dir


def release_with_golds(source: Path, out: Path, golds: list[list[str]]) -> list[EvalRow]:
    """A copy of ``source`` whose first rows carry ``golds``, re-published the way ``aether build`` writes it.

    Rows, manifest digests, the dataset card and checksums are all regenerated, so the
    copy passes the full release verifier: it is a release whose gold *is* these aliases.
    """
    rows = read_records(source / "eval.jsonl", EvalRow)
    rows = [row.model_copy(update={"answers": golds[i]}) if i < len(golds) else row for i, row in enumerate(rows)]
    files = encode_release_rows(rows, read_records(source / "diagnostics.jsonl", DiagnosticsRow))
    manifest = load_manifest(source)
    manifest = manifest.model_copy(update={
        "files": {name: FileDigest(sha256=sha256_bytes(data), rows=data.count(b"\n")) for name, data in files.items()},
        "data_sha256": sha256_bytes(files["eval.jsonl"]), "row_sha256": row_digests(files["eval.jsonl"])})
    files["manifest.json"] = manifest_bytes(manifest)
    files["README.md"] = dataset_card(manifest).encode("utf-8")
    for name in ("exclusion_audit.json", "verify_release.py", "ATTRIBUTION.md"):
        files[name] = (source / name).read_bytes()
    out.mkdir(parents=True)
    write_release_files(out, files)
    report = verify_release(out)
    assert report.ok, [check.line() for check in report.failures]
    return rows


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
    for row in scores.per_question:
        trace = traces[row.id]
        assert trace["prediction"] == ANSWERS[trace["question_seen"]].strip()  # verbatim through the agent
        assert row.values["em"] == 1.0, (row, trace["outcome"])
        assert row.outcome == "answered"
    assert scores.overall.micro.metrics["em"].mean == 1.0
