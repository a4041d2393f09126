"""Question keys and answer normalisers.

``question_key`` is the benchmark card's normalisation, used for every exclusion,
de-duplication and replay comparison: Unicode NFKC, casefold, whitespace collapse,
strip, then removal of all trailing ASCII ``?`` / full-width ``？`` (exactly that
order: whitespace left before a removed mark stays, as the card specifies).

``normalize_answer`` is Search-R1's / SQuAD v1.1's answer normalisation:
lower-case, delete ASCII punctuation, remove the articles a/an/the, collapse
whitespace. Both are pure and deterministic.
"""

from __future__ import annotations

import re
import string
import unicodedata

__all__ = [
    "collapse_whitespace",
    "normalize_answer",
    "question_key",
    "template_key",
    "template_key_of_key",
]

_WS = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def question_key(question: str) -> str:
    """The card's normalised question key.

    NFKC -> casefold -> collapse whitespace -> strip -> drop every trailing ``?``/``？``.
    """
    text = unicodedata.normalize("NFKC", question).casefold()
    text = _WS.sub(" ", text).strip()
    # NFKC already maps U+FF1F to '?', but keep the full-width mark explicit.
    return text.rstrip("?\uff1f")


def template_key(question: str) -> str:
    """A conservative punctuation/whitespace-free equivalent of ``question_key``.

    Two questions with the same template key differ only in punctuation or
    spacing ("Who wrote 'Hamlet'?" vs "who wrote hamlet"), so one is an
    equivalent of the other for exclusion purposes.
    """
    return template_key_of_key(question_key(question))


def template_key_of_key(key: str) -> str:
    """``template_key`` from an already computed ``question_key`` (saves re-normalising)."""
    return _NON_WORD.sub("", key)


def normalize_answer(text: str) -> str:
    """Search-R1 ``qa_em`` / SQuAD v1.1 normalisation (lower, punct, articles, whitespace)."""
    text = text.lower()
    text = text.translate(_PUNCT_TABLE)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def collapse_whitespace(text: str) -> str:
    """Collapse runs of whitespace to one space and strip."""
    return _WS.sub(" ", text).strip()
