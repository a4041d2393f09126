"""The Wikipedia dump importer: real enwiki excerpts, link and redirect rules, and every bad input it names."""

from __future__ import annotations

import bz2
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.corpus.graph import LinkGraph
from aethersearch.corpus.importers import import_corpus
from aethersearch.corpus.mediawiki import read_dump
from aethersearch.corpus.string_spool import spooled
from aethersearch.corpus.wikipedia import WikipediaDump, iter_wikipedia
from aethersearch.corpus.wikitext import article_target, normalize_title, parse_wikitext
from aethersearch.errors import AetherError, DataError
from tests.conftest import require_shared
from tests.corpus.mediawiki_export import Page, export_xml, write_export

EXCERPT = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TABLES = "wikipedia/enwiki-table-markup.xml.bz2"
NAMESPACES = frozenset({"file", "category", "template"})


@pytest.fixture(scope="module")
def excerpt() -> WikipediaDump:
    reader = WikipediaDump(require_shared(EXCERPT))
    reader.documents_read = list(reader.documents())  # type: ignore[attr-defined]
    return reader


@pytest.mark.realdata
def test_real_excerpt_pages_redirects_and_disambiguation_are_told_apart(excerpt: WikipediaDump) -> None:
    stats = excerpt.stats
    # 206 pages: 106 articles (8 of them disambiguation pages), 100 redirects (one in the Wikipedia: namespace)
    assert (stats.pages, stats.articles, stats.disambiguation, stats.redirects, stats.other_namespaces) == \
        (206, 98, 8, 99, 1)
    docs = {d.id: d for d in excerpt.documents_read}  # type: ignore[attr-defined]
    assert len(docs) == 98 and "Ada" not in docs and "Austin_(disambiguation)" not in docs
    assert docs["Anarchism"].text.startswith("Anarchism is a political philosophy that advocates self-governed")
    assert docs["Anarchism"].url == "https://en.wikipedia.org/wiki/Anarchism"
    for doc in docs.values():  # plain text: no markup, references or category lines left
        assert not any(mark in doc.text for mark in ("[[", "]]", "{{", "}}", "<ref", "Category:", "'''")), doc.id
        assert doc.text.strip() and set(doc.links) <= set(docs) and doc.id not in doc.links
    # redirects become aliases of the article they lead to
    assert excerpt.aliases["Abacus"] == ["AbacuS"]
    assert set(excerpt.aliases["Analysis_of_variance"]) == {"ANOVA", "Analysis of Variance"}
    assert all(page in docs for page in excerpt.aliases)
    graph = excerpt.graph()
    assert graph.n_nodes == 98 and graph.n_edges == stats.links.kept == sum(len(d.links) for d in docs.values())
    assert stats.links.read == stats.links.kept + stats.links.dropped  # most links leave the excerpt: counted


@pytest.mark.realdata
def test_links_inside_an_infobox_are_links_though_the_infobox_is_not_text() -> None:
    lincoln = next(p for p in read_dump(require_shared(EXCERPT)) if p.title == "Abraham Lincoln")
    start = lincoln.text.index("{{Infobox")
    infobox = lincoln.text[start:start + 2500]
    assert "[[Oak Ridge Cemetery]]" in infobox and lincoln.text.count("[[Oak Ridge Cemetery") == 1
    parsed = parse_wikitext(lincoln.text, NAMESPACES)
    assert "Oak Ridge Cemetery" in parsed.links and "Hannibal Hamlin" in parsed.links  # infobox-only, and prose
    assert "Oak Ridge Cemetery" not in parsed.text and not parsed.disambiguation


@pytest.mark.realdata
def test_bz2_and_plain_exports_give_the_same_store(tmp_path: Path) -> None:
    source = require_shared(TABLES)
    plain = tmp_path / "tables.xml"
    plain.write_bytes(bz2.decompress(source.read_bytes()))
    a = import_corpus("wikipedia", source, tmp_path / "a")
    b = import_corpus("wikipedia", plain, tmp_path / "b")
    assert a.store.content_hash == b.store.content_hash and len(a.store) == 5
    for doc in a.store:  # table markup is read as cells, not left as syntax
        assert "{|" not in doc.text and "|-" not in doc.text and "||" not in doc.text


