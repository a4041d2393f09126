"""What every source adapter yields, and the strict field readers they share.

Why one shared shape: exclusion, de-duplication, selection and the release
writer must not care which upstream layout a question came from. Each adapter
turns its official file into ``Candidate`` rows and nothing else; anything that
is not the question, its answer aliases or its provenance (supporting facts,
decompositions, question type, level, upstream metadata) goes into
``diagnostics`` and later into ``diagnostics.jsonl``, never into the eval rows.

Row-number convention (recorded in every manifest, relied on by replay):
``source_row_number`` is the one-based index of the data record in file order.
Header lines (CSV/TSV) and blank lines (JSONL/TSV) are not counted; for a JSON
list or the TriviaQA ``Data`` array it is the element index plus one; for
parquet the table row index plus one. Errors name the physical line where the
format has lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from aethersearch.errors import DataError
from aethersearch.text import question_key

__all__ = ["Candidate", "ROW_NUMBER_CONVENTION", "SourceContext", "SourceRows", "load_json", "make_candidate",
    "optional_id", "read_text_lines", "require_answers", "require_list", "require_mapping", "require_str",
    "unique_in_order"]

ROW_NUMBER_CONVENTION = (
    "1-based index of the data record in file order; header lines and blank lines are not "
    "counted; JSON list / TriviaQA Data[] element index + 1; parquet row index + 1"
)


class Candidate(NamedTuple):
    """One question read from an official file, before exclusion and selection.

    ``question`` is exactly as published; ``key`` is its ``text.question_key``;
    ``diagnostics`` uses ``records.DiagnosticsRow`` field names (``question_type``,
    ``level``, ``supporting_pages``, ``supporting_facts``, ``decomposition``,
    ``extra``) so it becomes that row unchanged.
    """

    source_dataset: str
    source_split: str
    source_id: str | None
    source_row_number: int
    source_file: str
    question: str
    answers: list[str]
    key: str
    diagnostics: dict[str, Any]


class SourceRows(NamedTuple):
    """An adapter's result: the candidates, rows read, and rows skipped on purpose (reason -> count)."""

    candidates: list[Candidate]
    rows_read: int
    skipped: dict[str, int]


class SourceContext(NamedTuple):
    """Where the rows come from: the label written into every row's provenance."""

    path: Path
    dataset: str
    split: str
    source_file: str


def make_candidate(ctx: SourceContext, row_number: int, source_id: str | None, question: str,
                   answers: Sequence[str], diagnostics: dict[str, Any] | None = None) -> Candidate:
    """Build a Candidate, computing its normalised key once."""
    return Candidate(ctx.dataset, ctx.split, source_id, row_number, ctx.source_file, question,
                     list(answers), question_key(question), diagnostics or {})


def load_json(path: Path) -> Any:
    """Parse a whole JSON file; malformed JSON is a DataError naming the file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(path, f"cannot read: {exc.strerror}", fix="check the source path in the config") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix="the file must be one complete JSON document") from None


def read_text_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file (without ``\\n``/``\\r\\n``); undecodable bytes are a DataError."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(path, f"cannot read: {exc.strerror}", fix="check the source path in the config") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(path, f"not valid UTF-8: {exc.reason}", line=line, fix="re-download the file") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    # Split on "\n" only: str.splitlines() would also break on U+0085/U+2028, which
    # occur inside real questions (TriviaQA has a NEL in one title).
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def require_mapping(path: Path, row: int, value: Any, *, what: str = "row") -> dict[str, Any]:
    """A record that must be a JSON object."""
    if not isinstance(value, dict):
        raise DataError(path, f"{what} must be a JSON object, got {type(value).__name__}", line=row,
                        fix="check that the file has the official layout of its format")
    return value


def require_str(path: Path, row: int, record: dict[str, Any], field: str, *, allow_empty: bool = False) -> str:
    """A required string field, returned exactly as published."""
    if field not in record:
        raise DataError(path, f"missing field; found fields {sorted(record)}", line=row, field=field,
                        fix="check that the file has the official layout of its format")
    value = record[field]
    if not isinstance(value, str):
        raise DataError(path, f"expected a string, got {type(value).__name__}", line=row, field=field,
                        fix="check that the file has the official layout of its format")
    if not allow_empty and not value.strip():
        raise DataError(path, "empty string", line=row, field=field, fix="remove or repair the row")
    return value


def optional_id(path: Path, row: int, record: dict[str, Any], field: str) -> str | None:
    """An id field that may be a string or an integer (kept as its decimal string)."""
    value = record.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise DataError(path, f"expected a string or integer id, got {type(value).__name__}", line=row,
                        field=field, fix="check that the file has the official layout of its format")
    return str(value)


def require_answers(path: Path, row: int, value: Any, field: str) -> list[str]:
    """Answer aliases: a non-empty list of non-empty strings (a bare string is one alias)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise DataError(path, f"expected a non-empty list of answer strings, got {value!r:.80}", line=row,
                        field=field, fix="every question needs at least one answer alias")
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise DataError(path, f"answer alias {item!r:.80} is not a non-empty string", line=row,
                            field=field, fix="repair the answer list")
    return list(value)


def unique_in_order(items: Iterable[str]) -> list[str]:
    """Drop exact repeats, keeping the first occurrence (published order preserved)."""
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def require_list(path: Path, value: Any, *, what: str) -> list[Any]:
    """The top level of a JSON-list file."""
    if not isinstance(value, list):
        raise DataError(path, f"expected a JSON list of {what}, got {type(value).__name__}",
                        fix="check that the file has the official layout of its format")
    return value
