"""``aether view``: a read-only local web app over run directories (FastAPI + Jinja2, plain JS, nothing fetched).

Pages, each a deep link: ``/`` the question list (every filter, sort and page
in the query string), ``/q/{id}?run=KEY`` one trace, ``/compare/{id}?a=KEY&b=KEY``
the same question in two runs turn by turn, ``/run/{KEY}`` a run's settings or
why it cannot be shown. ``/api/questions`` answers the list's script with one
page of JSON; ``/api/health`` lets a static report find a running viewer.

Why only GET routes and no rescoring: a viewer must never change what it
shows; every run is read with the same checks ``aether report`` uses, and any
failure becomes a page that says what is wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from pydantic import ValidationError

from aethersearch import __version__
from aethersearch.errors import AetherError
from aethersearch.report.layout import display_labels
from aethersearch.report.metric_names import ANSWER_METRICS
from aethersearch.report.viewer import VIEWER_HOST, VIEWER_PORT
from aethersearch.report.viewer.questions import QuestionQuery, build_rows, check_query, page_json, query_questions
from aethersearch.report.viewer.runs import LoadedRun, Release, against_release, find_release, load_run, run_keys
from aethersearch.report.viewer.trace_view import Corpus, trace_view
from aethersearch.scoring.aggregate import OUTCOME_LABELS

__all__ = ["HERE", "SORTABLE_COLUMNS", "Viewer", "create_app", "load_viewer", "open_corpus", "query_string", "serve",
    "templates"]

HERE = Path(__file__).resolve().parent
SORTABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"), ("source", "source"), ("question", "question"), ("outcome", "outcome"), *ANSWER_METRICS,
    ("c_of_k", "c of K"), ("tool_calls", "tool calls"), ("tokens", "tokens"), ("wall_s", "wall s"))


class Viewer(NamedTuple):
    """What the app serves: the loaded runs (problems included), the release and the optional corpus."""

    runs: list[LoadedRun]
    release: Release | None
    corpus: Corpus | None
    release_problem: str | None


def open_corpus(path: Path | None) -> Corpus | None:
    """The document store at ``path`` (``--corpus``), to show the text of returned documents."""
    if path is None:
        return None
    from aethersearch.corpus.store import JsonlStore

    store = JsonlStore(path)
    return Corpus(store, store.content_hash)


def load_viewer(run_dirs: Sequence[Path], *, release: Path | None = None, corpus: Path | None = None,
                labels: Sequence[str] = ()) -> Viewer:
    """Load every run (a bad one becomes its problem page) and the release whose gold the pages show."""
    from aethersearch.scoring.api import read_fingerprint

    run_dirs = [Path(d) for d in run_dirs]
    keys = run_keys(run_dirs)
    fingerprints = []
    for run_dir in run_dirs:
        try:
            fingerprints.append(read_fingerprint(run_dir) if run_dir.is_dir() else None)
        except AetherError:
            fingerprints.append(None)
    names = display_labels(keys, fingerprints, labels)
    loaded = [load_run(key, run_dir, label) for key, run_dir, label in zip(keys, run_dirs, names, strict=True)]
    release_problem = None
    try:
        found = find_release(release, loaded)
    except AetherError as exc:
        found, release_problem = None, str(exc)
    runs = [against_release(run, found) for run in loaded]
    return Viewer(runs, found, open_corpus(corpus), release_problem)


def templates() -> Environment:
    """The viewer's Jinja2 environment (autoescaped, strict), with the helpers its templates call."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html", "j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(version=__version__, answer_metrics=ANSWER_METRICS, query_string=query_string)
    return env


def query_string(query: dict[str, Any], **changes: Any) -> str:
    """The URL query of a list view with ``changes`` applied (defaults left out, so links stay short)."""
    from urllib.parse import urlencode

    defaults = QuestionQuery().model_dump()
    merged = {**query, **changes}
    return urlencode({k: ("true" if v is True else "false" if v is False else v) for k, v in merged.items()
                      if v != defaults.get(k)})


