"""Hop statements: the prose sentence on page ``v(i-1)`` that states its hop to ``v(i)``.

One job, shared by the construction (which picks a chain whose every hop has
one), the rule-based validator (which checks the statement survives on the
page *as the sandbox serves it*) and the LLM validator (which shows the
statements to the model).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aethersearch.records import Document

__all__ = ["MAX_STATEMENT_WORDS", "hop_statement", "is_prose", "mention_pattern"]

_LIST_DUMP = re.compile(r"(?:[^,;]*[,;]){4,}")  # four or more separators: a list, not a statement
_BULLET = re.compile(r"(?:^|\s)[*•]\s")  # "... Germany * Via Claudia Augusta ...": bullet items run together
#: Wikipedia-for-Schools image captions survive in the plain text as "<caption> Enlarge <caption>"
_CAPTION = re.compile(r"(?<!\w)Enlarge(?!\w)")
MAX_STATEMENT_WORDS = 45


#: navigation residue of the plain text: succession boxes ("Preceded by X Succeeded by Y"), rule lines
_NAVIGATION = re.compile(r"_{3,}|\bPreceded by\b|\bSucceeded by\b")
_INITIAL_END = re.compile(r"(?<![\w.])[A-Z]\.$")  # "... Senator Nelson W." : cut at an initial, not a sentence


def is_prose(sentence: str) -> bool:
    """A whole sentence, not a fragment or page furniture.

    Capital or digit first; ends with ``.``, ``!`` or ``?`` (headings, category
    and navigation lines of the Wikipedia-for-Schools text have no final
    punctuation) but not at an initial; balanced parentheses; no image caption,
    bullet run or succession box.
    """
    return bool(sentence) and (sentence[0].isupper() or sentence[0].isdigit()) \
        and sentence.endswith((".", "!", "?", '."', ".'", ".)")) and not _INITIAL_END.search(sentence) \
        and sentence.count("(") == sentence.count(")") and not _CAPTION.search(sentence) \
        and not _BULLET.search(sentence) and not _NAVIGATION.search(sentence)


def mention_pattern(terms: Sequence[str]) -> re.Pattern[str]:
    """Any of ``terms`` as whole words, case-insensitive (longest first, so "New York City" beats "New York")."""
    body = "|".join(re.escape(t) for t in sorted(set(terms), key=lambda t: (-len(t), t)))
    return re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE)


def hop_statement(source: Document, terms: Sequence[str], final_answers: Sequence[str] = ()) -> str | None:
    """The sentence of ``source`` that states its hop to a page mentioned as ``terms``, or None.

    The shortest prose sentence naming the target: at least 4 and at most
    :data:`MAX_STATEMENT_WORDS` words, not a list dump (``_LIST_DUMP``), not a
    fragment or image caption (:func:`is_prose`), and --
    for a hop before the last -- not naming the final answer, so its
    sub-question cannot give the question away.
    """
    target = mention_pattern(terms)
    final = mention_pattern(final_answers) if final_answers else None
    best: str | None = None
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", source.text):
        sentence = sentence.strip()
        words = len(sentence.split())
        if not target.search(sentence) or not 4 <= words <= MAX_STATEMENT_WORDS or _LIST_DUMP.match(sentence) \
                or not is_prose(sentence):
            continue
        if final is not None and final.search(sentence):
            continue
        if best is None or len(sentence) < len(best):
            best = sentence
    return best
