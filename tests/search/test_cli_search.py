"""CLI: `aether corpus import|demo`, `aether index build`, `aether search` (thin wrappers, clean errors)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.search.index_dir import open_index

runner = CliRunner()


def test_demo_import_build_search(tmp_path: Path) -> None:
    demo = runner.invoke(app, ["corpus", "demo", "--out", str(tmp_path / "demo")])
    assert demo.exit_code == 0, demo.output
    imported = runner.invoke(app, ["corpus", "import", "jsonl", str(tmp_path / "demo" / "corpus.jsonl"),
                                   "--links", str(tmp_path / "demo" / "links.tsv"), "--out", str(tmp_path / "store")])
    assert imported.exit_code == 0, imported.output
    assert "kept" in imported.output and "0 dropped" in imported.output
    built = runner.invoke(app, ["index", "build", str(tmp_path / "store"), "--backend", "bm25",
                                "--out", str(tmp_path / "idx"), "--set", "k1=1.2"])
    assert built.exit_code == 0, built.output
    assert "index hash sha256:" in built.output
    opened = open_index(tmp_path / "idx")
    assert opened.manifest.config["k1"] == 1.2
    title = opened.store.doc_at(5).title
    found = runner.invoke(app, ["search", str(tmp_path / "idx"), title, "-k", "2"])
    assert found.exit_code == 0 and opened.store.doc_at(5).id in found.output


def test_raw_corpus_file_is_imported_into_the_index_dir(tmp_path: Path) -> None:
    runner.invoke(app, ["corpus", "demo", "--out", str(tmp_path / "demo")])
    built = runner.invoke(app, ["index", "build", str(tmp_path / "demo" / "corpus.jsonl"), "--out", str(tmp_path / "i")])
    assert built.exit_code == 0, built.output
    assert (tmp_path / "i" / "store" / "store.json").is_file()
    assert len(open_index(tmp_path / "i").store) > 300


def test_serve_rejects_an_unknown_http_implementation_cleanly(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "aethersearch.cli", "serve", str(tmp_path / "idx"), "--http", "h2"],
                            capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "unknown --http 'h2'" in output
    assert "h11, httptools" in output and "Traceback" not in output
