"""`aether view` served in-process: the list's filters and pages, one trace, side by side, and bad inputs."""

from __future__ import annotations

import re
import subprocess
import sys
from html import unescape as html_unescape
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.jsonl import read_jsonl
from aethersearch.report.viewer.app import create_app, load_viewer
from aethersearch.report.viewer.questions import PAGE_SIZE, QuestionQuery, QuestionRow, RunCell, query_questions
from aethersearch.report.viewer.trace_view import mark_golds
from tests.report.viewer_fixtures import CHAIN_QUESTIONS, ViewerRuns, make_sampled_demo_run, make_viewer_runs, mixed_question, snapshot, trace, write_bad_runs
from tests.serving import free_port, wait_for_json


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> ViewerRuns:
    return make_viewer_runs(tmp_path_factory.mktemp("viewer"))


@pytest.fixture(scope="module")
def client(runs: ViewerRuns) -> TestClient:
    viewer = load_viewer([runs.sft, runs.rl], corpus=runs.corpus)
    return TestClient(create_app(viewer), raise_server_exceptions=False)


def _ids(html: str) -> list[str]:
    return re.findall(r'<tr data-id="([^"]+)"', html)


def test_the_list_pages_on_the_server_and_labels_runs_by_model(client: TestClient, runs: ViewerRuns) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert _ids(page.text) == [row.id for row in runs.rows[:PAGE_SIZE]]  # never every row at once
    assert f"{len(runs.rows)} questions match" in re.sub(r"<[^>]+>", "", page.text)
    assert "sft-ckpt" in page.text and "rl-ckpt" in page.text
    second = client.get("/api/questions", params={"page": 1}).json()
    assert second["ids"] == [row.id for row in runs.rows[PAGE_SIZE:2 * PAGE_SIZE]]


def test_flip_filter_finds_exactly_the_questions_that_changed(client: TestClient, runs: ViewerRuns) -> None:
    for flip, expected in (("gained", runs.gained), ("lost", runs.lost), ("either", runs.gained | runs.lost)):
        data = client.get("/api/questions", params={"flip_a": "sft", "flip_b": "rl", "flip": flip,
                                                     "size": 500}).json()
        assert set(data["ids"]) == expected and data["total"] == len(expected)
        assert "/compare/" in data["rows_html"]


def test_filters_search_and_sort_are_deep_links(client: TestClient, runs: ViewerRuns) -> None:
    wanted = [r.id for r in runs.rows if r.source_dataset == "hotpotqa"]
    assert _ids(client.get("/?source=hotpotqa&size=500").text) == wanted
    assert _ids(client.get("/?q=hotpotqa%20question%2017").text) == [wanted[17]]
    desc = client.get("/api/questions", params={"sort": "id", "desc": "true", "size": 3}).json()
    assert desc["ids"] == [r.id for r in runs.rows[::-1][:3]]
    wrong = client.get("/api/questions", params={"run": "rl", "correct": "wrong", "size": 500}).json()
    assert wrong["total"] == sum(1 for i, _ in enumerate(runs.rows) if i % 3)


def _row(i: int, source: str, em: float) -> QuestionRow:
    cell = RunCell("answered", em, em, "x", i % 4, 10 * i, 0.1 * i, None)
    return QuestionRow(f"q{i:04d}", source, f"question {i}", (cell, cell._replace(em=1.0 - em)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([0.0, 1.0])), max_size=60),
       st.integers(1, 17), st.sampled_from(["id", "em", "tool_calls", "wall_s", "outcome"]), st.booleans(),
       st.sampled_from(["", "a"]), st.sampled_from(["", "gained", "lost", "either"]))
