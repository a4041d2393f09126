"""Property tests of the card's question key, as the builder uses it for exclusion and dedup."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from aethersearch.text import question_key, template_key

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
words = st.lists(st.text(alphabet="abcXYZéÅ'-,", min_size=1, max_size=8), min_size=1, max_size=6)
gaps = st.sampled_from([" ", "  ", "\t", "\n", " \u3000 ", "\u00a0"])


@given(texts)
def test_key_never_ends_in_a_question_mark_or_whitespace_left_by_strip(text: str) -> None:
    key = question_key(text)
    assert not key.endswith(("?", "？"))
    assert key == key.lstrip()
    assert "  " not in key and "\t" not in key and "\n" not in key


@given(words, gaps)
def test_case_and_whitespace_variants_share_one_key(parts: list[str], gap: str) -> None:
    plain = " ".join(parts)
    variant = gap + gap.join(p.upper() for p in parts) + "?" + gap
    assert question_key(variant) == question_key(plain)


@given(words, st.sampled_from(["?", "？", "??", "?？?"]))
def test_all_trailing_marks_of_either_width_are_removed(parts: list[str], marks: str) -> None:
    plain = " ".join(parts)
    assert question_key(plain + marks) == question_key(plain)


@given(words)
def test_whitespace_before_a_removed_mark_stays_as_the_card_specifies(parts: list[str]) -> None:
    plain = " ".join(parts)
    assert question_key(plain + " ?") == question_key(plain) + " "


@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40))
def test_fullwidth_forms_fold_to_ascii(text: str) -> None:
    wide = "".join(chr(ord(ch) + 0xFEE0) for ch in text)
    assert question_key(wide) == question_key(text)


@given(texts)
def test_key_is_a_pure_function(text: str) -> None:
    assert question_key(text) == question_key(str(text))


@given(words, st.sampled_from([",", ".", "'", '"', "-", "“", "”", ";"]))
def test_template_key_ignores_punctuation_and_spacing(parts: list[str], mark: str) -> None:
    plain = " ".join(parts)
    assume(plain.strip())
    assert template_key((" " + mark).join(parts) + mark) == template_key(plain)
    assert template_key(template_key(plain)) == template_key(plain)
