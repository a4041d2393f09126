"""`aether construct wikipedia`: a dump goes through the Wikispeedia construction to a release the sandbox opens."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.corpus.importers import import_corpus
from aethersearch.errors import DataError, ShortageError
from aethersearch.jsonl import loads, read_jsonl
from aethersearch.release_layout import release_layout
from aethersearch.sandbox.episode import open_sandbox
from aethersearch.search.index_dir import build_index
from tests.conftest import SHARED_DATA, require_shared
from tests.corpus.mediawiki_export import Page, write_export

#: A typed chain (Abuja is the capital city of Nigeria; Nigeria is a country in West Africa: capital_of .
#: located_in composes to "which continent"); the redirects become page aliases the mask hides too.
PAGES = [
    Page("Abuja", "'''Abuja''' is the capital city of [[Nigeria]]. It has many parks. [[Category:Capitals]]"),
    Page("Nigeria", "'''Nigeria''' is a country in West [[Africa]]. [[Abuja]] is its capital."
                    "<ref>{{cite web|title=Nigeria}}</ref>"),
    Page("Africa", "'''Africa''' is the second largest continent on Earth."),
    Page("Federal Republic of Nigeria", redirect="Nigeria"),
    Page("African continent", redirect="Africa"),
]


def _seeds(root: Path) -> Path:
    qa = root / "qa" / "hotpotqa"
    qa.mkdir(parents=True)
    (qa / "hotpotqa_dev_questions_and_answers.json").write_text(
        json.dumps([{"question": "In which continent is Abuja?", "answer": "Africa"}]))
    return root


def test_a_dump_builds_a_release_that_the_sandbox_serves(tmp_path: Path) -> None:
    dump = write_export(tmp_path / "mini.xml.bz2", PAGES, compress=True)
    out = tmp_path / "release"
    result = CliRunner().invoke(app, ["construct", "wikipedia", str(dump), "--seeds", str(_seeds(tmp_path / "seeds")),
                                      "--out", str(out), "--no-screen"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "accepted questions" in result.output
    rows = list(read_jsonl(release_layout(out).diagnostics))
    assert [r["path"] for r in rows] == [["Abuja", "Nigeria", "Africa"]]
    mask = rows[0]["extra"]["mask"]
    # redirect titles are page aliases: the mask hides them too
    assert mask["hidden_terms"] == {"Africa": ["Africa", "African continent"],
                                    "Nigeria": ["Nigeria", "Federal Republic of Nigeria"]}
    assert rows[0]["extra"]["chain_entailment"]["entailing"] is True
    corpus = loads(release_layout(out).manifest.read_bytes())["corpus"]
    assert corpus["kind"] == "wikipedia-dump" and corpus["dump"] == "mini.xml.bz2"
    assert corpus["import"]["redirects"] == 2 and corpus["import"]["links"] == {"read": 3, "kept": 3, "dropped": 0}
    assert [r["answers"][0] for r in read_jsonl(release_layout(out).eval)] == ["Africa"]

    # the same dump, imported as a store and indexed, is what the sandbox opens the release over
    store = import_corpus("wikipedia", dump, tmp_path / "store").store
    opened = build_index(store, "bm25", tmp_path / "index")
    sandbox = open_sandbox(out, opened.index, opened.store)
    qid = sandbox.question_ids[0]

    async def walk() -> None:
        episode = sandbox.episode(qid, run_id="walker")
        assert (await episode.visit("Nigeria")).call.error  # locked until its predecessor was visited
        first = (await episode.visit("Abuja")).documents[0]
        assert "Nigeria" in first.links and "Africa" not in first.links
        assert (await episode.visit("Nigeria")).call.error is None

    asyncio.run(walk())


def test_a_bad_dump_stops_the_build_and_writes_nothing(tmp_path: Path) -> None:
    dump = write_export(tmp_path / "loop.xml", [*PAGES[:3], Page("A", redirect="B"), Page("B", redirect="A")])
    result = CliRunner().invoke(app, ["construct", "wikipedia", str(dump), "--seeds", str(_seeds(tmp_path / "s")),
                                      "--out", str(tmp_path / "release"), "--no-screen"])
    assert result.exit_code != 0 and isinstance(result.exception, DataError)
    assert "redirect loop: A -> B -> A" in str(result.exception)
    assert not (tmp_path / "release").exists()


@pytest.mark.realdata
def test_the_real_excerpt_imports_but_its_pages_resolve_no_seed(tmp_path: Path) -> None:
    # 98 articles whose links mostly leave the excerpt: no seed question pairs two linked pages of it, and the
    # build says so (a shortage with the counts), writing nothing
    dump = require_shared("wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    from aethersearch.construct.wikipedia import build_wikipedia_release

    with pytest.raises(ShortageError, match="seed_answer_not_a_page") as raised:
        build_wikipedia_release(dump, tmp_path / "release", seeds_root=SHARED_DATA)
    assert not (tmp_path / "release").exists()
    # and why no typed-fact seed either: the chain census of the excerpt's own link graph
    message = str(raised.value)
    assert "the link graph has 86 links between its pages, 0 of them typed" in message
    assert "'untyped_hop': 190" in message and "composes" not in message.split("by reason:")[1].split(";")[0]
    assert "located_in 27" in message  # "is a province of Canada": the patterns match, the object is outside


def test_pages_read_back_from_the_store_build_the_same_release_as_pages_in_memory(tmp_path: Path) -> None:
    """The streamed construction (PageTexts over the import's page store, the import's graph) writes the
    release, byte for byte, that the in-memory page list gives."""
    from aethersearch.construct.page_release import build_page_release
    from aethersearch.construct.wikipedia import build_wikipedia_release
    from aethersearch.corpus.wikipedia import WikipediaDump

    extra = [Page(f"Town {i}", f"'''Town {i}''' is a town in [[Nigeria]]. It lies near [[Abuja]].") for i in range(5)]
    dump = write_export(tmp_path / "mini.xml.bz2", [*PAGES, *extra], compress=True)
    seeds = _seeds(tmp_path / "seeds")
    streamed = build_wikipedia_release(dump, tmp_path / "streamed", seeds_root=seeds, store=tmp_path / "pages")
    reader = WikipediaDump(dump)
    documents = list(reader.documents())
    in_memory = build_page_release(documents, tmp_path / "memory", name="webdetective_wikipedia",
                                   source_dataset="wikipedia", corpus=loads(
                                       release_layout(streamed.path).manifest.read_bytes())["corpus"],
                                   seeds_root=seeds, page_aliases=reader.aliases)
    # 13 seeds (one dataset seed, the rest typed facts) went through the validator's corpus index
    assert streamed.result.considered == 13 and streamed.result.rejected and streamed.result.questions
    files = sorted(p.name for p in streamed.path.iterdir())
    assert files == sorted(p.name for p in in_memory.path.iterdir()) and "manifest.json" in files
    for name in files:
        assert (streamed.path / name).read_bytes() == (in_memory.path / name).read_bytes(), name
    for companion in ("seed_review.jsonl", "question_review.todo.json"):
        assert (tmp_path / f"streamed.{companion}").read_bytes() == (tmp_path / f"memory.{companion}").read_bytes()
    assert (tmp_path / "pages" / "store.json").is_file()  # --store keeps the page store the build read