def _dump(tmp_path: Path, pages: list[Page], compress: bool = False) -> Path:
    return write_export(tmp_path / ("dump.xml.bz2" if compress else "dump.xml"), pages, compress=compress)


def test_redirects_and_template_links_resolve_to_articles(tmp_path: Path) -> None:
    dump = _dump(tmp_path, [
        Page("Kane Cornes", "'''Kane Cornes''' is a footballer. His brother is [[chad_Cornes|Chad]]. "
                            "{{Infobox person|relatives=[[Graham_Cornes]]}} [[Category:Footballers]] [[fr:Kane]]"),
        Page("Chad Cornes", "Chad's stepmother is [[Nicole Cornes]]. See [[Kane Cornes#Career]] and [[Nowhere]]."),
        Page("Nicole Cornes", "Nicole is married to [[GC]]. [[File:Nicole.jpg|thumb|With [[Kane Cornes]]]]"),
        Page("Graham Cornes", "Graham coached. {{Disambiguation needed}}"),
        Page("GC", redirect="G. Cornes"),
        Page("G. Cornes", redirect="Graham Cornes#Coaching"),
        Page("Cornes", "'''Cornes''' may refer to: [[Kane Cornes]] {{surname}} {{disambiguation}}"),
        Page("Template:Infobox person", "{{{name}}}", namespace=10),
    ])
    reader = WikipediaDump(dump)
    documents = reader.documents()
    first = next(documents)
    with pytest.raises(AetherError, match="read every document before asking for the graph"):
        reader.graph()  # a graph of the pages read so far would be a plausible, wrong graph
    docs = {d.id: d for d in [first, *documents]}
    assert list(docs) == ["Kane_Cornes", "Chad_Cornes", "Nicole_Cornes", "Graham_Cornes"]
    assert docs["Kane_Cornes"].links == ["Chad_Cornes", "Graham_Cornes"]  # lower-case first letter, _ , infobox
    assert docs["Chad_Cornes"].links == ["Nicole_Cornes", "Kane_Cornes"]  # #section dropped, red link dropped
    assert docs["Nicole_Cornes"].links == ["Graham_Cornes", "Kane_Cornes"]  # double redirect; link in a caption
    assert docs["Kane_Cornes"].text == "Kane Cornes is a footballer. His brother is Chad."
    assert sorted(reader.aliases["Graham_Cornes"]) == ["G. Cornes", "GC"]
    assert (reader.stats.disambiguation, reader.stats.other_namespaces, reader.stats.redirects) == (1, 1, 2)
    assert reader.stats.links.dropped_examples == [("Chad Cornes", "Nowhere")]
    graph, expected = reader.graph(), LinkGraph.from_documents(docs.values())
    assert graph.n_edges == 6 and list(graph.ids) == list(expected.ids)
    assert graph.indptr.tolist() == expected.indptr.tolist() and graph.indices.tolist() == expected.indices.tolist()
    assert reader.graph() is graph  # built once from the CSR blocks, which it took


def test_two_worker_processes_give_the_same_documents(tmp_path: Path) -> None:
    pages = [Page(f"Page {i}", f"Page {i} links [[Page {(i * 7) % 150}]] and [[page {(i + 1) % 150}]].")
             for i in range(150)]
    dump = _dump(tmp_path, pages, compress=True)
    one = list(WikipediaDump(dump).documents())
    two = list(WikipediaDump(dump, workers=2).documents())
    assert one == two and len(one) == 150


# ----------------------------------------------------------------------------- bad input


def _fails_without_store(tmp_path: Path, dump: Path, match: str) -> DataError:
    with pytest.raises(DataError, match=match) as caught:
        import_corpus("wikipedia", dump, tmp_path / "store")
    assert not (tmp_path / "store").exists()  # nothing half-written
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".store")] == []
    return caught.value


def test_a_truncated_bz2_names_the_compressed_offset_and_last_page(tmp_path: Path) -> None:
    pages = [Page(f"Page {i}", f"Text {i} " * 400 + f"[[Page {i + 1}]]") for i in range(40)]
    whole = _dump(tmp_path, pages, compress=True).read_bytes()
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    error = _fails_without_store(tmp_path, cut, "bz2 stream is truncated or corrupt at compressed byte")
    assert "cut.xml.bz2" in str(error) and error.fix


