"""A hand-made six-page corpus (the paper's Kane Cornes example) with two chain masks and a real BM25 index."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.records import Document
from aethersearch.sandbox.episode import Sandbox
from aethersearch.sandbox.mask import ChainMask

PAGES = [
    Document(id="kane", title="Kane Cornes", links=["chad", "graham", "glenelg"],
             text="Kane Cornes is an Australian rules footballer. Kane Cornes is the son of Graham Cornes. "
                  "His brother is Chad Cornes. He played for Glenelg."),
    Document(id="chad", title="Chad Cornes", links=["nicole", "kane"],
             text="Chad Cornes is a former footballer. His stepmother is Nicole Cornes. He is the brother of Kane Cornes."),
    Document(id="nicole", title="Nicole Cornes", links=["graham", "adelaide"],
             text="Nicole Cornes is a media personality from Adelaide. Her husband is Graham Cornes."),
    Document(id="graham", title="Graham Cornes", links=["kane", "chad", "nicole"],
             text="Graham Cornes is a football coach. He is the father of Kane Cornes and Chad Cornes. "
                  "He married Nicole Cornes."),
    Document(id="glenelg", title="Glenelg Football Club", links=["kane", "graham", "adelaide"],
             text="Glenelg Football Club is based in Adelaide. Its players included Kane Cornes. "
                  "Graham Cornes coached the club."),
    Document(id="adelaide", title="Adelaide", links=["nicole", "glenelg"],
             text="Adelaide is a city in South Australia. Nicole Cornes is a well known resident. "
                  "Glenelg Football Club plays there."),
]
TITLES = {doc.id: doc.title for doc in PAGES}
# Q1 is the paper's example: who is the father of Kane Cornes? kane -> chad -> nicole -> graham.
# Q2 shares masked pages with Q1 but unlocks them from elsewhere: adelaide -> nicole -> graham.
CHAINS = {"q1": ["kane", "chad", "nicole", "graham"], "q2": ["adelaide", "nicole", "graham"]}


def make_masks() -> dict[str, ChainMask]:
    return {qid: ChainMask(path, {p: [TITLES[p]] for p in path[1:]}) for qid, path in CHAINS.items()}


@pytest.fixture(scope="session")
def mini_index(tmp_path_factory: pytest.TempPathFactory):
    """A real bm25 index (issue-4 backend) over the six pages."""
    from aethersearch.corpus.store import build_store
    from aethersearch.search.index_dir import build_index

    root: Path = tmp_path_factory.mktemp("sandbox_corpus")
    store = build_store(PAGES, root / "store")
    return build_index(store, "bm25", root / "index")


@pytest.fixture()
def mini_sandbox(mini_index) -> Sandbox:
    return Sandbox(make_masks(), mini_index.index, mini_index.store, release_id="mini")
