"""The observation-cut tokenizer: the fast cut equals a token-by-token reference cut."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aethersearch.agents.tokenizers import RegexTokenizer, get_tokenizer
from aethersearch.errors import ConfigError

TOKEN = re.compile(r"\w+|[^\w\s]")


def reference_cut(text: str, n: int) -> str:
    tokens = list(TOKEN.finditer(text))
    return text if len(tokens) <= n else text[: tokens[n - 1].end()]


@given(text=st.text(alphabet=st.sampled_from(list("ab1 ,.<>\n\té")), max_size=60), n=st.integers(1, 15))
def test_truncate_matches_the_reference(text: str, n: int) -> None:
    tokenizer = RegexTokenizer()
    cut = tokenizer.truncate(text, n)
    assert cut == reference_cut(text, n)
    assert tokenizer.count(cut) == min(n, tokenizer.count(text))


def test_unknown_tokenizer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown tokenizer"):
        get_tokenizer("sentencepiece")


def test_long_observations_shorter_than_the_limit_come_back_unchanged() -> None:
    # regression: a backtracking pattern made this case exponential (a hang, not an error)
    tokenizer = RegexTokenizer()
    short = " ".join(["passage"] * 400)
    assert tokenizer.truncate(short, 500) == short
    long = " ".join(["passage"] * 3000)
    assert tokenizer.count(tokenizer.truncate(long, 500)) == 500


@given(text=st.text(alphabet=st.sampled_from(list("ab1 ,.<>\n\té")), max_size=60), n=st.integers(0, 15))
def test_local_cut_counts_once_and_cuts_like_the_tokenizer(text: str, n: int) -> None:
    """LocalCut skips the cut scan when the count is within ``n``; the result must not change."""
    import asyncio

    from aethersearch.agents.tokenizers import LocalCut

    tokenizer = RegexTokenizer()
    assert asyncio.run(LocalCut(tokenizer).truncate(text, n)) == (tokenizer.truncate(text, n),
                                                                   len(TOKEN.findall(text)))


@given(text=st.text(max_size=80) | st.text(alphabet=st.sampled_from(list("ab_1 ,.\t\n\x1c\x85\xa0é—٣ǅ\u2028")),
                                          max_size=60))
def test_count_equals_the_regex_count(text: str) -> None:
    """The class-translation count is the regex's token count for any text (non-ASCII, odd spaces)."""
    assert RegexTokenizer().count(text) == len(TOKEN.findall(text))


def test_count_handles_surrogates_and_long_texts() -> None:
    text = "Doc 1(Title: \"Zoë\") naïve – “quoted” \ud800 x\x1fy " * 200
    assert RegexTokenizer().count(text) == len(TOKEN.findall(text))
