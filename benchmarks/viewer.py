"""`aether view` at the issue's scale: 1,400 questions x 10 runs, time to first render in headless Chromium.

Prints, measured side by side in one run on the same server:
* loading the 10 runs (read_scores with its sha256 checks, trace indexing) and building the list;
* the paged list (`/`, 50 rows on the page, the rest served as JSON on demand): the server's answer time, and
  Chromium's first contentful paint and DOMContentLoaded, median of 5 fresh loads;
* the reference: the same template rendering every question at once (1,400 rows x 10 runs' marks = 14,000
  run cells), measured the same way; and the ratio paged / reference.

Runs are written and scored with the test fixtures' writers (full Search-R1-style traces, factorised rows).
Usage: ``.venv/bin/python benchmarks/viewer.py [--runs 10] [--per-source 200]``. Needs Debian's chromium and
chromium-driver (`apt-get install -y chromium chromium-driver`) and the `test` extra (selenium).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test fixtures' run writers

from aethersearch.records import EvalRow  # noqa: E402
from aethersearch.report.viewer.app import create_app, load_viewer  # noqa: E402
from aethersearch.report.viewer.questions import QuestionQuery, build_rows, page_json, query_questions  # noqa: E402
from aethersearch.scoring.api import score_run  # noqa: E402
from tests.report.test_viewer_browser import Served  # noqa: E402
from tests.report.viewer_fixtures import write_traced_run  # noqa: E402
from tests.scoring.factory import write_release  # noqa: E402

SOURCES = ("nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle")


def release_rows(per_source: int) -> list[EvalRow]:
    rows = []
    for source in SOURCES:
        for i in range(per_source):
            rows.append(EvalRow(id=f"eval1400_{len(rows) + 1:04d}", question=f"which {source} thing is number {i}?",
                                answers=[f"answer {source} {i}"], source_dataset=source, source_split="dev",
                                source_id=None, source_row_number=i + 1, source_file=f"{source}.jsonl"))
    return rows


def paint_times(driver: object, url: str, loads: int) -> tuple[float, float]:
    """Median first contentful paint and DOMContentLoaded (ms) of ``loads`` fresh navigations."""
    fcp, dcl = [], []
    for _ in range(loads):
        driver.get("about:blank")  # type: ignore[attr-defined]
        driver.get(url)  # type: ignore[attr-defined]
        timing = [None, None]
        deadline = time.monotonic() + 60
        while timing[0] is None and time.monotonic() < deadline:  # paint entries are recorded after the paint
            timing = driver.execute_script(  # type: ignore[attr-defined]
                "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                "const n = performance.getEntriesByType('navigation')[0];"
                "return [p ? p.startTime : null, n.domContentLoadedEventEnd];")
            time.sleep(0.05)
        fcp.append(float(timing[0]))
        dcl.append(float(timing[1]))
    return statistics.median(fcp), statistics.median(dcl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--per-source", type=int, default=200)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    root = Path(tempfile.mkdtemp(prefix="aether-view-bench-"))
    rows = release_rows(args.per_source)
    release = write_release(root / "release", rows)
    started = time.perf_counter()
    run_dirs = []
    for k in range(args.runs):
        run = write_traced_run(root / f"ckpt{k}", rows, {r.id for i, r in enumerate(rows) if (i * (k + 3)) % 7 < 3},
                               model=f"ckpt-{k}")
        score_run(run, release, resamples=200)
        run_dirs.append(run)
    print(f"wrote and scored {args.runs} runs x {len(rows)} questions in {time.perf_counter() - started:.1f} s")

    started = time.perf_counter()
    viewer = load_viewer(run_dirs)
    loaded = time.perf_counter() - started
    app = create_app(viewer)
    print(f"viewer start (load {args.runs} runs, index traces, build rows): {loaded:.2f} s")

    keys = [run.key for run in viewer.runs]
    everything = page_json(query_questions(build_rows(viewer.runs, viewer.release), keys,
                                           QuestionQuery.model_construct(**{**QuestionQuery().model_dump(),
                                                                            "size": len(rows)})), keys)
    assert len(everything["rows"]) == len(rows)

    @app.get("/reference-all-rows")
    def reference() -> object:  # the same list template, every row at once
        from fastapi.responses import HTMLResponse

        from aethersearch.report.viewer.app import SORTABLE_COLUMNS, templates

        html = templates().get_template("list.html.j2").render(
            runs=viewer.runs, shown=viewer.runs, release=viewer.release, release_problem=None,
            sources=list(SOURCES), outcomes=[], query=QuestionQuery().model_dump(), first={**everything, "compare": None},
            sortable=SORTABLE_COLUMNS)
        return HTMLResponse(html)

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        with Served(app) as url:
            import httpx

            for path in ("/", "/reference-all-rows"):  # warm both
                httpx.get(url + path, timeout=120)
            answer = {}
            for path in ("/", "/reference-all-rows"):
                times = []
                for _ in range(args.loads):
                    t = time.perf_counter()
                    httpx.get(url + path, timeout=120).raise_for_status()
                    times.append(time.perf_counter() - t)
                answer[path] = statistics.median(times) * 1000
            paged = paint_times(driver, url + "/", args.loads)
            full = paint_times(driver, url + "/reference-all-rows", args.loads)
    finally:
        driver.quit()
    print(f"{len(rows)} questions x {args.runs} runs; medians of {args.loads} loads (shared 2-core machine)")
    print(f"  paged list (50 rows):     server {answer['/']:7.1f} ms · first contentful paint {paged[0]:7.1f} ms "
          f"· DOMContentLoaded {paged[1]:7.1f} ms")
    print(f"  reference (all {len(rows)} rows): server {answer['/reference-all-rows']:7.1f} ms · first contentful "
          f"paint {full[0]:7.1f} ms · DOMContentLoaded {full[1]:7.1f} ms")
    print(f"  ratio paged / reference: first paint {paged[0] / full[0]:.2f}, DOMContentLoaded {paged[1] / full[1]:.2f}")


if __name__ == "__main__":
    main()
