"""Importers (Search-R1 JSONL, DPR TSV, wikiextractor, Wikispeedia) and chunking."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from aethersearch.corpus.chunking import ChunkConfig, chunk_document, passage_page
from aethersearch.corpus.importers import (
    import_corpus,
    iter_dpr_tsv,
    iter_jsonl_corpus,
    iter_wikiextractor,
    iter_wikispeedia,
    parse_contents,
)
from aethersearch.corpus.link_stats import LinkStats
from aethersearch.errors import ConfigError, DataError
from aethersearch.records import Document


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_searchr1_jsonl_with_links(tmp_path: Path) -> None:
    corpus = _jsonl(tmp_path / "c.jsonl", [
        {"id": "0", "contents": '"Aaron"\nAaron is a prophet.\nSecond line.'},
        {"id": 1, "title": "Moses", "text": "Moses led."},
    ])
    links = tmp_path / "l.tsv"
    links.write_text("# comment\n0\t1\n0\t1\n1\t0\n1\tghost\n")
    stats = LinkStats()
    docs = list(iter_jsonl_corpus(corpus, links, stats))
    assert docs[0] == Document(id="0", title="Aaron", text="Aaron is a prophet.\nSecond line.", links=["1"])
    assert docs[1].id == "1" and docs[1].links == ["0"]
    assert docs[0].contents == '"Aaron"\nAaron is a prophet.\nSecond line.'
    assert (stats.read, stats.kept, stats.dropped) == (4, 2, 1)
    assert parse_contents('"A "quoted" title"\nbody') == ('A "quoted" title', "body")


def test_bad_jsonl_rows_name_file_and_line(tmp_path: Path) -> None:
    bad = _jsonl(tmp_path / "bad.jsonl", [{"id": "0", "contents": '"A"\nx'}, {"contents": "no id"}])
    with pytest.raises(DataError, match="bad.jsonl:2 \\(field 'id'\\)"):
        list(iter_jsonl_corpus(bad))
    bad2 = _jsonl(tmp_path / "bad2.jsonl", [{"id": "0", "body": "x"}])
    with pytest.raises(DataError, match="bad2.jsonl:1.*neither 'contents' nor 'text'"):
        list(iter_jsonl_corpus(bad2))
    links = tmp_path / "l.tsv"
    links.write_text("0 1\n")
    good = _jsonl(tmp_path / "g.jsonl", [{"id": "0", "contents": '"A"\nx'}])
    with pytest.raises(DataError, match="l.tsv:1"):
        list(iter_jsonl_corpus(good, links))


def test_dpr_tsv(tmp_path: Path) -> None:
    path = tmp_path / "psgs.tsv"
    path.write_text('id\ttext\ttitle\n1\t"Aaron is a prophet, ""high priest"""\tAaron\n2\tplain\tMoses\n')
    docs = list(iter_dpr_tsv(path))
    assert docs[0] == Document(id="1", title="Aaron", text='Aaron is a prophet, "high priest"')
    assert docs[1].title == "Moses"
    wrong = tmp_path / "wrong.tsv"
    wrong.write_text("a\tb\n")
    with pytest.raises(DataError, match="wrong.tsv:1.*header"):
        list(iter_dpr_tsv(wrong))


def test_wikiextractor_json_with_links(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "AA"
    folder.mkdir(parents=True)
    _jsonl(folder / "wiki_00", [
        {"id": "12", "revid": "1", "url": "https://en.wikipedia.org/wiki?curid=12", "title": "Anarchism",
         "text": 'Anarchism\n\nAnarchism is a <a href="political%20philosophy">political philosophy</a> '
                 'related to <a href="Moses">Moses</a> and <a href="Nowhere">x</a>.'},
        {"id": "25", "revid": "2", "url": "u", "title": "Political philosophy", "text": "About politics."},
        {"id": "30", "revid": "3", "url": "u", "title": "Moses", "text": "Moses led."},
    ])
    stats = LinkStats()
    docs = list(iter_wikiextractor(tmp_path / "out", stats))
    assert docs[0].text == "Anarchism is a political philosophy related to Moses and x."
    assert docs[0].links == ["25", "30"] and docs[0].title == "Anarchism"
    assert (stats.kept, stats.dropped) == (2, 1)


def test_wikispeedia_layout(tmp_path: Path) -> None:
    articles = tmp_path / "plaintext_articles"
    articles.mkdir()
    (articles / "%C3%85land.txt").write_text(
        "   #copyright\n\n\u00c5land\n\n2007 Schools Wikipedia Selection. Related subjects: Europe\n\n"
        "   First paragraph\n   continues.\n\n   Second paragraph.\n")
    (articles / "Zulu.txt").write_text("   #copyright\n\nZulu\n\n2007 Schools Wikipedia Selection.\n\n   Zulus.\n")
    links = tmp_path / "links.tsv"
    links.write_text("# header\n%C3%85land\tZulu\nZulu\t%C3%85land\nZulu\tMissing\n")
    docs = list(iter_wikispeedia(articles, links))
    assert docs[0] == Document(id="\u00c5land", title="\u00c5land",
                               text="First paragraph continues.\n\nSecond paragraph.", links=["Zulu"])
    assert docs[1].links == ["\u00c5land"]


def test_chunking_by_words_and_paragraphs() -> None:
    page = Document(id="P", title="Page", text="\n\n".join(" ".join(f"w{p}_{i}" for i in range(7)) for p in range(3)),
                    links=["Q"])
    words = chunk_document(page, ChunkConfig(mode="words", size=10, overlap=4))
    assert [p.id for p in words] == ["P#0", "P#1", "P#2"]
    all_words = page.text.split()
    assert words[0].text.split() == all_words[:10] and words[1].text.split() == all_words[6:16]
    assert words[-1].text.split()[-1] == all_words[-1]
    assert all(p.title == "Page" and passage_page(p.id) == "P" and p.links == [] for p in words)
    paragraphs = chunk_document(page, ChunkConfig(mode="paragraph"))
    assert [p.text for p in paragraphs] == [" ".join(f"w{p}_{i}" for i in range(7)) for p in range(3)]
    merged = chunk_document(page, ChunkConfig(mode="paragraph", min_words=10))
    assert len(merged) == 1
    assert chunk_document(page, ChunkConfig()) == [page]
    assert passage_page("Ancient_Egypt") == "Ancient_Egypt" and passage_page("a#b#12") == "a#b"
    with pytest.raises(ConfigError, match="overlap 10 must be smaller than size 10"):
        ChunkConfig(mode="words", size=10, overlap=10)


def test_import_corpus_chunked_keeps_pages(tmp_path: Path) -> None:
    result = import_corpus("demo", "-", tmp_path / "passages", chunk=ChunkConfig(mode="words", size=20, overlap=5),
                           pages_out=tmp_path / "pages")
    assert result.pages is not None and len(result.pages) > 300
    assert len(result.store) > len(result.pages)
    first = result.store.doc_at(0)
    page = result.pages.get(passage_page(first.id))
    assert first.text.split()[:5] == page.text.split()[:5] and page.links
    with pytest.raises(ConfigError, match="unknown corpus format"):
        import_corpus("xml", "x", tmp_path / "x")
