"""Hint-free construction: every emitted path is a shortest path once the direct link is removed.

Paths are checked independently of ``LinkGraph``: the test builds its own
scipy matrix from the pages' links, deletes v0 -> vn, and runs
``scipy.sparse.csgraph.shortest_path``.
"""

from __future__ import annotations

import re
import subprocess
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from aethersearch.construct.build import build_demo_release
from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree
from aethersearch.construct.triples import QATriple
from aethersearch.construct.validate import Candidate, RuleBasedValidator, Verdict
from aethersearch.corpus.demo_world import generate_world
from aethersearch.corpus.graph import LinkGraph
from aethersearch.errors import ConfigError
from aethersearch.jsonl import loads, read_jsonl, read_records
from aethersearch.records import DiagnosticsRow, Document, EvalRow
from aethersearch.release.verify import verify_release
from aethersearch.sandbox.mask import ChainMask


def _check_release(release: Path, documents: list[Document], min_hops: int, max_hops: int) -> list[DiagnosticsRow]:
    ids = [d.id for d in documents]
    index = {page: i for i, page in enumerate(ids)}
    rows = [(index[d.id], index[t]) for d in documents for t in d.links if t in index and t != d.id]
    matrix = sp.coo_array((np.ones(len(rows)), tuple(np.array(rows).T)), shape=(len(ids), len(ids))).tocsr()
    matrix.sum_duplicates()
    pages = {d.id: d for d in documents}

    eval_rows = read_records(release / "eval.jsonl", EvalRow)
    diagnostics = read_records(release / "diagnostics.jsonl", DiagnosticsRow)
    assert [r.id for r in eval_rows] == [d.id for d in diagnostics]
    assert read_jsonl(release / "rollout_questions.jsonl") == [{"id": r.id, "question": r.question} for r in eval_rows]
    for row, diag in zip(eval_rows, diagnostics, strict=True):
        path = diag.path
        v0, vn = index[path[0]], index[path[-1]]
        if diag.extra["direct_link"] is not None:  # None: a typed chain built where v0 never linked vn
            assert matrix[v0, vn], "the triple's direct link exists in the original graph"
        reduced = matrix.tolil()
        reduced[v0, vn] = 0
        reduced = sp.csr_array(reduced)
        reduced.eliminate_zeros()
        dist = shortest_path(reduced, unweighted=True, indices=v0)
        # the chain is a shortest path without the direct link, or -- when its hops are typed and entail the
        # answer by composition -- the shortest such entailing path, which may be longer than the shortest detour
        entailment = diag.extra["chain_entailment"]
        assert entailment["entailing"] and diag.extra["hint_screen"]["passed"]
        if entailment["validator"] == "relation-composition":
            assert diag.hops == len(path) - 1 >= int(dist[vn])
        else:
            assert diag.hops == len(path) - 1 == int(dist[vn]), "the path is a shortest path without the direct link"
        assert min_hops <= diag.hops <= max_hops
        for candidate in [path, *diag.alternative_paths]:
            assert len(candidate) == len(path) and candidate[0] == path[0] and candidate[-1] == path[-1]
            assert all(reduced[index[a], index[b]] for a, b in pairwise(candidate))
        assert diag.evidence == path[:-1] and len(diag.hop_questions) == diag.hops  # one item per hop
        assert [h["page"] for h in diag.hop_questions] == path[:-1]
        # No direct link remains where the agent looks: v0 is served without vn's link and answer.
        mask = ChainMask.from_json(diag.extra["mask"])
        served = mask.render(pages[path[0]])
        assert path[-1] not in served.links
        for alias in row.answers:
            assert not re.search(rf"(?<!\w){re.escape(alias)}(?!\w)", served.text, re.IGNORECASE)
        # Hint-free: the question names no page of the chain after v0.
        for page in path[1:]:
            assert pages[page].title.casefold() not in row.question.casefold()
    return diagnostics


