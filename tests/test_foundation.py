"""Foundation: question keys, answer normalisation, strict JSONL, atomic writes, CLI errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aethersearch.errors import DataError
from aethersearch.jsonl import (
    DurableAppender,
    atomic_write_bytes,
    read_jsonl,
    read_jsonl_tolerant,
    read_records,
)
from aethersearch.records import RolloutQuestion
from aethersearch.text import normalize_answer, question_key, template_key


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Who wrote Hamlet?", "who wrote hamlet"),
        ("  Who   wrote\tHamlet ??", "who wrote hamlet "),
        ("ＷＨＯ wrote Ｈａｍｌｅｔ？", "who wrote hamlet"),
        ("Straße?？?", "strasse"),
        ("what is 2+2", "what is 2+2"),
        ("¿Qué?", "¿qué"),
    ],
)
def test_question_key_table(raw: str, key: str) -> None:
    assert question_key(raw) == key


@given(st.text())
def test_question_key_shape(text: str) -> None:
    key = question_key(text)
    assert not key.endswith(("?", "\uff1f"))
    assert "  " not in key and "\t" not in key and "\n" not in key
    assert key == key.lstrip()
    assert key == key.casefold() or key.casefold() != key.casefold().casefold()


@given(
    st.text(alphabet=st.characters(categories=("L", "N", "P", "Zs")), max_size=40),
    st.sampled_from("abcXYZ"),
    st.text(alphabet="?\uff1f", min_size=1, max_size=4),
)
def test_trailing_question_marks_never_change_the_key(body: str, last: str, marks: str) -> None:
    text = body + last
    assert question_key(text + marks) == question_key(text)


def test_template_key_merges_punctuation_variants() -> None:
    assert template_key("Who wrote 'Hamlet'?") == template_key("who wrote hamlet")
    assert template_key("Who wrote Hamlet?") != template_key("Who wrote Macbeth?")


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("The Beatles!", "beatles"), ("  A  cat, an apple ", "cat apple"), ("U.S.A.", "usa")],
)
def test_normalize_answer_table(raw: str, norm: str) -> None:
    assert normalize_answer(raw) == norm


def test_read_records_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "a", "question": "x"}\n{"id": "b"}\n')
    with pytest.raises(DataError) as info:
        read_records(path, RolloutQuestion)
    assert f"{path}:2" in str(info.value) and "question" in str(info.value)


def test_invalid_json_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match=r"bad.jsonl:2"):
        read_jsonl(path)


def test_tolerant_read_sets_aside_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with DurableAppender(path) as log:
        log.append({"id": "a"})
        log.append({"id": "b"})
    with path.open("ab") as handle:
        handle.write(b'{"id": "c", "pre')
    read = read_jsonl_tolerant(path)
    assert [row["id"] for row in read.rows] == ["a", "b"]
    assert read.torn_tail is not None and read.valid_bytes == len(b'{"id":"a"}\n{"id":"b"}\n')


def test_corruption_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"id":"a"}\n{broken\n{"id":"c"}\n')
    with pytest.raises(DataError, match=":2"):
        read_jsonl_tolerant(path)


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "out" / "f.json"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]


def test_atomic_write_gives_a_normal_file_mode(tmp_path: Path) -> None:
    import os

    umask = os.umask(0)
    os.umask(umask)
    target = tmp_path / "report.html"
    atomic_write_bytes(target, b"<html></html>")
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_cli_prints_clean_error_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aethersearch.cli", "version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.strip()
