"""The question list: one row per release question, filtered, searched, sorted and cut into pages on the server.

Why on the server: 1,400 questions x 10 runs is 14,000 cells of outcome and
score; a browser that renders them all at once is slow to first paint and to
scroll. The server keeps the rows as small tuples, answers one page at a time
(the first page is in the HTML itself, so the list shows before any script
runs), and the page's script asks for the next page, filter or sort as JSON.
Every view state is in the URL, so a filtered, sorted page is a deep link.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field

from aethersearch.report.viewer.runs import LoadedRun, Release
from aethersearch.scoring.metrics import em

__all__ = ["PAGE_SIZE", "Page", "QuestionQuery", "QuestionRow", "RunCell", "SORTABLE", "SortColumn", "build_rows",
    "check_query", "page_json", "query_questions"]

PAGE_SIZE = 50
#: the columns the list sorts by (a ``sort`` parameter naming another is an error page)
SortColumn = Literal["id", "source", "question", "outcome", "em", "f1", "c_of_k", "tool_calls", "tokens", "wall_s"]
SORTABLE: tuple[str, ...] = get_args(SortColumn)


class RunCell(NamedTuple):
    """One question in one run, as the list shows it (``None`` where the run has no such question)."""

    outcome: str
    em: float | None
    f1: float | None
    prediction: str | None
    tool_calls: int
    tokens: int
    wall_s: float
    correct_of: tuple[int, int] | None
    """c of K: samples scored EM 1, and samples, when the traces carry a ``sample`` field."""


class QuestionRow(NamedTuple):
    """A release question with its cell in every viewed run (same order as the runs)."""

    id: str
    source: str
    question: str
    cells: tuple[RunCell | None, ...]


class QuestionQuery(BaseModel):
    """One view of the list: which run's columns, filters, search, sort and page (all URL parameters)."""

    model_config = ConfigDict(extra="forbid")

    run: str = ""
    source: str = ""
    outcome: str = ""
    correct: Literal["", "right", "wrong"] = ""
    flip_a: str = ""
    flip_b: str = ""
    flip: Literal["", "gained", "lost", "either"] = ""
    q: str = ""
    sort: SortColumn = "id"
    desc: bool = False
    page: int = Field(default=0, ge=0)
    size: int = Field(default=PAGE_SIZE, ge=1, le=500)


class Page(NamedTuple):
    """One page of rows, the number of rows that matched, and the run index the columns show."""

    rows: list[QuestionRow]
    total: int
    page: int
    pages: int
    focus: int


def _cell(run: LoadedRun, qid: str, golds: Sequence[str]) -> RunCell | None:
    row = run.questions.get(qid)
    if row is None:
        return None
    usage = row.usage
    summary = run.traces.get(qid)
    correct_of = None
    if summary is not None and summary.samples:
        hits = sum(em(prediction, list(golds)) >= 1.0 for prediction in summary.samples.values()) if golds else 0
        correct_of = (hits, len(summary.samples))
    return RunCell(row.outcome, row.values.get("em"), row.values.get("f1"),
                   row.prediction, usage.tool_calls if usage else 0,
                   (usage.prompt_tokens + usage.completion_tokens) if usage else 0,
                   summary.elapsed_s if summary is not None else 0.0, correct_of)


def build_rows(runs: Sequence[LoadedRun], release: Release | None) -> list[QuestionRow]:
    """One row per question of the shown runs, in the order of the first run (then any others' extra ids)."""
    shown = [run for run in runs if run.problem is None]
    order: dict[str, str] = {}
    for run in shown:
        for qid, row in run.questions.items():
            order.setdefault(qid, row.source)
    rows = []
    golds = release.golds if release is not None else {}
    for qid, source in order.items():
        question = next((r.traces[qid].question_seen for r in shown if qid in r.traces), "")
        rows.append(QuestionRow(qid, source, question, tuple(_cell(r, qid, golds.get(qid, ())) for r in shown)))
    return rows


def _right(cell: RunCell | None) -> bool:
    return cell is not None and (cell.em or 0.0) >= 1.0


def _sort_key(field: str, focus: int) -> Any:
    if field in ("id", "source", "question"):
        return lambda row: getattr(row, field)

    def key(row: QuestionRow) -> tuple[int, Any]:
        cell = row.cells[focus] if row.cells else None
        if cell is None:
            return (1, 0)
        if field == "c_of_k":
            return (0, cell.correct_of[0] / cell.correct_of[1] if cell.correct_of else -1.0)
        value = getattr(cell, field) if field != "outcome" else cell.outcome
        return (0, value if value is not None else -1.0)
    return key


def query_questions(rows: Sequence[QuestionRow], keys: Sequence[str], query: QuestionQuery) -> Page:
    """Apply ``query`` to ``rows`` (``keys`` = the shown runs' keys, in cell order) and cut out its page.

    The query was checked by :func:`check_query` (an unknown run key is an error page,
    never a silent fall-back to the first run); the flip filter compares EM between ``flip_a`` and ``flip_b``:
    ``gained`` = wrong in A, right in B; ``lost`` = the reverse.
    """
    index = {key: i for i, key in enumerate(keys)}
    focus = index.get(query.run, 0)
    needle = query.q.strip().casefold()
    a, b = index.get(query.flip_a), index.get(query.flip_b)
    kept = []
    for row in rows:
        cell = row.cells[focus] if row.cells else None
        if query.source and row.source != query.source:
            continue
        if query.outcome and (cell is None or cell.outcome != query.outcome):
            continue
        if query.correct and _right(cell) != (query.correct == "right"):
            continue
        if query.flip and a is not None and b is not None:
            was, now = _right(row.cells[a]), _right(row.cells[b])
            if not ((query.flip in ("gained", "either") and not was and now)
                    or (query.flip in ("lost", "either") and was and not now)):
                continue
        if needle and needle not in f"{row.id}\n{row.question}\n{cell.prediction if cell else ''}".casefold():
            continue
        kept.append(row)
    kept.sort(key=_sort_key(query.sort, focus), reverse=query.desc)
    pages = max(1, -(-len(kept) // query.size))
    page = min(query.page, pages - 1)
    return Page(kept[page * query.size:(page + 1) * query.size], len(kept), page, pages, focus)


def check_query(query: QuestionQuery, keys: Sequence[str], sources: Sequence[str], outcomes: Sequence[str]) -> None:
    """Refuse a list view naming a run, source or outcome this viewer does not have (a stale or mistyped link)."""
    from aethersearch.errors import AetherError

    allowed = {"run": keys, "flip_a": keys, "flip_b": keys, "source": sources, "outcome": outcomes}
    for name, values in allowed.items():
        value = getattr(query, name)
        if value and value not in values:
            raise AetherError(f"bad list parameter {name}={value!r}: not one of this viewer's "
                              f"{'runs' if name in ('run', 'flip_a', 'flip_b') else name + 's'}",
                              fix=f"use one of {', '.join(values) or 'none'}, or open / for the default view")


def page_json(page: Page, keys: Sequence[str]) -> dict[str, Any]:
    """The JSON the list's script renders: the page's rows with the focused run's cell and every run's EM mark."""
    rows = []
    for row in page.rows:
        cell = row.cells[page.focus] if row.cells else None
        rows.append({"id": row.id, "source": row.source, "question": row.question,
                     "cell": cell._asdict() if cell is not None else None,
                     "marks": [None if c is None else _right(c) for c in row.cells]})
    return {"total": page.total, "page": page.page, "pages": page.pages, "focus": keys[page.focus] if keys else "",
            "runs": list(keys), "rows": rows}
