"""The page-text tidy step gives what the whole-text regexes it replaced gave, on any text.

The tidy step runs on every article of a dump, so it was rewritten for speed (conditional steps,
``str.strip`` per line). A user relies on the page text, and so on every hop statement and content hash
built from it, staying the same: this property test holds the rewrite to the original definition.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.corpus.wikitext import _tidy

_HEADING = re.compile(r"^(={1,6})\s*(.*?)\s*\1\s*$", re.MULTILINE)
_LINE_EDGES = re.compile(r"[^\S\n]+\n[^\S\n]*|\n[^\S\n]+")
_BLANK_RUN = re.compile(r"\n{3,}")
_SPACES = re.compile(r"[\t\u00a0][ \t\u00a0]*| [ \t\u00a0]+")


def reference_tidy(text: str) -> str:
    """The definition: four whole-text substitutions, then strip."""
    text = _SPACES.sub(" ", _HEADING.sub(lambda m: m.group(2), text))
    return _BLANK_RUN.sub("\n\n", _LINE_EDGES.sub("\n", text)).strip()


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab=  \t\n\n\u00a0\u2009\r\x0b\u3000.")), max_size=80))
def test_tidy_equals_the_regex_definition(text: str) -> None:
    assert _tidy(text) == reference_tidy(text)


def test_tidy_examples() -> None:
    assert _tidy("== History ==\n  Founded  in\t1976. \n\n\n\nNext") == "History\nFounded in 1976.\n\nNext"
