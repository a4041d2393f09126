"""The parametric screen runs by default with the shipped small model; memorised questions are written apart."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from aethersearch.commands.construct import model_checks
from aethersearch.construct import shipped_screen
from aethersearch.construct.hintfree import ConstructionConfig
from aethersearch.construct.page_release import build_page_release
from aethersearch.errors import ConfigError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Document
from tests.construct.test_no_false_gold import LAGOS


def test_without_an_endpoint_the_screen_is_the_shipped_model_or_a_clear_error(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    assert model_checks(None, None, None, None, None, no_screen=True) == (None, None)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == shipped_screen.SHIPPED_PACKAGE else real(name, *a))
    with pytest.raises(ConfigError, match="shipped model is not installed") as caught:
        model_checks(None, None, None, None, None)
    assert "--screen-endpoint" in str(caught.value.fix) and "--no-screen" in str(caught.value.fix)


KANO = Document(id="Kano", title="Kano", links=["Nigeria"], text="Kano is a city in Nigeria.")
# Nigeria's page names Kano too, so the chain Kano -> Nigeria -> Africa is grounded like Abuja's
PAGES = [d.model_copy(update={"text": d.text + " Kano is its second city.", "links": [*d.links, "Kano"]})
         if d.id == "Nigeria" else d for d in LAGOS] + [KANO]


def _africa(tmp_path: Path, screen: Any) -> Path:
    out = tmp_path / "rel"
    build_page_release(PAGES, out, name="t", source_dataset="t", corpus={"kind": "t"}, screen=screen,
                       memorised_out=tmp_path / "mem",
                       config=ConstructionConfig(max_answer_share=None, hop_targets={2: 1.0}))
    return out


def test_the_memorised_tier_is_a_separate_release_and_the_manifest_names_the_model(tmp_path: Path) -> None:
    def screen(questions: Any) -> dict[str, dict[str, Any]]:  # a model that remembers Abuja, not Kano
        return {q.triple.id: {"screened": True, "model": "remembers-abuja", "prediction": "Africa",
                              "exact_match": q.triple.subject == "Abuja", "cover_match": q.triple.subject == "Abuja",
                              "answered_without_search": q.triple.subject == "Abuja"} for q in questions}

    def blank(questions: Any) -> dict[str, dict[str, Any]]:
        return {q.triple.id: {"screened": True, "model": "knows-nothing", "prediction": "", "exact_match": False,
                              "cover_match": False, "answered_without_search": False} for q in questions}

    kept = _africa(tmp_path / "a", blank)
    record = json.loads((kept / "manifest.json").read_text())["construction"]["triples"]["parametric_screen"]
    assert record["model"] == "knows-nothing" and record["closed_book_accuracy_on_kept"] == 0.0
    assert record["memorised_tier"] is None and not (tmp_path / "a" / "mem").exists()
    assert len(read_jsonl(kept / "eval.jsonl")) == 2

    main = _africa(tmp_path / "b", screen)
    assert [r["question"] for r in read_jsonl(main / "eval.jsonl")] == ["In which continent is Kano?"]
    manifest = json.loads((main / "manifest.json").read_text())["construction"]
    assert manifest["rejected"]["memorised"] == 1 and manifest["tier"] == "entailing"
    assert manifest["hop_mix"]["2"]["achieved"] == 1 and manifest["hop_distribution"] == {"2": 1}  # rows written
    record = manifest["triples"]["parametric_screen"]
    assert record["closed_book_accuracy"] == 0.5 and record["closed_book_accuracy_on_kept"] == 0.0
    assert record["model"] == "remembers-abuja" and record["memorised_tier"] == "mem"
    apart = tmp_path / "b" / "mem"
    assert [r["question"] for r in read_jsonl(apart / "eval.jsonl")] == ["In which continent is Abuja?"]
    assert json.loads((apart / "manifest.json").read_text())["construction"]["tier"] == "memorised"


@pytest.mark.realmodel
def test_the_shipped_model_serves_a_screen_on_loopback() -> None:
    from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree
    from aethersearch.construct.llm_checks import parametric_screen
    from aethersearch.construct.typed_facts import TypedGraph, extract_facts, fact_seeds
    from aethersearch.corpus.graph import LinkGraph
    from tests.realmodel.conftest import installed_gguf

    installed_gguf()  # skips with the installer's reason when the model is not there
    facts = extract_facts(LAGOS)
    typed = TypedGraph(facts.facts)
    pages = {d.id: d for d in LAGOS}
    seeds = fact_seeds(typed, facts, pages, source="t", max_hops=3).seeds
    built = construct_hintfree(seeds, LinkGraph.from_documents(LAGOS), pages, typed=typed,
                               config=ConstructionConfig(keep_detours=True))
    questions = [*built.questions, *built.detours]
    assert questions
    with shipped_screen.serve_shipped(shipped_screen.shipped_gguf()) as url:
        records = parametric_screen(questions, url, shipped_screen.SHIPPED_MODEL, timeout_s=120)
    assert set(records) == {q.triple.id for q in questions}
    assert all(r["screened"] and r["model"] == "SmolLM2-135M-Instruct" and isinstance(r["prediction"], str)
               for r in records.values())