def test_pages_cover_every_matching_row_exactly_once_in_order(
        cells: list[tuple[str, float]], size: int, sort: str, desc: bool, source: str, flip: str) -> None:
    rows = [_row(i, s, em) for i, (s, em) in enumerate(cells)]
    base = QuestionQuery(sort=sort, desc=desc, size=size, source=source, flip=flip, flip_a="x", flip_b="y")
    first = query_questions(rows, ["x", "y"], base)
    seen = [row for page in range(first.pages) for row in query_questions(rows, ["x", "y"],
                                                                           base.model_copy(update={"page": page})).rows]
    expected = [r for r in rows if (not source or r.source == source)
                and (not flip or (flip == "gained" and r.cells[0].em == 0.0) or (flip == "lost" and r.cells[0].em == 1.0)
                     or flip == "either")]
    assert sorted(r.id for r in seen) == sorted(r.id for r in expected) and len(seen) == first.total
    if sort == "id":
        assert [r.id for r in seen] == sorted((r.id for r in expected), reverse=desc)


def test_one_trace_shows_turns_documents_gold_marks_extraction_and_chain(client: TestClient, runs: ViewerRuns) -> None:
    row = runs.rows[0]
    html = client.get(f"/q/{row.id}", params={"run": "rl"}).text
    assert "Answer the given question." in html  # the Search-R1 prompt, rebuilt and labelled so
    assert 'class="tag tag-search"' in html and 'class="tag tag-answer"' in html
    assert f'<td class="docid">doc_{row.id}</td>' in html and "not recorded" in html
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html  # document text is escaped, never injected
    assert '<mark class="gold" title="gold alias' in html and "gold aliases marked: evaluator's view" in html
    assert "the last of 1 &lt;answer&gt; span(s)" in html
    states = re.findall(r'class="node state-(\w+)', html)
    assert states == ["visited", "unlocked", "masked"]  # bridge unlocked by the subject visit, answer still locked
    assert "<th>sufficient?</th><td>no</td>" in html


def test_side_by_side_aligns_turns(client: TestClient, runs: ViewerRuns) -> None:
    qid = next(iter(sorted(runs.gained)))
    html = client.get(f"/compare/{qid}", params={"a": "sft", "b": "rl"}).text
    assert html.count('class="aligned-turn"') == 2 + (qid in {r.id for r in runs.rows[:CHAIN_QUESTIONS]})
    assert "sft-ckpt" in html and "rl-ckpt" in html


def test_gold_marks_escape_html_and_match_whole_words() -> None:
    marked = str(mark_golds("<script>Paris</script> Parisian paris", ["Paris"]))
    assert "<script>" not in marked and marked.count('<mark class="gold"') == 2


def test_bad_runs_get_clear_pages_and_are_never_written(tmp_path: Path, runs: ViewerRuns) -> None:
    bad = write_bad_runs(tmp_path, runs)
    before = {name: snapshot(path) for name, path in bad.items() if path.exists()}
    viewer = load_viewer([runs.rl, *bad.values()], release=runs.release)
    client = TestClient(create_app(viewer), raise_server_exceptions=False)
    expected = {"missing": "does not exist", "half": "traces.jsonl:91: the last line is incomplete",
                "malformed": "traces.jsonl:5: invalid JSON", "other": "scored against"}
    listing = client.get("/").text
    for name, needle in expected.items():
        page = client.get(f"/run/{name}")
        assert page.status_code == 200 and 'id="problem"' in page.text
        assert needle in page.text and "How to fix" in page.text and "Traceback" not in page.text
        assert f'data-run="{name}"' in listing
        refused = client.get("/q/eval_0001", params={"run": name})
        assert refused.status_code == 400 and 'id="problem"' in refused.text
    assert _ids(listing)  # the good run is still browsable
    assert {name: snapshot(path) for name, path in bad.items() if path.exists()} == before


def test_trace_of_unknown_question_or_run_is_a_page_not_an_error(client: TestClient) -> None:
    for url in ("/q/no_such_question?run=rl", "/q/eval_0001?run=nope", "/run/nope", "/?page=-3", "/?sort=id&size=0"):
        page = client.get(url)
        assert page.status_code in (400, 404) and 'id="problem"' in page.text and "Traceback" not in page.text


