"""`aether view` in a real headless Chromium (Debian's chromium + chromedriver, driven by Selenium).

The list loads, the flip filter runs through the page's own script, a trace opens
with its retrieved documents and its chain, screenshots are not blank, and bad
runs give a clear page in the browser too. Skipped, with the reason, where
chromium or chromedriver is absent (`.ci/run` installs both).
"""

from __future__ import annotations

import io
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aethersearch.report.viewer.app import create_app, load_viewer
from tests.report.viewer_fixtures import ViewerRuns, make_viewer_runs, snapshot, write_bad_runs
from tests.serving import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="Debian `chromium` and `chromium-driver` not installed "
                                       "(apt-get install -y chromium chromium-driver)")


class Served:
    """A viewer app served by uvicorn on a free loopback port in a background thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> ViewerRuns:
    return make_viewer_runs(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--disable-background-networking", "--no-first-run"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _wait(driver: Any, condition: Any, timeout: float = 20) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def assert_not_blank(png: bytes, name: str) -> None:
    """A screenshot with real content: many distinct colours and dark (text) pixels, saved as a test artefact."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    dark = sum(count for count, (r, g, b) in colours if r + g + b < 200)
    assert len(colours) > 50 and dark > 0.002 * image.width * image.height, f"{name} screenshot looks blank"
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"viewer_{name}.png").write_bytes(png)