@pytest.mark.realdata
def test_a_truncated_real_dump_names_the_last_page_read(tmp_path: Path) -> None:
    whole = require_shared(EXCERPT).read_bytes()
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(whole[: len(whole) // 2])
    titles = []
    with pytest.raises(DataError, match=r"truncated or corrupt at compressed byte [\d,]+ .*after page '([^']+)'") as caught:
        titles.extend(page.title for page in read_dump(cut))
    assert titles and f"after page {titles[-1]!r} (page {len(titles)})" in str(caught.value)


def test_malformed_xml_names_the_line_and_the_last_good_page(tmp_path: Path) -> None:
    text = _dump(tmp_path, [Page("Alpha", "A [[Beta]]."), Page("Beta", "B.")]).read_text()
    broken = tmp_path / "broken.xml"
    broken.write_text(text.replace("<title>Beta</title>", "<title>Beta</titel>"))
    error = _fails_without_store(tmp_path, broken, r"malformed XML at line \d+, column \d+")
    assert "after page 'Alpha'" in str(error) and error.line is not None
    cut = tmp_path / "cut.xml"
    cut.write_text(text[: text.index("<title>Beta")])  # an export that stops before </mediawiki>
    _fails_without_store(tmp_path, cut, "malformed XML .*after page 'Alpha'")


@pytest.mark.parametrize("compress", [False, True])
def test_a_byte_that_is_not_utf8_is_an_encoding_error_naming_its_offset_and_page(tmp_path: Path,
                                                                                  compress: bool) -> None:
    """Expat alone says "not well-formed (invalid token)"; the import names the byte, its offset and its page."""
    data = export_xml([Page("Alpha", "A [[Beta]]."), Page("Beta", "Caf\u00e9 au lait.")]).encode("utf-8")
    latin1 = data.replace("Caf\u00e9".encode(), b"Caf\xe9")  # one Latin-1 byte inside Beta's text
    offset = latin1.index(b"\xe9")
    dump = tmp_path / ("latin1.xml.bz2" if compress else "latin1.xml")
    dump.write_bytes(bz2.compress(latin1) if compress else latin1)
    error = _fails_without_store(tmp_path, dump, rf"encoding error: byte e9 at byte offset {offset:,} of the XML "
                                                 r"is not UTF-8, in page 'Beta'")
    assert "after page 'Alpha'" in str(error) and "iconv" in str(error.fix)


def test_an_invalid_byte_across_a_chunk_boundary_is_still_an_encoding_error(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from aethersearch.corpus import mediawiki

    data = export_xml([Page("Alpha", "x" * 300 + " Caf\u00e9.")]).encode("utf-8").replace("\u00e9".encode(), b"\xe9")
    offset = data.index(b"\xe9")
    monkeypatch.setattr(mediawiki, "CHUNK", offset + 1)  # the bad byte ends the first chunk
    dump = tmp_path / "edge.xml"
    dump.write_bytes(data)
    with pytest.raises(DataError, match=rf"byte e9 at byte offset {offset:,} .* in page 'Alpha'"):
        list(read_dump(dump))


def test_a_page_over_the_article_size_limit_is_refused_by_name(tmp_path: Path) -> None:
    from aethersearch.corpus.mediawiki import MAX_PAGE_BYTES, DumpReader

    assert MAX_PAGE_BYTES == 2 * 1024 * 1024  # MediaWiki's default $wgMaxArticleSize
    big = _dump(tmp_path, [Page("Alpha", "A."), Page("Huge", "\u00e9" * (MAX_PAGE_BYTES // 2 + 1))])
    _fails_without_store(tmp_path, big, r"page 'Huge' \(id 11\) has 2,097,154 bytes of text, over the "
                                        r"2,097,152-byte page limit")
    small = _dump(tmp_path, [Page("Alpha", "A."), Page("Mid", "word " * 300)])
    with pytest.raises(DataError, match=r"page 'Mid' \(id 11\) has 1,500 bytes"):
        list(DumpReader(small, max_page_bytes=1000))
    assert [p.title for p in DumpReader(small, max_page_bytes=1500)] == ["Alpha", "Mid"]


def test_a_page_with_no_text_is_named(tmp_path: Path) -> None:
    missing = _dump(tmp_path, [Page("Alpha", "A."), Page("Gamma", None)])
    _fails_without_store(tmp_path, missing, r"page 'Gamma' \(id 11\) has no revision text")
    empty = write_export(tmp_path / "empty.xml", [Page("Alpha", "A."), Page("Delta", "  \n")])
    _fails_without_store(tmp_path, empty, r"article 'Delta' \(page id 11\) has empty text")


def test_a_redirect_loop_is_named(tmp_path: Path) -> None:
    dump = _dump(tmp_path, [Page("Alpha", "A [[Beta]]."), Page("Beta", redirect="Gamma"),
                            Page("Gamma", redirect="beta")])
    _fails_without_store(tmp_path, dump, "redirect loop: Beta -> Gamma -> Beta")


def test_a_title_given_twice_is_named(tmp_path: Path) -> None:
    twice = _dump(tmp_path, [Page("Alpha", "A [[Beta]]."), Page("Beta", "B."), Page("alpha", "Again.")])
    _fails_without_store(tmp_path, twice, r"page title 'Alpha' occurs twice \(an article and an article\)")
    also = write_export(tmp_path / "also.xml", [Page("Alpha", "A."), Page("Alpha", redirect="Beta"),
                                                Page("Beta", "B.")])
    _fails_without_store(tmp_path, also, r"page title 'Alpha' occurs twice \(an article and a redirect\)")


def test_a_redirect_chain_longer_than_the_vectorised_hops_still_lands(tmp_path: Path) -> None:
    # R0 -> R1 -> ... -> R39 -> Target: past the 32 hops followed in numpy, the rest is walked one by one
    chain = [Page(f"R{i}", redirect=f"R{i + 1}" if i < 39 else "Target") for i in range(40)]
    dump = _dump(tmp_path, [Page("Source", "See [[R0]] and [[R20]]."), Page("Target", "T."), *chain])
    reader = WikipediaDump(dump)
    docs = {d.id: d for d in reader.documents()}
    assert docs["Source"].links == ["Target"] and reader.stats.redirects_unresolved == 0
    assert sorted(reader.aliases["Target"]) == sorted(f"R{i}" for i in range(40))
    assert list(reader.aliases) == ["Target"] and len(reader.aliases) == 1 and "Source" not in reader.aliases
    looped = write_export(tmp_path / "looped.xml", [Page("Source", "[[L0]]"), *[
        Page(f"L{i}", redirect=f"L{i + 1}" if i < 39 else "L35") for i in range(40)]])
    _fails_without_store(tmp_path, looped, "redirect loop: L35 -> L36 -> L37 -> L38 -> L39 -> L35")


def test_aliases_are_found_by_page_id_even_when_every_page_id_hashes_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the alias files find a page by its id's hash and then check the id: with one hash for every page id,
    # each lookup must still land on its own page (and a page without redirects is no key)
    pages = [Page(f"A{i}", "Text.") for i in range(5)] + [Page(f"R{i}", redirect=f"A{i % 3}") for i in range(7)]
    reader = WikipediaDump(_dump(tmp_path, pages))
    list(reader.documents())
    assert reader.aliases["A2"] == ["R2", "R5"] and reader.aliases["A0"] == ["R0", "R3", "R6"]
    monkeypatch.setattr("aethersearch.corpus.wikipedia.hash", lambda page: 7, raising=False)
    from aethersearch.corpus.wikipedia import RedirectAliases, _write_alias_index

    rows = np.array([0, 1, 2, 0, 1, 2, 0], dtype=np.int64)
    _write_alias_index(tmp_path, [f"A{i}" for i in range(5)], rows)
    spooled([f"R{i}" for i in range(7)], tmp_path / "redirect_ids").close()
    aliases = RedirectAliases([f"A{i}" for i in range(5)], tmp_path)
    assert {page: aliases[page] for page in aliases} == {"A0": ["R0", "R3", "R6"], "A1": ["R1", "R4"],
                                                         "A2": ["R2", "R5"]}
    assert "A3" not in aliases and "R0" not in aliases and len(aliases) == 3
    assert aliases.get("A1") == ["R1", "R4"] and aliases.get("A4") is None and aliases.get("A4", ()) == ()
    with pytest.raises(KeyError):
        aliases["A4"]


def test_aliases_wait_for_the_redirects_and_their_files_go_with_the_reader(tmp_path: Path) -> None:
    import gc

    reader = WikipediaDump(_dump(tmp_path, [Page("A", "Text."), Page("B", redirect="A")]), spool_dir=tmp_path)
    with pytest.raises(AetherError, match="read documents\\(\\) first"):
        reader.aliases  # noqa: B018
    docs = reader.documents()
    next(docs)  # the first document comes after the redirects were resolved
    assert reader.aliases["A"] == ["B"]
    kept = [path for path in tmp_path.iterdir() if path.name.startswith("aether-wikipedia-aliases-")]
    assert len(kept) == 1 and (kept[0] / "redirect_ids.utf8").read_bytes() == b"B"
    docs.close()
    assert not [path for path in tmp_path.iterdir() if path.name.startswith("aether-wikipedia-")
                and "aliases" not in path.name], "the spools go when the documents are closed"
    del reader, docs
    gc.collect()
    assert not kept[0].exists()


# ----------------------------------------------------------------------------- title rules

_titles = st.text(alphabet=st.sampled_from("abcXYZ _-é"), min_size=1, max_size=12).filter(lambda t: t.strip(" _"))


@given(_titles)
def test_title_normalisation_is_idempotent_and_links_ignore_sections(title: str) -> None:
    once = normalize_title(title)
    assert normalize_title(once) == once and "_" not in once and once == once.strip()
    assert article_target(f"{title}#Some section", NAMESPACES) == once
    assert article_target(f"Category:{title}", NAMESPACES) is None and article_target(f"fr:{title}", NAMESPACES) is None


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=20),
       st.lists(st.integers(0, 5), min_size=6, max_size=6))
def test_every_link_lands_on_the_article_its_redirect_chain_names(tmp_path_factory: pytest.TempPathFactory,
                                                                  links: list[tuple[int, int]],
                                                                  redirect_of: list[int]) -> None:
    # articles A0..A5, each with a redirect R<i> -> A<redirect_of[i]>; links go to an article or a redirect
    by_source: dict[int, list[str]] = {}
    for source, target in links:
        by_source.setdefault(source, []).append(f"A{target}" if (source + target) % 2 else f"R{target}")
    pages = [Page(f"A{i}", "Text. " + " ".join(f"[[{t}]]" for t in by_source.get(i, []))) for i in range(6)]
    pages += [Page(f"R{i}", redirect=f"A{redirect_of[i]}") for i in range(6)]
    dump = write_export(tmp_path_factory.mktemp("dump") / "d.xml", pages)
    docs = {d.id: d for d in iter_wikipedia(dump)}
    for i in range(6):
        expected: list[str] = []
        for title in by_source.get(i, []):
            article = f"A{redirect_of[int(title[1:])]}" if title.startswith("R") else title
            if article != f"A{i}" and article not in expected:
                expected.append(article)
        assert docs[f"A{i}"].links == expected


def test_a_multistream_bz2_dump_reads_every_stream(tmp_path: Path) -> None:
    """Wikimedia's ``pages-articles-multistream`` dumps are many bz2 streams in one file; the reader must
    not stop at the end of the first (a silent loss of every later page)."""
    xml = export_xml([Page("Abuja", "'''Abuja''' is in [[Nigeria]]."), Page("Nigeria", "A country."),
                      Page("Capital of Nigeria", redirect="Abuja")]).encode()
    cut = [xml.index(b"  <page>"), xml.index(b"  <page>", xml.index(b"</page>"))]
    multi = tmp_path / "multistream.xml.bz2"
    multi.write_bytes(b"".join(bz2.compress(part) for part in (xml[:cut[0]], xml[cut[0]:cut[1]], xml[cut[1]:])))
    assert [p.title for p in read_dump(multi)] == ["Abuja", "Nigeria", "Capital of Nigeria"]