def test_demo_world_release_paths_are_shortest_paths_with_the_direct_link_removed(tmp_path: Path) -> None:
    config = ConstructionConfig(max_questions=40, min_hops=2, max_hops=4)
    built = build_demo_release(tmp_path / "rel", seed=0, config=config)
    world = generate_world(seed=0)
    diagnostics = _check_release(built.path, world.documents, 2, 4)
    assert len(diagnostics) == 40 and sum(built.result.hop_distribution.values()) == 40
    assert set(built.result.hop_distribution) <= {2, 3, 4} and len(built.result.hop_distribution) >= 2
    assert built.result.rejected["too_long"] > 0  # the range is enforced, not just observed
    eval_rows = read_records(built.path / "eval.jsonl", EvalRow)
    assert eval_rows[0].id == "webdetective_demo_0001" and eval_rows[0].source_dataset == "webdetective-demo"
    facts = {f.id: f for f in world.facts}
    for row in eval_rows:  # the question is exactly the single-hop fact question: the minimal information need
        assert row.question == facts[row.source_id].question and row.answers == facts[row.source_id].answers
    check = subprocess.run(["sha256sum", "-c", "checksums.sha256"], cwd=built.path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_demo_release_is_byte_identical_across_builds(tmp_path: Path) -> None:
    config = ConstructionConfig(max_questions=15)
    a = build_demo_release(tmp_path / "a", config=config).path
    b = build_demo_release(tmp_path / "b", config=config).path
    for name in ("eval.jsonl", "rollout_questions.jsonl", "diagnostics.jsonl", "manifest.json", "checksums.sha256"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    with pytest.raises(ConfigError, match="not empty"):
        build_demo_release(a, config=config)


def _tiny() -> tuple[list[Document], LinkGraph]:
    docs = [
        Document(id="s", title="Sorel", text="Sorel was born in Tarn. Sorel studied at Vey Institute.", links=["t", "v"]),
        Document(id="v", title="Vey Institute", text="Vey Institute is based in Tarn. Sorel was a student.",
                 links=["t", "s"]),
        Document(id="t", title="Tarn", text="Tarn is a city.", links=[]),
        Document(id="x", title="Tarn Stadium", text="A stadium.", links=[]),
    ]
    return docs, LinkGraph.from_documents(docs)


def _triple(**kw: object) -> QATriple:
    base = dict(id="t1", question="Where was Sorel born?", answers=["Tarn"], subject="s", answer_page="t",
                relation="born_in", source_dataset="x", source_split="x", source_id="x", source_row_number=1,
                source_file="x")
    return QATriple(**{**base, **kw})


def test_rule_based_validator_rejects_answers_visible_without_the_chain() -> None:
    docs, graph = _tiny()
    pages = {d.id: d for d in docs}
    result = construct_hintfree([_triple()], graph, pages)
    assert result.questions == [] and result.rejected == {"answer_reachable_without_chain": 1}  # "Tarn Stadium"
    del pages["x"]
    graph = LinkGraph.from_documents(pages.values())
    built = construct_hintfree([_triple()], graph, pages, config=ConstructionConfig(keep_detours=True))
    # "Sorel studied at Vey Institute" does not entail where Sorel was born: the chain is a detour, kept apart
    assert built.questions == [] and built.rejected == {"not_entailing": 1}
    accepted = built.detours
    assert [q.path for q in accepted] == [["s", "v", "t"]]
    assert accepted[0].chain_entailment["entailing"] is False and accepted[0].hint_screen["passed"]
    assert accepted[0].hop_questions[0]["kind"] == "cloze" and accepted[0].hop_questions[0]["answers"] == ["Vey Institute"]
    leaky = construct_hintfree([_triple(question="Where in Tarn was Sorel born?")], graph, pages)
    assert leaky.rejected == {"answer_in_question": 1}


def test_custom_validator_plugs_in_and_its_reasons_are_counted() -> None:
    docs, graph = _tiny()
    pages = {d.id: d for d in docs if d.id != "x"}
    graph = LinkGraph.from_documents(pages.values())

    class Picky:
        name = "picky"

        def validate(self, candidate: Candidate) -> Verdict:
            return Verdict(False, "llm_says_shortcut", f"{candidate.path}")

    result = construct_hintfree([_triple()], graph, pages, validators=[RuleBasedValidator(pages), Picky()])
    assert result.rejected == {"llm_says_shortcut": 1} and result.validators == ["rule-based", "picky"]
    none_left = construct_hintfree([_triple(answer_page="v", answers=["Vey Institute"], question="Where did Sorel study?")],
                                   graph, pages, config=ConstructionConfig(min_hops=3, max_hops=4))
    assert none_left.rejected == {"no_alternative_path": 1}


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.timeout(1500)  # typed facts of 4,604 pages and the validator's corpus index: minutes on 2 shared cores
def test_real_wikispeedia_fact_seed_release_entails_and_names_no_chain_page(tmp_path: Path,
                                                                            wikispeedia_documents: list) -> None:
    """The shared construction path on real Wikispeedia pages, fact seeds only (minutes, not the full build)."""
    from aethersearch.construct.page_release import build_page_release

    documents = wikispeedia_documents
    config = ConstructionConfig(max_questions=12, min_hops=2, max_hops=4)
    built = build_page_release(documents, tmp_path / "wsp", name="webdetective_wikispeedia",
                               source_dataset="wikispeedia", corpus={"kind": "wikispeedia"}, config=config,
                               detours_out=tmp_path / "wsp-detours")
    diagnostics = _check_release(built.path, documents, 2, 4)
    rows = read_records(built.path / "eval.jsonl", EvalRow)
    assert 3 <= len(rows) <= 12 and all(r.source_dataset == "wikispeedia-page-facts" for r in rows)
    report = verify_release(built.path)
    assert report.ok, [check.line() for check in report.failures]
    by_id = {d.id: d for d in documents}
    for row, diag in zip(rows, diagnostics, strict=True):
        entailment = diag.extra["chain_entailment"]
        assert entailment["validator"] == "relation-composition" and all(entailment["hop_relations"])
        assert diag.extra["hint_screen"]["specification_score"] < 2
        for page in diag.path[1:]:  # no chain page, nor any alias the mask hides, is named by the question
            assert not any(re.search(rf"(?<!\w){re.escape(t)}(?!\w)", row.question, re.IGNORECASE)
                           for t in ChainMask.from_json(diag.extra["mask"]).hidden_terms[page])
        for hop, (a, b) in zip(diag.hop_questions, pairwise(diag.path), strict=True):
            assert hop["statement"] in ChainMask.from_json(diag.extra["mask"]).render(by_id[a]).text
            assert (hop["page"], hop["target"]) == (a, b)
    construction = loads((built.path / "manifest.json").read_bytes())["construction"]
    assert construction["tier"] == "entailing" and construction["rejected"]["not_entailing"] > 0
    detours = loads((tmp_path / "wsp-detours" / "manifest.json").read_bytes())
    assert detours["construction"]["tier"] == "detour" and detours["name"] == "webdetective_wikispeedia_detours"
    assert all(not r.extra["chain_entailment"]["entailing"]
               for r in read_records(tmp_path / "wsp-detours" / "diagnostics.jsonl", DiagnosticsRow))
