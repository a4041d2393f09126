"""The replay's own minimal readers of the original source and training files.

Why separate from ``aethersearch/sources``: the independent validation must not
reuse the builder's adapters, or a bug there (an off-by-one row number, a lost
alias, a skipped row) would be reproduced by the check meant to catch it. These
readers share nothing with the builder except ``aethersearch.text.question_key``
(applied later, in ``replay``); they only extract what the release claims
about each row: one-based row number, source id, the question as published and
its answer aliases.

Row numbering follows the convention the manifest records: the one-based index
of the data record in file order; header and blank lines are not counted; JSON
list / TriviaQA ``Data[]`` element index + 1; parquet row index + 1. Rows a
format drops on purpose (unanswerable MuSiQue rows, parquet rows of another
``data_source``) keep their number but yield no question.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.errors import DataError

__all__ = ["READERS", "RawRow", "read_2wiki_json", "read_bamboogle_csv", "read_dpr_tsv", "read_flashrag",
    "read_hotpotqa_json", "read_musique", "read_nq_open", "read_original", "read_popqa_tsv", "read_qa_list",
    "read_question_answer_jsonl", "read_searchr1_parquet", "read_triviaqa_json"]


class RawRow(NamedTuple):
    """One question exactly as the original file has it."""

    row_number: int
    source_id: str | None
    question: str
    answers: list[str]


def _dedupe(items: list[Any]) -> list[str]:
    return list(dict.fromkeys(str(item) for item in items))


def _text(path: Path) -> str:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise DataError(path, f"cannot read original file: {exc.strerror}",
                        fix="the replay needs every source and training file the manifest lists") from None
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not valid UTF-8: {exc.reason}", fix="restore the original file") from None
    return text[1:] if text.startswith("\ufeff") else text


def _lines(text: str) -> list[str]:
    """Physical lines split on "\n" only: U+0085/U+2028 occur inside real questions."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _json(path: Path) -> Any:
    try:
        return json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(path, f"invalid JSON: {exc.msg}", line=exc.lineno,
                        fix="restore the original file") from None