def test_c_of_k_is_counted_when_traces_carry_samples(tmp_path: Path, runs: ViewerRuns) -> None:
    """Issue 26's K samples: lines with a ``sample`` field are counted c of K (EM) and each sample opens alone.

    Today's scorer refuses a ``sample`` field, so the sampled lines are put beside a scored run's rows.
    """
    import orjson

    from aethersearch.report.viewer.runs import index_traces

    rows = runs.rows
    lines = [trace(rows[0], rows[0].answers[0], chain=False, sample=s) for s in (0, 1)]
    lines.append(trace(rows[0], "wrong", chain=False, sample=2))
    (tmp_path / "traces.jsonl").write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    viewer = load_viewer([runs.rl], release=runs.release)
    sampled = viewer.runs[0]._replace(path=tmp_path, traces=index_traces(tmp_path / "traces.jsonl"))
    client = TestClient(create_app(viewer._replace(runs=[sampled])), raise_server_exceptions=False)
    first = client.get("/api/questions", params={"size": 1}).json()
    assert "2 of 3" in first["rows_html"]
    page = client.get(f"/q/{rows[0].id}", params={"sample": 2}).text
    assert "samples:" in page and '<p class="prediction">wrong</p>' in page


def test_aether_view_command_serves_on_localhost(runs: ViewerRuns) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "view", str(runs.sft), str(runs.rl),
                             "--port", str(port), "--label", "SFT", "--label", "RL"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        health = wait_for_json(f"http://127.0.0.1:{port}/api/health", proc)
        assert health["runs"] == ["sft", "rl"]
        assert ">SFT<" in httpx.get(f"http://127.0.0.1:{port}/").text.replace(" ⚠", "")
        assert httpx.post(f"http://127.0.0.1:{port}/api/questions").status_code == 405  # read-only: GET only
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_sampled_demo_run(tmp_path_factory.mktemp("sampled"))


def _answer_tables(html: str) -> tuple[str, str]:
    own = html.split('class="kv sample-values"', 1)[1].split("</table>", 1)[0]
    mean = html.split('class="kv question-mean-values"', 1)[1].split("</table>", 1)[0]
    return own, mean


def test_a_sample_page_shows_that_samples_scores_and_the_question_mean_apart(sampled: tuple[Path, Path]) -> None:
    import orjson

    run, release = sampled
    qid, right, wrong = mixed_question(run)
    row = next(r for r in read_jsonl(run / "scores_questions.jsonl") if r["id"] == qid)
    mean_em = row["values"]["em"]
    assert 0 < mean_em < 1
    client = TestClient(create_app(load_viewer([run], release=release)), raise_server_exceptions=False)
    for sample, em_text in ((wrong, "0.000"), (right, "1.000")):
        html = client.get(f"/q/{qid}", params={"sample": sample}).text
        own, mean = _answer_tables(html)
        assert f">{em_text}</td>" in own.split("</tr>", 1)[0], own  # EM row: this sample's own 0 or 1
        assert f">{mean_em:.3f}</td>" in mean.split("</tr>", 1)[0]  # the question's mean@5, labelled apart
        assert f"this sample ({sample})" in html and "mean@5 over its 5 samples" in html
    assert orjson.loads((run / "run.json").read_bytes())["samples"] == 5


@pytest.mark.parametrize(("url", "named"), [
    ("/?run=nope", "run='nope'"), ("/?sort=bogus", "sort='bogus'"), ("/?bogus=1", "'bogus'"),
    ("/?flip_a=nope&flip=either", "flip_a='nope'"), ("/?source=nowhere", "source='nowhere'"),
    ("/?outcome=maybe", "outcome='maybe'"), ("/?page=999", "page=999"), ("/?desc=sideways", "desc='sideways'"),
    ("/api/questions?sort=bogus", "sort='bogus'"), ("/q/eval_0001?run=rl&sample=x", "sample='x'"),
    ("/q/eval_0001?run=rl&sample=3", "sample=3"), ("/q/eval_0001?run=rl&bogus=1", "'bogus'"),
    ("/compare/eval_0001?a=sft&b=rl&c=1", "'c'"),
])
def test_every_bad_query_parameter_gets_the_error_page_naming_it(client: TestClient, url: str, named: str) -> None:
    page = client.get(url)
    assert page.status_code == 400 and 'id="problem"' in page.text, (url, page.status_code)
    assert html_unescape(named) in html_unescape(page.text), (url, page.text[:2000])
