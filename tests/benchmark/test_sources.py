"""Source adapters: each official layout yields the exact question, aliases, provenance and diagnostics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aethersearch.errors import ConfigError, DataError
from aethersearch.sources import FORMATS, read_source
from tests.conftest import require_shared

FIXTURES = Path(__file__).parent / "fixtures"


def read(fmt: str, name: str | Path, **options):
    path = name if isinstance(name, Path) else FIXTURES / name
    return read_source(fmt, path, dataset="ds", split="dev", source_file=Path(path).name, options=options)


def test_nq_open_rows_have_null_ids_and_one_based_rows_skipping_blank_lines() -> None:
    rows = read("nq_open_jsonl", "NQ-open.dev.jsonl")
    assert [c.source_row_number for c in rows.candidates] == [1, 2, 3]
    first = rows.candidates[0]
    assert (first.source_id, first.question, first.answers) == (None, "who wrote the novel moby dick",
                                                                 ["Herman Melville"])
    assert first.source_file == "NQ-open.dev.jsonl" and first.source_dataset == "ds" and first.source_split == "dev"
    assert rows.candidates[2].question == "what is the capital of australia"


def test_triviaqa_official_layout_uses_aliases_plus_value_and_keeps_question_ids() -> None:
    rows = read("triviaqa_json", "unfiltered-web-dev.json").candidates
    assert rows[0].source_id == "tc_33"
    assert rows[0].answers == ["Sunset Blvd", "Sunset Boulevard"]  # Value already an alias: not repeated
    assert rows[1].answers == ["Scorpio", "Skorpio"]  # Value appended when it is not an alias
    assert rows[1].diagnostics["extra"]["normalized_aliases"] == ["scorpio"]
    assert rows[0].question == "Which Lloyd Webber musical premiered in the US on 10th December 1993?"


def test_triviaqa_dpr_tsv_parses_csv_quoting_crlf_and_keeps_unicode_line_separators() -> None:
    rows = read("triviaqa_dpr_tsv", "trivia-dpr.tsv").candidates
    assert len(rows) == 4
    assert rows[1].question == '"Who produces the perfumes ""Opium""?"'  # exactly as published after one CSV layer
    assert rows[1].answers == ["Yves Saint Laurent", "YSL"]
    assert rows[2].question == "Complete the title 'Vicky Christina \u0085."
    assert rows[3].answers == ["1930s", "'30s"]
    assert all(c.source_id is None for c in rows)


def test_popqa_tsv_reads_possible_answers_json_and_entity_metadata() -> None:
    rows = read("popqa_tsv", "popqa_test.tsv").candidates
    assert rows[0].source_id == "4222362" and rows[0].source_row_number == 1
    assert rows[0].answers == ["politician", "political leader"]
    assert rows[0].diagnostics["question_type"] == "occupation"
    assert rows[1].diagnostics["extra"]["o_wiki_title"] == "Norberto Barba"


def test_hotpotqa_supporting_facts_go_to_diagnostics() -> None:
    rows = read("hotpotqa_json", "hotpot_dev_distractor_v1.json").candidates
    second = rows[1]
    assert second.source_id == "5a8c7595554299585d9e36b6" and second.answers == ["Chief of Protocol"]
    assert second.diagnostics["supporting_pages"] == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    assert second.diagnostics["supporting_facts"][2] == ("Shirley Temple", 1)
    assert (second.diagnostics["question_type"], second.diagnostics["level"]) == ("bridge", "hard")


def test_2wiki_uses_the_entity_alias_file_only_when_given() -> None:
    plain = read("2wiki_json", "2wiki_dev.json").candidates
    assert plain[0].answers == ["Małgorzata Braunek"]
    aliased = read("2wiki_json", "2wiki_dev.json", aliases=FIXTURES / "id_aliases.json").candidates
    assert aliased[0].answers == ["Małgorzata Braunek", "Malgorzata Braunek"]
    assert aliased[1].answers == ["The Mask Of Fu Manchu"]  # its answer_id has no alias entry
    assert aliased[0].diagnostics["extra"]["evidences"][1] == ["Xawery Żuławski", "mother", "Małgorzata Braunek"]


def test_musique_keeps_answerable_rows_with_aliases_and_decomposition() -> None:
    rows = read("musique_jsonl", "musique_ans_v1.0_dev.jsonl")
    assert rows.rows_read == 3 and rows.skipped == {"unanswerable": 1}
    first, third = rows.candidates
    assert first.answers == ["Miquette Giraudy", "M. Giraudy"]
    assert [s["id"] for s in first.diagnostics["decomposition"]] == [460946, 294723]
    assert first.diagnostics["supporting_pages"] == ["Green", "Miquette Giraudy"]
    assert third.source_row_number == 3  # row numbers count the skipped row: they locate the file row


def test_bamboogle_csv_and_jsonl_agree_and_have_null_ids() -> None:
    csv_rows = read("bamboogle_csv", "bamboogle_test.csv").candidates
    jsonl_rows = read("bamboogle_jsonl", "bamboogle.jsonl").candidates
    assert csv_rows[0].question == jsonl_rows[0].question and csv_rows[0].answers == jsonl_rows[0].answers
    assert csv_rows[1].question == "What rocket was the first spacecraft that ever approached Uranus launched on?"
    assert {c.source_id for c in csv_rows + jsonl_rows} == {None}
    assert jsonl_rows[0].diagnostics["extra"] == {"idx": 1}


def test_flashrag_and_qa_list_generic_inputs() -> None:
    flash = read("flashrag_jsonl", "flashrag_nq_test.jsonl").candidates
    assert flash[1].source_id == "test_1257" and flash[1].answers == ["dance-pop", "dance pop"]
    qa = read("qa_list_json", "qa_list.json").candidates
    assert qa[1].diagnostics == {"question_type": "comparison"} and qa[0].source_id is None


def test_searchr1_parquet_golden_answers_data_source_filter_and_fallbacks(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "test.parquet"
    pq.write_table(pa.table({"id": ["test_0", "test_1", "test_2"], "question": ["q zero?", "q one?", "q two?"],
                             "golden_answers": [["a0"], ["a1", "b1"], None],
                             "reward_model": [None, None, '{"ground_truth": {"target": "t2"}}'],
                             "data_source": ["nq", "popqa", "popqa"],
                             "prompt": [[{"role": "user", "content": "Answer the given question. q zero?"}]] * 3}),
                   path)
    rows = read("searchr1_parquet", path, data_source="popqa")
    assert [c.source_row_number for c in rows.candidates] == [2, 3]
    assert rows.candidates[0].answers == ["a1", "b1"] and rows.candidates[1].answers == ["t2"]
    assert rows.candidates[0].question == "q one?"  # the question column, never the rendered prompt
    assert rows.skipped == {"data_source != popqa": 1}


def test_every_format_module_opens_with_a_citation() -> None:
    import importlib

    for target in set(FORMATS.values()):
        module = importlib.import_module(target.partition(":")[0])
        assert "Citation:" in (module.__doc__ or ""), module.__name__


def test_unknown_format_and_option_are_config_errors_with_hints() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'nq_open_jsonl'"):
        read("nq_open_json", "NQ-open.dev.jsonl")
    with pytest.raises(ConfigError, match="valid options for 2wiki_json: \\['aliases'\\]"):
        read("2wiki_json", "2wiki_dev.json", alias="x")


MALFORMED = [
    ("nq_open_jsonl", "a.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": "q2", "answer": "a"}\n', 2, "answer"),
    ("nq_open_jsonl", "b.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": "q2"\n', 2, None),
    ("nq_open_jsonl", "c.jsonl", '{"answer": ["a"]}\n', 1, "question"),
    ("triviaqa_dpr_tsv", "d.tsv", "q1\t['a']\nq2\tnot a list\n", 2, "answers"),
    ("triviaqa_dpr_tsv", "e.tsv", "q1 without tab\n", 1, "question"),
    ("popqa_tsv", "f.tsv", "id\tquestion\tpossible_answers\n1\tq?\t[\"a\"]\n2\tq2?\tnot json\n", 3, "possible_answers"),
    ("popqa_tsv", "g.tsv", "id\tquestion\n1\tq?\n", 1, "possible_answers"),
    ("hotpotqa_json", "h.json", json.dumps([{"_id": "x", "question": "q", "answer": "a",
                                              "supporting_facts": [["t", "zero"]]}]), 1, "supporting_facts"),
    ("2wiki_json", "i.json", json.dumps([{"_id": "x", "question": "q", "answer": 3}]), 1, "answer"),
    ("musique_jsonl", "j.jsonl", json.dumps({"id": "x", "question": "q", "answer": "a", "answer_aliases": "b"}) + "\n",
     1, "answer_aliases"),
    ("bamboogle_csv", "k.csv", "Q,A\nq,a\n", 1, "Question"),
    ("flashrag_jsonl", "l.jsonl", json.dumps({"id": "x", "question": "q", "golden_answers": []}) + "\n", 1,
     "golden_answers"),
    ("triviaqa_json", "m.json", json.dumps({"Data": [{"Question": "q", "QuestionId": "t1"}]}), 1, "Answer"),
    ("qa_list_json", "n.json", json.dumps({"question": "q"}), None, None),
]


@pytest.mark.parametrize(("fmt", "name", "content", "line", "field"), MALFORMED, ids=[m[1] for m in MALFORMED])
def test_malformed_file_is_a_data_error_naming_file_row_and_field(tmp_path: Path, fmt: str, name: str, content: str,
                                                                   line: int | None, field: str | None) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as info:
        read(fmt, path)
    error = info.value
    assert error.path == str(path) and name in str(error)
    assert error.line == line
    if field is not None:
        assert error.field == field and f"field {field!r}" in str(error)
    assert error.fix


@pytest.mark.realdata
def test_official_layout_adapters_read_the_real_train_files() -> None:
    hotpot = read("hotpotqa_json", require_shared("train/hotpotqa/hipporag_v1_hotpotqa_train100_official_format.json"))
    assert len(hotpot.candidates) == 100 and all(c.source_id for c in hotpot.candidates)
    assert all(c.diagnostics["supporting_pages"] for c in hotpot.candidates)
    musique = read("musique_jsonl", require_shared("train/musique/hipporag_v1_musique_train100_official_format.json"))
    assert len(musique.candidates) == 100 and all(c.diagnostics["decomposition"] for c in musique.candidates)
    trivia = read("triviaqa_json", require_shared("qa/triviaqa/official_format_fixture/triviaqa_authors_sample.json"))
    assert trivia.candidates[0].source_id == "tc_33"
    with pytest.raises(DataError, match="test-without-answers"):
        read("triviaqa_json",
             require_shared("qa/triviaqa/official_format_fixture/unfiltered-web-test-without-answers.json"))


@pytest.mark.realdata
def test_real_dev_lists_have_their_published_sizes() -> None:
    sizes = {
        ("nq_open_jsonl", "qa/nq_open/NQ-open.dev.jsonl"): 3610,
        ("triviaqa_dpr_tsv", "qa/triviaqa/topics.dpr.trivia.test.txt"): 11313,
        ("qa_list_json", "qa/hotpotqa/hotpotqa_dev_questions_and_answers.json"): 7405,
        ("qa_list_json", "qa/2wikimultihopqa/dev_questions_and_answers.json"): 12576,
        ("qa_list_json", "qa/musique/musique_ans_dev_questions_and_answers.json"): 2417,
        ("bamboogle_jsonl", "qa/bamboogle/r1searcher_bamboogle.jsonl"): 125,
        ("bamboogle_csv", "qa/bamboogle/bamboogle_fireact_test.csv"): 125,
        ("searchr1_parquet", "search_r1_processed/graphrag_r2_popqa_test_200.parquet"): 200,
        ("flashrag_jsonl", "flashrag_format/from_searchr1_test_sample/popqa.jsonl"): 16,
    }
    for (fmt, relative), size in sizes.items():
        assert len(read(fmt, require_shared(relative)).candidates) == size, relative
    trivia = read("triviaqa_dpr_tsv", require_shared("qa/triviaqa/topics.dpr.trivia.test.txt")).candidates
    assert trivia[2].question == "Which Lloyd Webber musical premiered in the US on 10th December 1993?"
    assert "Sunset Boulevard" in trivia[2].answers


@pytest.mark.realdata
def test_dpr_alias_fast_path_equals_literal_eval_on_every_real_row() -> None:
    import ast
    import csv
    import io

    for relative in ("qa/triviaqa/topics.dpr.trivia.test.txt", "train/triviaqa/topics.dpr.trivia.dev.txt",
                     "train/nq/topics.dpr.nq.dev.txt"):
        path = require_shared(relative)
        rows = read("triviaqa_dpr_tsv", path).candidates
        text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
        expected = [ast.literal_eval(cells[1]) for cells in csv.reader(io.StringIO(text), delimiter="\t") if cells]
        assert [c.answers for c in rows] == expected, relative