def test_list_flips_trace_and_chain_render_in_chromium(browser: Any, runs: ViewerRuns) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    viewer = load_viewer([runs.sft, runs.rl], corpus=runs.corpus)
    with Served(create_app(viewer)) as url:
        browser.get(url + "/")
        rows = browser.find_elements(By.CSS_SELECTOR, "#rows tr[data-id]")
        assert len(rows) == 50 and browser.find_element(By.ID, "total").text == str(len(runs.rows))
        assert_not_blank(browser.get_screenshot_as_png(), "list")

        stamp = browser.find_element(By.TAG_NAME, "body").get_attribute("data-updated")
        Select(browser.find_element(By.NAME, "flip_a")).select_by_value("sft")
        Select(browser.find_element(By.NAME, "flip_b")).select_by_value("rl")
        Select(browser.find_element(By.NAME, "flip")).select_by_value("either")
        _wait(browser, lambda d: d.find_element(By.ID, "total").text == str(len(runs.gained | runs.lost))
              and d.find_element(By.TAG_NAME, "body").get_attribute("data-updated") != stamp)
        shown = {row.get_attribute("data-id") for row in browser.find_elements(By.CSS_SELECTOR, "#rows tr[data-id]")}
        assert shown == set(sorted(runs.gained | runs.lost)[:50])
        assert "flip=either" in browser.current_url  # the filtered view is a deep link
        browser.get(browser.current_url)  # ... that reloads to the same rows
        assert {r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#rows tr[data-id]")} == shown

        first = sorted(shown)[0]
        browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{first}"] td.id a').click()
        _wait(browser, lambda d: d.find_elements(By.ID, "answer"))
        assert f"/q/{first}" in browser.current_url
        docs = browser.find_elements(By.CSS_SELECTOR, "table.docs tr.doc")
        assert docs and docs[0].find_element(By.CSS_SELECTOR, "td.docid").text == f"doc_{first}"
        assert browser.find_elements(By.CSS_SELECTOR, "mark.gold")

        chained = runs.rows[0].id
        browser.get(f"{url}/q/{chained}?run=rl")
        nodes = browser.find_elements(By.CSS_SELECTOR, "#chain li.node")
        assert [n.get_attribute("data-state") for n in nodes] == ["visited", "unlocked", "masked"]
        assert all(n.is_displayed() and n.size["width"] > 40 for n in nodes)
        assert_not_blank(browser.get_screenshot_as_png(), "trace")

        browser.get(f"{url}/compare/{chained}?a=sft&b=rl")
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.aligned-turn")) == 3
        errors = [entry for entry in browser.get_log("browser") if entry.get("level") == "SEVERE"]
        assert not errors, errors


def test_bad_runs_show_clear_pages_in_chromium(browser: Any, runs: ViewerRuns, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    bad = write_bad_runs(tmp_path, runs)
    before = {name: snapshot(path) for name, path in bad.items() if path.exists()}
    viewer = load_viewer([runs.rl, *bad.values()], release=runs.release)
    with Served(create_app(viewer)) as url:
        browser.get(url + "/")
        banners = browser.find_elements(By.CSS_SELECTOR, ".problem-banner[data-run]")
        assert {b.get_attribute("data-run") for b in banners} == set(bad)
        for name in bad:
            browser.get(f"{url}/run/{name}")
            problem = browser.find_element(By.ID, "problem")
            assert problem.is_displayed() and "How to fix" in problem.text
            assert "Traceback" not in browser.page_source
        browser.get(f"{url}/q/eval_0001?run=malformed")
        assert "traces.jsonl:5" in browser.find_element(By.ID, "problem").text
        assert_not_blank(browser.get_screenshot_as_png(), "problem")
    assert {name: snapshot(path) for name, path in bad.items() if path.exists()} == before


def test_static_report_links_into_a_running_viewer(browser: Any, runs: ViewerRuns, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from aethersearch.report.html import write_report

    viewer = load_viewer([runs.sft, runs.rl], corpus=runs.corpus)
    with Served(create_app(viewer)) as url:
        report = write_report([runs.sft, runs.rl], tmp_path / "report.html", release_dir=runs.release, viewer_url=url)
        browser.get(report.resolve().as_uri())
        link = _wait(browser, lambda d: next((a for a in d.find_elements(By.CSS_SELECTOR, "a.viewer-link")
                                              if a.is_displayed()), None))
        assert link.get_attribute("href").startswith(url + "/compare/")
        browser.get(link.get_attribute("href"))
        assert browser.find_elements(By.ID, "side-by-side")
    browser.get(report.resolve().as_uri())  # no viewer running: the links stay hidden
    time.sleep(1.0)
    assert not [a for a in browser.find_elements(By.CSS_SELECTOR, "a.viewer-link") if a.is_displayed()]


def test_back_undoes_a_filter_and_bad_deep_links_show_the_error_page(browser: Any, runs: ViewerRuns) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    viewer = load_viewer([runs.sft, runs.rl], corpus=runs.corpus)
    with Served(create_app(viewer)) as url:
        browser.get(url + "/")
        total = browser.find_element(By.ID, "total").text

        def changed(stamp: str | None) -> Any:
            return lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-updated") != stamp

        stamp = browser.find_element(By.TAG_NAME, "body").get_attribute("data-updated")
        Select(browser.find_element(By.NAME, "source")).select_by_visible_text("hotpotqa")
        _wait(browser, changed(stamp))
        filtered = browser.find_element(By.ID, "total").text
        assert "source=hotpotqa" in browser.current_url and filtered != total
        stamp = browser.find_element(By.TAG_NAME, "body").get_attribute("data-updated")
        Select(browser.find_element(By.NAME, "correct")).select_by_value("right")
        _wait(browser, changed(stamp))
        assert "correct=right" in browser.current_url

        stamp = browser.find_element(By.TAG_NAME, "body").get_attribute("data-updated")
        browser.back()  # undoes the EM filter, stays in the viewer
        _wait(browser, changed(stamp))
        assert browser.current_url.startswith(url) and "correct=right" not in browser.current_url
        assert browser.find_element(By.ID, "total").text == filtered
        assert Select(browser.find_element(By.NAME, "correct")).first_selected_option.get_attribute("value") == ""
        stamp = browser.find_element(By.TAG_NAME, "body").get_attribute("data-updated")
        browser.back()  # ... then the source filter
        _wait(browser, changed(stamp))
        assert browser.find_element(By.ID, "total").text == total
        assert Select(browser.find_element(By.NAME, "source")).first_selected_option.get_attribute("value") == ""

        for link, named in (("/?run=nope", "run='nope'"), ("/?sort=bogus", "sort='bogus'")):
            browser.get(url + link)
            problem = browser.find_element(By.ID, "problem")
            assert named in problem.text and "How to fix" in problem.text
        errors = [entry for entry in browser.get_log("browser") if entry.get("level") == "SEVERE"
                  and url in entry.get("message", "") and "status of 400" not in entry.get("message", "")]
        assert not errors, errors


def test_a_sample_page_shows_its_own_scores_in_chromium(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from tests.report.viewer_fixtures import make_sampled_demo_run, mixed_question

    run, release = make_sampled_demo_run(tmp_path)
    qid, _, wrong = mixed_question(run)
    with Served(create_app(load_viewer([run], release=release))) as url:
        browser.get(f"{url}/q/{qid}?sample={wrong}")
        own = browser.find_element(By.CSS_SELECTOR, "table.sample-values td")
        mean = browser.find_element(By.CSS_SELECTOR, "table.question-mean-values td")
        assert own.text == "0.000" and own.is_displayed() and 0 < float(mean.text) < 1 and mean.is_displayed()
        assert_not_blank(browser.get_screenshot_as_png(), "sample_page")
