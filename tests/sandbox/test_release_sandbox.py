"""End to end: the demo hint-free release opened as a sandbox over a real BM25 index of the demo world."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from aethersearch.construct.build import build_demo_sandbox_release
from aethersearch.errors import ConfigError, DataError
from aethersearch.jsonl import read_jsonl
from aethersearch.release_layout import release_layout
from aethersearch.sandbox.episode import open_sandbox


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    root: Path = tmp_path_factory.mktemp("demo_sandbox")
    release = build_demo_sandbox_release(root / "release", seed=0)
    store = import_corpus("demo", "-", root / "store", seed=0).store
    opened = build_index(store, "bm25", root / "index")
    return release, opened


def test_following_the_chain_is_the_way_to_the_answer(demo) -> None:
    release, opened = demo
    sandbox = open_sandbox(release, opened.index, opened.store)
    gold = {row["id"]: row for row in read_jsonl(release_layout(release).eval)}
    assert sandbox.question_ids == list(gold) and len(gold) == 60

    async def walk(qid: str) -> None:
        ep = sandbox.episode(qid, run_id="walker")
        path = list(ep.mask.path)
        answer = re.compile("|".join(rf"(?<!\w){re.escape(a)}(?!\w)" for a in gold[qid]["answers"]), re.IGNORECASE)
        first = await ep.search(gold[qid]["question"], 10)
        assert not set(first.call.returned_ids) & set(path[1:])
        assert not any(answer.search(d.text) for d in first.documents)  # no shortcut through search
        assert (await ep.visit(path[-1])).call.error  # the answer page is locked
        for i, page in enumerate(path):
            result = await ep.visit(page)
            assert result.call.error is None, (qid, page)
            served = result.documents[0]
            if i + 1 < len(path):
                assert path[i + 1] in served.links  # the next hop is visible from its predecessor
            if i < len(path) - 2:
                assert not answer.search(served.text), (qid, page)  # answer only on v_(n-1) and v_n
        assert answer.search((await ep.visit(path[-2])).documents[0].text)
        assert len(ep.trace) == 3 + len(path)

    async def all_questions() -> None:
        for qid in list(gold)[:20]:
            await walk(qid)

    asyncio.run(all_questions())


def test_open_sandbox_rejects_a_mismatched_corpus_or_non_release(demo, tmp_path: Path) -> None:
    release, opened = demo
    from aethersearch.records import Document
    from aethersearch.sandbox.episode import DictStore

    with pytest.raises(ConfigError, match="not in the store"):
        open_sandbox(release, opened.index, DictStore([Document(id="x", title="X", text="")]))
    with pytest.raises(DataError, match="not a hint-free release"):
        open_sandbox(tmp_path, opened.index, opened.store)
    with pytest.raises(ConfigError, match="not in this sandbox release"):
        open_sandbox(release, opened.index, opened.store).episode("nope")


def test_no_search_snippet_of_the_demo_release_names_a_locked_page(demo) -> None:
    """All 60 demo questions: searches that walk the chain (query = each chain page's title, then a
    visit of that page) never get a snippet naming a page still locked; the visit rendering would."""
    from aethersearch.sandbox.serving import render_page, search_hit

    release, opened = demo
    sandbox = open_sandbox(release, opened.index, opened.store)
    mentions = old_policy = searches = 0

    def locked_named(ep, docs) -> int:
        patterns = [p for page in ep.mask.masked if ep.is_locked(page) and (p := ep.mask.pattern_of(page))]
        return sum(any(p.search(d.text) for p in patterns) for d in docs)

    async def walk(qid: str) -> None:
        nonlocal mentions, old_policy, searches
        ep = sandbox.episode(qid, run_id="snippets")
        path = list(ep.mask.path)
        for page in path:
            for query in (opened.store.get(page).title, opened.store.get(path[0]).title):
                result = await ep.search(query, 10)
                searches += 1
                mentions += locked_named(ep, result.documents)
                old = [search_hit(None, render_page(ep.mask, opened.store.get(d.id)), query)
                       for d in result.documents]
                old_policy += locked_named(ep, old)
            await ep.visit(page)

    async def all_questions() -> None:
        for qid in sandbox.question_ids:
            await walk(qid)

    asyncio.run(all_questions())
    assert searches > 300 and mentions == 0
    assert old_policy > 20, old_policy