def _jsonl(path: Path) -> list[Any]:
    records = []
    for line_number, line in enumerate(_lines(_text(path)), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DataError(path, f"invalid JSON: {exc.msg}", line=line_number,
                            fix="restore the original file") from None
    return records


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _id(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    return str(value) if isinstance(value, str | int) else None


def read_nq_open(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """NQ-Open jsonl: ``question``, ``answer`` (list); no ids."""
    return [RawRow(i, None, r["question"], _as_list(r["answer"])) for i, r in enumerate(_jsonl(path), 1)]


def read_dpr_tsv(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """DPR topics: ``question<TAB>python list``, csv-quoted; blank rows not counted."""
    rows, number = [], 0
    for cells in csv.reader(io.StringIO(_text(path)), delimiter="\t"):
        if not cells or not any(c.strip() for c in cells):
            continue
        number += 1
        rows.append(RawRow(number, None, cells[0], _as_list(ast.literal_eval(cells[1]))))
    return rows


def read_triviaqa_json(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """Official TriviaQA: ``Data[].Question/QuestionId/Answer.Aliases+Value``."""
    rows = []
    for i, r in enumerate(_json(path)["Data"], 1):
        answer = r.get("Answer") or {}
        rows.append(RawRow(i, r["QuestionId"], r["Question"],
                           _dedupe([*_as_list(answer.get("Aliases")), answer.get("Value")])))
    return rows


def read_popqa_tsv(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """PopQA test.tsv with header; ``possible_answers`` is a JSON list string."""
    lines = _lines(_text(path))
    header = lines[0].split("\t")
    rows, number = [], 0
    for line in lines[1:]:
        if not line.strip():
            continue
        number += 1
        record = dict(zip(header, line.split("\t"), strict=False))
        rows.append(RawRow(number, record["id"], record["question"],
                           _as_list(json.loads(record["possible_answers"]))))
    return rows


def read_hotpotqa_json(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """HotpotQA JSON list: ``_id``, ``question``, ``answer``."""
    return [RawRow(i, r["_id"], r["question"], [r["answer"]]) for i, r in enumerate(_json(path), 1)]


def read_2wiki_json(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """2Wiki JSON list; aliases of ``answer_id`` from ``id_aliases.json`` when given."""
    aliases: dict[str, list[str]] = {}
    if options.get("aliases"):
        for record in _jsonl(Path(options["aliases"])):
            aliases[record["Q_id"]] = list(record.get("aliases", []))
    rows = []
    for i, r in enumerate(_json(path), 1):
        extra = aliases.get(r.get("answer_id"), []) if isinstance(r.get("answer_id"), str) else []
        rows.append(RawRow(i, r["_id"], r["question"], _dedupe([r["answer"], *extra])))
    return rows


def read_musique(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """MuSiQue jsonl or JSON list; unanswerable rows keep their number but are dropped."""
    text = _text(path)
    records = json.loads(text) if text.lstrip().startswith("[") else _jsonl(path)
    return [RawRow(i, r["id"], r["question"], _dedupe([r["answer"], *r.get("answer_aliases", [])]))
            for i, r in enumerate(records, 1) if r.get("answerable", True) is not False]


def read_bamboogle_csv(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """Bamboogle sheet export: header ``Question,Answer``; no ids."""
    reader = csv.reader(io.StringIO(_text(path)))
    next(reader)
    rows, number = [], 0
    for cells in reader:
        if not cells or not any(c.strip() for c in cells):
            continue
        number += 1
        rows.append(RawRow(number, None, cells[0], [cells[1]]))
    return rows


def read_question_answer_jsonl(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """``{idx, question, answer}`` lines (Bamboogle / R1-Searcher); no ids."""
    return [RawRow(i, None, r["question"], _as_list(r["answer"])) for i, r in enumerate(_jsonl(path), 1)]


def read_flashrag(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """FlashRAG jsonl: ``id``, ``question``, ``golden_answers``."""
    return [RawRow(i, _id(r.get("id")), r["question"], _as_list(r["golden_answers"]))
            for i, r in enumerate(_jsonl(path), 1)]


def read_qa_list(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """JSON list of ``{question, answer|answers, [_id|id]}``."""
    rows = []
    for i, r in enumerate(_json(path), 1):
        answers = r["answer"] if "answer" in r else r["answers"]
        rows.append(RawRow(i, _id(r.get("_id", r.get("id"))), r["question"], _as_list(answers)))
    return rows


def _parquet_gold(record: dict[str, Any]) -> list[str]:
    if record.get("golden_answers") is not None:
        return _as_list(record["golden_answers"])
    reward = record.get("reward_model")
    if isinstance(reward, str):
        try:
            reward = json.loads(reward)
        except json.JSONDecodeError:
            reward = None
    if isinstance(reward, dict) and isinstance(reward.get("ground_truth"), dict):
        target = reward["ground_truth"].get("target")
        if target is not None:
            return _as_list(target)
    return _as_list(record.get("answer"))


def read_searchr1_parquet(path: Path, options: dict[str, Any]) -> list[RawRow]:
    """Search-R1 processed parquet; ``data_source`` option keeps one dataset's rows."""
    import pyarrow.parquet as pq

    wanted = options.get("data_source")
    table = pq.read_table(path)
    rows = []
    for i, record in enumerate(table.to_pylist(), 1):
        if wanted is not None and record.get("data_source") != wanted:
            continue
        sid = record.get("id") if isinstance(record.get("id"), str) else None
        rows.append(RawRow(i, sid, record["question"], _parquet_gold(record)))
    return rows


READERS: dict[str, Callable[[Path, dict[str, Any]], list[RawRow]]] = {
    "nq_open_jsonl": read_nq_open,
    "triviaqa_json": read_triviaqa_json,
    "triviaqa_dpr_tsv": read_dpr_tsv,
    "dpr_tsv": read_dpr_tsv,
    "popqa_tsv": read_popqa_tsv,
    "hotpotqa_json": read_hotpotqa_json,
    "2wiki_json": read_2wiki_json,
    "musique_jsonl": read_musique,
    "bamboogle_csv": read_bamboogle_csv,
    "bamboogle_jsonl": read_question_answer_jsonl,
    "r1searcher_jsonl": read_question_answer_jsonl,
    "flashrag_jsonl": read_flashrag,
    "searchr1_parquet": read_searchr1_parquet,
    "qa_list_json": read_qa_list,
}


def read_original(fmt: str, path: Path, options: dict[str, Any] | None = None) -> list[RawRow]:
    """Read one original file with the replay's own reader for ``fmt``."""
    reader = READERS.get(fmt)
    if reader is None:
        raise DataError(path, f"the replay has no reader for format {fmt!r}",
                        fix=f"add one to aethersearch.release.replay_readers (known: {sorted(READERS)})")
    try:
        return reader(path, dict(options or {}))
    except (KeyError, IndexError, TypeError, ValueError, SyntaxError) as exc:
        raise DataError(path, f"format {fmt!r}: the replay could not read a record ({type(exc).__name__}: {exc})",
                        fix="the file no longer has its original layout; restore it") from None