def create_app(viewer: Viewer) -> FastAPI:
    """The FastAPI app over ``viewer`` (GET routes only)."""
    app = FastAPI(title="aether view", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    env = templates()
    shown = [run for run in viewer.runs if run.problem is None]
    keys = [run.key for run in shown]
    by_key = {run.key: run for run in viewer.runs}
    rows = build_rows(viewer.runs, viewer.release)
    sources = sorted({row.source for row in rows})
    outcomes = list(OUTCOME_LABELS)

    def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(template).render(runs=viewer.runs, shown=shown, release=viewer.release,
                                                 release_problem=viewer.release_problem, **context)
        return HTMLResponse(html, status_code=status)

    def problem(title: str, message: str, fix: str | None, status: int) -> HTMLResponse:
        return page("problem.html.j2", status, title=title, message=message, fix=fix)

    def query_of(request: Request) -> QuestionQuery:
        try:
            query = QuestionQuery.model_validate(dict(request.query_params))
        except ValidationError as exc:
            first = exc.errors()[0]
            name = ".".join(map(str, first["loc"]))
            if first["type"] == "extra_forbidden":
                raise AetherError(f"unknown list parameter {name!r}",
                                  fix=f"the list takes {', '.join(QuestionQuery.model_fields)}; open / to reset "
                                      "the list") from None
            raise AetherError(f"bad list parameter {name}={first.get('input')!r}: {first['msg']}",
                              fix="open / to reset the list") from None
        check_query(query, keys, sources, outcomes)
        return query

    def only(request: Request, *names: str) -> None:
        unknown = sorted(set(request.query_params) - set(names))
        if unknown:
            raise AetherError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for {request.url.path}",
                              fix=f"this page takes {', '.join(names) or 'no parameters'}")

    @app.exception_handler(AetherError)
    async def _aether_error(request: Request, exc: AetherError) -> HTMLResponse:
        return problem("Cannot show this page", exc.message, exc.fix, 400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> HTMLResponse:
        return problem("Unexpected error", f"{type(exc).__name__}: {exc}",
                       "please report this with the URL; the run directories were not changed", 500)

    @app.get("/api/health")
    def health() -> dict[str, Any]:
        return {"ok": True, "version": __version__, "runs": [run.key for run in viewer.runs]}

    def list_context(request: Request) -> dict[str, Any]:
        query = query_of(request)
        first = page_json(query_questions(rows, keys, query), keys)
        if first["page"] != query.page:
            raise AetherError(f"bad list parameter page={query.page}: this view has {first['pages']} page(s), "
                              "numbered from 0", fix="open the list's first page (leave out page=)")
        first["compare"] = (query.flip_a, query.flip_b) if query.flip_a in keys and query.flip_b in keys else (
            tuple(keys[:2]) if len(keys) >= 2 else None)
        return {"query": query.model_dump(), "first": first, "sortable": SORTABLE_COLUMNS}

    @app.get("/api/questions")
    def questions_json(request: Request) -> JSONResponse:
        context = list_context(request)
        parts = {name: env.get_template(f"_{name}.html.j2").render(**context) for name in ("rows", "pager", "head")}
        first = context["first"]
        return JSONResponse({"total": first["total"], "page": first["page"], "pages": first["pages"],
                             "focus": first["focus"], "query": context["query"],
                             "ids": [row["id"] for row in first["rows"]],
                             **{f"{name}_html": html for name, html in parts.items()}})

    @app.get("/", response_class=HTMLResponse)
    def question_list(request: Request) -> HTMLResponse:
        return page("list.html.j2", sources=sources, outcomes=outcomes, **list_context(request))

    @app.get("/run/{key:path}", response_class=HTMLResponse)
    def run_page(key: str) -> HTMLResponse:
        run = by_key.get(key)
        if run is None:
            return problem("Unknown run", f"no run {key!r} in this viewer", "open / for the runs it serves", 404)
        return page("run.html.j2", run=run)

    def one(qid: str, key: str, sample: int | None) -> tuple[LoadedRun, dict[str, Any] | None]:
        run = by_key.get(key) if key else (shown[0] if shown else None)
        if run is None:
            raise AetherError(f"no run {key!r} in this viewer", fix="open / for the runs it serves")
        if run.problem is not None:
            raise AetherError(f"run {run.key} cannot be shown: {run.problem.message}", fix=run.problem.fix)
        golds = viewer.release.golds.get(qid, []) if viewer.release else []
        diagnostics = viewer.release.diagnostics.get(qid) if viewer.release else None
        view = trace_view(run, qid, golds, diagnostics, viewer.corpus, sample)
        if view is not None and sample is not None and sample not in view["samples"]:
            raise AetherError(f"bad parameter sample={sample}: run {run.key} has "
                              + (f"samples {', '.join(map(str, view['samples']))} of {qid!r}" if view["samples"]
                                 else f"one rollout of {qid!r}, no samples"),
                              fix=f"open /q/{qid}?run={run.key} for the first sample")
        return run, view

    @app.get("/q/{qid:path}", response_class=HTMLResponse)
    def trace_page(request: Request, qid: str, run: str = "", sample: str = "") -> HTMLResponse:
        only(request, "run", "sample")
        loaded, view = one(qid, run, _sample_number(sample))
        if view is None:
            return problem("No trace", f"run {loaded.key} has no trace of question {qid!r}",
                           "open / and pick a question the run answered", 404)
        others = [r.key for r in shown if r.key != loaded.key]
        return page("trace.html.j2", run=loaded, t=view, others=others,
                    corpus_mismatch=_corpus_mismatch(viewer.corpus, loaded))

    @app.get("/compare/{qid:path}", response_class=HTMLResponse)
    def compare_page(request: Request, qid: str, a: str = "", b: str = "") -> HTMLResponse:
        only(request, "a", "b")
        if not a or not b:
            a, b = (keys + keys)[:2] if len(keys) >= 2 else (a, b)
        run_a, view_a = one(qid, a, None)
        run_b, view_b = one(qid, b, None)
        if view_a is None or view_b is None:
            missing = run_a.key if view_a is None else run_b.key
            return problem("No trace", f"run {missing} has no trace of question {qid!r}",
                           "pick two runs that both answered it", 404)
        depth = max(len(view_a["turns"]), len(view_b["turns"]))
        return page("compare.html.j2", qid=qid, a=run_a, b=run_b, ta=view_a, tb=view_b, depth=depth)

    return app


def _sample_number(text: str) -> int | None:
    """``?sample=`` as a number (absent: the first sample); anything else is an error page naming it."""
    if text == "":
        return None
    if not text.isdigit():
        raise AetherError(f"bad parameter sample={text!r}: not a sample number",
                          fix="samples are numbered 0, 1, ... as the trace page's sample links show")
    return int(text)


def _corpus_mismatch(corpus: Corpus | None, run: LoadedRun) -> bool:
    recorded = run.fingerprint.corpus_hash if run.fingerprint else None
    return corpus is not None and recorded is not None and recorded != corpus.content_hash


def serve(viewer: Viewer, *, host: str = VIEWER_HOST, port: int = VIEWER_PORT) -> None:
    """Serve the viewer until interrupted (127.0.0.1 unless ``host`` says otherwise)."""
    import uvicorn

    uvicorn.run(create_app(viewer), host=host, port=port, log_level="warning")
