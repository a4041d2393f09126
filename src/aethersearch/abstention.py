"""The one definition of an abstention ("I don't know"), shared by the agents and the scorer.

Why one module at the base layer: an agent labels its own final answer
``abstained`` or ``answered`` while it runs, and the scorer labels it again
when it scores; if the two used different rules (they did: the agent called
"N/A" and "Unknown Pleasures" refusals, the scorer did not) a trace would
carry one outcome and ``scores.json`` another. This module reads no gold, so
``agents/`` may import it.

The rule has two parts, and only the first lives here:

1. **Shape** (:func:`is_abstention`, no gold): the whole answer is a stock
   refusal ("unknown", "N/A", "no answer", "cannot be determined"), or it
   *starts* with a refusal sentence: a first-person statement of not knowing
   ("I don't know ...", "I cannot answer ...", "I'm not sure ..."), "not enough
   information ..." or "the documents do not mention ...".
   Anything else is an answer: "Unknown Pleasures", "Don't Know Why" and "Na"
   (sodium) are answers by shape. Matching is on a light normalisation
   (NFKC, casefold, curly quotes made straight, whitespace collapsed, outer
   quotes and final ``.!`` dropped) rather than on the SQuAD normalisation,
   which would merge "N/A" with "Na".
2. **Gold wins** (the scorer, ``scoring/extract.py``): an extracted answer
   that scores Search-R1 EM 1 against any gold alias is an answer, always.
   Real golds look like refusals ("Unknown", "I Can't Tell You Why",
   ``I Cannot Say "Farewell"``), so a shape rule alone would eat correct
   answers. The agent cannot apply this part (it never sees gold), so an
   agent's ``abstained`` label is provisional and the scorer settles it.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["ABSTENTION_RULE", "abstention_key", "is_abstention"]

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"', "`": "'"})
_WS = re.compile(r"\s+")

_NEG = r"(?:do\s+not|don'?t|does\s+not|doesn'?t|cannot|can'?t|can\s+not|could\s+not|couldn'?t|am\s+unable\s+to|" \
       r"'?m\s+unable\s+to|am\s+not\s+able\s+to|'?m\s+not\s+able\s+to|have\s+no\s+way\s+to)"
_VERB = r"(?:know|answer|determine|find|say|tell|confirm|verify|provide|identify|be\s+sure|be\s+certain)"

# Whole-answer refusals: the entire (lightly normalised) answer must be one of these.
_WHOLE = re.compile(
    r"(?:the\s+answer\s+is\s+)?(?:unknown|not\s+known|unanswerable|n/a|no\s+answer(?:\s+found)?|none\s+found|"
    r"no\s+idea|not\s+sure|unsure|uncertain|unclear|not\s+available|"
    r"(?:there\s+is\s+)?(?:insufficient|not\s+enough|no)\s+(?:information|evidence|data)(?:\s+(?:available|found))?|"
    r"information\s+not\s+(?:available|found|provided)|"
    r"(?:it\s+)?(?:cannot|can'?t|can\s+not)\s+be\s+(?:determined|answered|found|known)|"
    r"(?:do\s+not|don'?t)\s+know|(?:cannot|can'?t)\s+(?:answer|determine|tell|say))"
)

# Refusal sentences: the answer *starts* with "I <negation> <verb>", "not enough information",
# or "the documents do not mention" (whatever follows).
_FIRST_PERSON = re.compile(
    rf"(?:i\s*{_NEG}\s+{_VERB}\b|i'?m\s+not\s+(?:sure|certain)\b|i\s+am\s+not\s+(?:sure|certain)\b|"
    rf"i\s+have\s+no\s+(?:idea|information|way)\b|(?:i'?m\s+|i\s+am\s+)?sorry,?\s+(?:but\s+)?i\s*{_NEG}\s+{_VERB}\b|"
    r"i\s*(?:do\s+not|don'?t)\s+have\s+(?:enough|sufficient|any|the\s+(?:necessary|required))\s+"
    r"(?:information|evidence|data|context|knowledge)\b|"
    r"(?:there\s+is\s+)?(?:insufficient|not\s+enough)\s+(?:information|evidence|data|context)\b|"
    r"(?:the\s+)?(?:provided\s+|given\s+|retrieved\s+)?(?:documents?|context|passages?|information|evidence|"
    r"search\s+results?)\s+(?:do|does)\s*(?:not|n't)\s+(?:contain|mention|provide|say|specify|state|include)\b)"
)

ABSTENTION_RULE = (
    "An extracted answer that scores Search-R1 EM 1 against any gold alias is an answer, always. "
    "Otherwise it is an abstention when the whole answer is a stock refusal (unknown, N/A, no answer, "
    "cannot be determined, ...) or it starts with a refusal sentence (I don't know ..., I cannot answer ..., "
    "I'm not sure ..., not enough information ..., the documents do not mention ...)."
)
"""The rule in words (printed in the README and recorded in ``scores.json``)."""


def abstention_key(answer: str) -> str:
    """The light normalisation the shape rule matches on (keeps ``/`` and ``'`` so "N/A" is not "Na")."""
    text = unicodedata.normalize("NFKC", answer).casefold().translate(_QUOTES)
    text = _WS.sub(" ", text).strip()
    text = text.strip("\"'()[] ").rstrip(".!?,;: ").strip("\"'()[] ")
    return text


def is_abstention(answer: str) -> bool:
    """True when ``answer`` has the shape of a refusal (part 1 of the rule; the scorer adds "gold wins")."""
    key = abstention_key(answer)
    if not key:
        return False
    return _WHOLE.fullmatch(key) is not None or _FIRST_PERSON.match(key) is not None
