"""The report's opening as papers lay it out: runs x metrics under the papers' names with CIs, Search Score
vs GenScore, per-hop curves, colour-blind-safe SVG, raw JSON behind a disclosure, labels by --label or model."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from aethersearch.report.html import write_report
from aethersearch.report.metric_names import PAPER_METRICS, QA_METRICS
from aethersearch.report.paper import run_metrics
from aethersearch.scoring.scores_file import read_scores
from tests.report.viewer_fixtures import ViewerRuns, make_viewer_runs

OKABE_ITO = {"#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#f0e442", "#000000"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> ViewerRuns:
    return make_viewer_runs(tmp_path_factory.mktemp("paper"))


@pytest.fixture(scope="module")
def html(runs: ViewerRuns, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("paper_report") / "report.html"
    return write_report([runs.sft, runs.rl], out, release_dir=runs.release).read_text(encoding="utf-8")


def _paper_table(html: str) -> tuple[list[str], dict[str, list[str]]]:
    table = re.search(r'<table class="paper">(.*?)</table>', html, re.DOTALL)
    assert table
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table.group(1))
    rows = {cells[0]: cells[1:] for cells in (re.findall(r"<td>(.*?)</td>", row) for row in
                                               re.findall(r"<tr><td>.*?</tr>", table.group(1), re.DOTALL))}
    return headers, rows


def test_report_opens_with_the_runs_by_metrics_table_under_paper_names(html: str) -> None:
    body = html.split("<body>", 1)[1]
    assert body.index('<table class="paper">') < body.index("<table") + 1  # the first table of the page
    assert re.findall(r"<h2[^>]*>([^<]*)</h2>", body)[0] == "Results"
    headers, rows = _paper_table(html)
    expected = ["run", "n", *(m.label for m in QA_METRICS),
                *(m.label for m in PAPER_METRICS if m.label != "Forget")]  # no run has a Forget rate
    assert headers == expected
    assert set(rows) == {"sft-ckpt", "rl-ckpt"}  # labelled by model name, not by settings


def test_paper_figures_equal_the_published_files_and_carry_cis(runs: ViewerRuns, html: str) -> None:
    headers, rows = _paper_table(html)
    factorised = orjson.loads((runs.rl / "factorised.json").read_bytes())["overall"]
    keys = {m.label: m.where[-1] for m in PAPER_METRICS if m.where[0] == "factorised"}
    for label, key in keys.items():
        cell = rows["rl-ckpt"][headers.index(label) - 1]
        mean, low, high = (float(x) for x in re.findall(r"\d\.\d{3}", cell))
        assert f"{factorised[key]:.3f}" == f"{mean:.3f}" and low <= mean <= high, (label, cell)
    scores = read_scores(runs.rl).overall.micro.metrics["em"]
    assert rows["rl-ckpt"][headers.index("EM") - 1].startswith(f"{scores.mean:.3f}")
    lead = rows["rl-ckpt"][headers.index("Lead-astray") - 1]
    assert lead.startswith(f"{3 / 12:.3f}") and "[" in lead


def test_decoupling_figure_per_hop_curves_and_colour_blind_palette(html: str) -> None:
    figure = re.search(r'<figure class="chart" id="decoupling-1">(.*?)</figure>', html, re.DOTALL)
    assert figure and "<svg" in figure.group(1)
    assert "Search Score" in figure.group(1) and "GenScore" in figure.group(1)
    assert "sft-ckpt" in figure.group(1) and "rl-ckpt" in figure.group(1)
    hops = re.search(r'<figure class="chart" id="per-hop-1">(.*?)</figure>', html, re.DOTALL)
    assert hops and "hops" in hops.group(1) and "Pass@1" in hops.group(1)
    colours = {c.lower() for c in re.findall(r"(?:fill|stroke):\s*(#[0-9a-fA-F]{6})", figure.group(1) + hops.group(1))}
    run_colours = colours - {"#ffffff", "#999999", "#b0b0b0", "#000000", "#cccccc", "#262626"}
    assert run_colours and run_colours <= OKABE_ITO, run_colours


def test_raw_diagnostics_sit_behind_a_disclosure_not_key_by_key_tables(html: str) -> None:
    assert "factorised.json / by_hops" not in html and "<td>probe_dir</td>" not in html
    raw = re.findall(r'<details class="raw">(.*?)</details>', html, re.DOTALL)
    assert len(raw) == 2 and all("&#34;by_hops&#34;" in block or '"by_hops"' in block for block in raw)


def test_labels_come_from_the_label_option(runs: ViewerRuns, tmp_path: Path) -> None:
    html = write_report([runs.sft, runs.rl], tmp_path / "r.html", release_dir=runs.release,
                        labels=["SFT", "RL"]).read_text(encoding="utf-8")
    assert set(_paper_table(html)[1]) == {"SFT", "RL"}
    from aethersearch.errors import ConfigError

    with pytest.raises(ConfigError, match="one --label per run"):
        write_report([runs.sft, runs.rl], tmp_path / "r2.html", release_dir=runs.release, labels=["SFT"])


def test_factorised_ci_is_a_point_when_every_question_is_alike(runs: ViewerRuns, tmp_path: Path) -> None:
    import shutil

    from aethersearch.jsonl import read_jsonl, write_jsonl

    run = tmp_path / "alike"
    shutil.copytree(runs.rl, run)
    first = read_jsonl(run / "factorised_questions.jsonl")[10]
    write_jsonl(run / "factorised_questions.jsonl", [{**first, "id": f"q{i}"} for i in range(40)])
    cells = run_metrics(run, "x", read_scores(runs.rl), resamples=50).cells
    checked = 0
    for metric in PAPER_METRICS:
        cell = cells[metric.label]
        if metric.where[0] == "factorised" and cell is not None and cell.low is not None:
            assert cell.low == cell.high, metric.label  # every resample is the same set of questions
            checked += 1
    assert checked >= 5


def test_flips_carry_hidden_links_into_the_viewer(html: str) -> None:
    assert '<meta name="aether-viewer" content="http://127.0.0.1:7575">' in html
    links = re.findall(r'<a class="viewer-link" hidden data-viewer-path="(/compare/[^"]+)"', html)
    assert links and all("a=sft" in link and "b=rl" in link for link in links)
