"""``aether searchr1-config`` + ``aether build``: every row of a Search-R1 test parquet becomes a release row."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.jsonl import read_jsonl
from aethersearch.release_layout import release_layout
from tests.conftest import require_shared

runner = CliRunner()


@pytest.mark.realdata
def test_every_row_of_the_112_row_sample_is_in_the_release(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    parquet = require_shared("search_r1_processed/searchr1_test_sample_112_7datasets.parquet")
    made = runner.invoke(app, ["searchr1-config", str(parquet), "--out", str(tmp_path / "cfg")])
    assert made.exit_code == 0, made.output
    built = runner.invoke(app, ["build", str(tmp_path / "cfg" / "build.yaml"), "--out", str(tmp_path / "rel")])
    assert built.exit_code == 0, built.output
    rows = read_jsonl(release_layout(tmp_path / "rel").eval)
    upstream = pq.read_table(parquet, columns=["id", "question", "golden_answers", "data_source"]).to_pylist()
    assert len(rows) == len(upstream) == 112
    by_id = {row["source_id"]: row for row in rows}
    for number, record in enumerate(upstream, start=1):
        row = by_id[record["id"]]
        assert (row["question"], row["answers"], row["source_dataset"], row["source_row_number"]) == (
            record["question"], list(record["golden_answers"]), record["data_source"], number)
    verified = runner.invoke(app, ["verify", str(tmp_path / "rel")])
    assert verified.exit_code == 0, verified.output


def test_a_file_without_data_source_is_a_message(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": ["q"]}), tmp_path / "x.parquet")
    result = runner.invoke(app, ["searchr1-config", str(tmp_path / "x.parquet"), "--out", str(tmp_path / "cfg")])
    assert result.exit_code != 0 and "data_source" in str(result.exception)
