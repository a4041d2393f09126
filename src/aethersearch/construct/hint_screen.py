"""The hint screen: does a seed question hint its path or fingerprint its answer?

WebDetective's questions are *hint-free*: they carry the minimal information
need ("Who is the father of Kane Cornes?") and neither of the two hints the
paper names. This module checks both, on every seed whatever its source, and
its record goes into each release row (``extra.hint_screen``):

* **Path narration** (:func:`narrated_pages`): the question names -- by title
  or by an alias the mask hides -- a page of the chosen chain other than
  ``v0`` (the answer page ``vn`` is rejected as ``answer_in_question``) ("To what country does the island of Leyte belong, known for the
  Battle of Leyte Gulf in WW2?" over the chain Battle of Leyte Gulf -> World
  War II -> Philippines names World War II's neighbour). The construction
  skips every equal shortest path the question narrates and rejects the seed
  (``path_narration``) when none is left.
* **Specification hints** (:func:`specification`): attribute clauses beyond
  the subject that fingerprint the answer. The score counts *cues*, each
  occurrence once:

  - ``number``: a number or year ("275,524", "1920");
  - ``date``: a month name ("born on 4 July");
  - ``relative_clause``: "who", "which", "that", "whose" or "where" after a
    comma or a word other than a preposition ("... what city that is the
    capital ..." counts, "In which country is ..." asks and does not);
  - ``known_for``: "known for/as", "famous for/as", "best known",
    "nicknamed", "also called";
  - ``superlative``: "largest", "first", "youngest", ... (``-est`` forms and
    first/last/only);
  - ``apposition``: each comma inside the question (a clause set off by
    commas: "Which student of Socrates, and teacher of Aristotle, wrote ...");
  - ``participle``: a participial phrase modifying a noun ("the realm
    *based on* Norse mythology", "bird *found in* Mauritius", "country,
    *located in* the Indian Ocean"): a participle of :data:`PARTICIPLES`
    before a preposition, unless an auxiliary, a relative or a question word
    comes right before it ("is followed in" asks; "that started as" is
    already a relative clause);
  - ``coordinated_clause``: "and"/"but" followed by a second predicate
    ("... series that started as an anthology *and introduced* the realm",
    "originates in the Taurus Mountains, *and flows* through Syria"): a
    clue cluster chains descriptions one after another.

  Clue clusters ("What superhero is followed in the American comic book
  series that started as a horror comics anthology and introduced the
  fictional realm based on Norse mythology?": relative clause, coordinated
  clause, participle) score one per descriptive clause, so they fail.

  A seed whose score reaches :data:`SPECIFICATION_THRESHOLD` (2) is rejected
  as ``specification_hint``: one attribute ("Which US president won the Nobel
  Peace Prize in 1920?") is still a question, two or more begin to describe
  the answer instead of asking for it. The threshold is this project's
  convention (the paper gives no number); it rejects all three of the
  fingerprinted seeds the issue quotes and none of the minimal-need ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from aethersearch.construct.statements import mention_pattern

__all__ = ["PARTICIPLES", "SPECIFICATION_THRESHOLD", "Specification", "narrated_pages", "screen_record",
    "specification"]

SPECIFICATION_THRESHOLD = 2

_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("number", re.compile(r"(?<![\w])\d+(?:[,.]\d+)*(?![\w])")),
    ("date", re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|October|November|"
                        r"December)\b")),
    # after a word that is not a preposition ("In which country" asks; "what city that is" describes)
    ("relative_clause", re.compile(r"(?:,|\b(?!(?:in|on|at|to|of|for|from|by|with|into|about)\b)[A-Za-z]+)"
                                   r"\s+(?:who|which|that|whose|where)\b", re.IGNORECASE)),
    ("known_for", re.compile(r"\b(?:(?:well |best )?known (?:for|as)|famous (?:for|as)|best known|nicknamed|"
                             r"also called)\b", re.IGNORECASE)),
    ("superlative", re.compile(r"\b(?:largest|biggest|smallest|highest|tallest|longest|oldest|youngest|"
                               r"earliest|latest|first|last|only|most|least|greatest|best|worst)\b",
                               re.IGNORECASE)),
    ("apposition", re.compile(r",(?!\d)")),
    # lower case only: "and flows through", not "and Kansas"
    ("coordinated_clause", re.compile(r"\b(?:and|but)\s+(?:also\s+)?(?:[a-z]+ed|[a-z]{3,}s)\s+"
                                      r"(?:the|a|an|his|her|its|their|in|on|at|by|through|into|from|to|as|with|"
                                      r"for|over|across)\b")),
)
#: participles that open a descriptive phrase before a preposition ("based on", "located in")
PARTICIPLES = ("based", "located", "situated", "set", "named", "known", "called", "founded", "born", "built",
               "made", "found", "written", "published", "released", "introduced", "created", "produced",
               "directed", "started", "lying", "bordering", "following", "featuring", "starring", "including",
               "consisting", "famed", "noted", "awarded", "elected", "appointed", "buried", "held")
_PARTICIPLE = re.compile(r"(?:(?P<prev>[\w']+)\s+|(?P<comma>,)\s*)?\b(?P<part>" + "|".join(PARTICIPLES)
                         + r")\s+(?:in|on|at|by|as|from|after|for|with|into|under|between|near|to|during)\b",
                         re.IGNORECASE)
#: words after which a participle is the question's own verb or already counted ("is followed in", "that started")
_NOT_A_MODIFIER = frozenset(("is", "was", "were", "are", "be", "been", "being", "has", "have", "had", "get", "got",
                             "gets", "that", "which", "who", "whom", "what", "where", "when", "did", "does", "do",
                             "not", "also", "first", "originally", "once", "later"))


class Specification(NamedTuple):
    """The specification score of a question and the cues that make it up."""

    score: int
    cues: list[str]


def specification(question: str, subject_terms: Sequence[str] = ()) -> Specification:
    """Count the attribute cues of ``question`` (see the module docstring); the subject's own name is skipped.

    The subject's title is blanked first, so "Abuja" or "2001: A Space
    Odyssey" as the subject never counts as a number or a comma.
    """
    text = question
    if subject_terms:
        text = mention_pattern(subject_terms).sub("X", text)
    cues: list[str] = []
    for name, pattern in _CUES:
        cues.extend(f"{name}: {m.group(0).strip()}" for m in pattern.finditer(text))
    cues.extend(f"participle: {m.group('part')}" for m in _PARTICIPLE.finditer(text)
                if (m.group("prev") or "").casefold() not in _NOT_A_MODIFIER)
    return Specification(len(cues), cues)


def narrated_pages(question: str, path: Sequence[str], terms: Mapping[str, Sequence[str]]) -> list[str]:
    """The intermediate pages ``v1..v(n-1)`` the question names by one of its ``terms`` (title, aliases).

    The answer page ``vn`` named in the question is the rule-based validator's
    own, more specific rejection (``answer_in_question``).
    """
    return [page for page in path[1:-1] if terms.get(page) and mention_pattern(terms[page]).search(question)]


def screen_record(spec: Specification, *, narrated_skipped: int, path_narration: bool) -> dict[str, Any]:
    """The row's ``extra.hint_screen``: the verdict, the score with its cues and threshold, narration checks."""
    fingerprint = spec.score >= SPECIFICATION_THRESHOLD
    return {"passed": not fingerprint and not path_narration,
            "path_narration": path_narration,
            "narrated_paths_skipped": narrated_skipped,
            "specification_score": spec.score, "specification_cues": spec.cues,
            "specification_threshold": SPECIFICATION_THRESHOLD,
            "rule": "path narration: the question names a chain page after v0 (title or hidden alias); "
                    f"fingerprint: specification score >= {SPECIFICATION_THRESHOLD} "
                    "(construct/hint_screen.py)"}
