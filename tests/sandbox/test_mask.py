"""The mask policy: locking by predecessor, and masked mentions visible only from the predecessor page."""

from __future__ import annotations

import pytest

from aethersearch.errors import DataError
from aethersearch.sandbox.mask import (
    ChainMask,
    _term_pattern,
    drop_sentences,
    split_sentences,
)
from tests.sandbox.conftest import PAGES, make_masks

DOCS = {doc.id: doc for doc in PAGES}


def test_a_chain_node_unlocks_only_after_its_predecessor_is_visited() -> None:
    mask = make_masks()["q1"]
    assert mask.masked == ("chad", "nicole", "graham")
    assert mask.is_locked("chad", set()) and not mask.is_locked("chad", {"kane"})
    assert mask.is_locked("graham", {"kane", "chad"}) and not mask.is_locked("graham", {"nicole"})
    assert not mask.is_locked("kane", set()) and not mask.is_locked("adelaide", set())


def test_subject_page_is_served_without_the_direct_evidence_and_link() -> None:
    served = make_masks()["q1"].render(DOCS["kane"])
    assert "Graham" not in served.text and "graham" not in served.links  # direct link v0 -> vn withheld
    assert "His brother is Chad Cornes." in served.text and "chad" in served.links  # v1 visible from v0
    assert "Kane Cornes is an Australian rules footballer." in served.text


def test_masked_mentions_are_visible_only_from_the_predecessor_page() -> None:
    mask = make_masks()["q1"]
    assert "Nicole Cornes" in mask.render(DOCS["chad"]).text  # chad is nicole's predecessor
    assert "Graham Cornes" in mask.render(DOCS["nicole"]).text  # nicole is graham's predecessor
    served = mask.render(DOCS["glenelg"])  # an off-chain page mentioning the answer
    assert "Graham" not in served.text and "graham" not in served.links and "Kane Cornes" in served.text
    adelaide = mask.render(DOCS["adelaide"])
    assert "Nicole" not in adelaide.text and "nicole" not in adelaide.links
    assert mask.render(DOCS["graham"]).title == "Graham Cornes"  # a page never hides its own name


def test_sentence_dropping_keeps_everything_else_byte_for_byte() -> None:
    text = "Paris is the capital of France. It lies on the Seine!\nCountry France\nPopulation 2.1 million"
    assert "".join(split_sentences(text)) == text
    assert drop_sentences(text, _term_pattern(["france"])) == " It lies on the Seine!\nPopulation 2.1 million"
    assert drop_sentences("Frances and Francesca.", _term_pattern(["France"])) == "Frances and Francesca."


def test_mask_round_trips_and_rejects_bad_input() -> None:
    mask = make_masks()["q2"]
    again = ChainMask.from_json(mask.to_json())
    assert again.path == mask.path and again.hidden_terms == mask.hidden_terms
    with pytest.raises(DataError, match="diag.jsonl:3.*invalid chain mask"):
        ChainMask.from_json({"path": ["a"]}, origin="diag.jsonl", line=3)
    with pytest.raises(ValueError, match="two hops"):
        ChainMask(["a", "b"], {"b": ["B"]})
