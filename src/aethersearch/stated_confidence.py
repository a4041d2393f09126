"""The stated-confidence prompt variant: its name, and how a confidence is read off an answer.

Why on the ground: the agent (rollout side, never near gold) and the scorer (gold
side) must split an answer into "the answer" and "the confidence" by exactly one
rule. The agent needs it so that "I don't know Confidence: 0%" is a refusal and its
recorded ``prediction`` is the answer alone; the scorer needs it so that the
metrics never see "Confidence: 80%" as part of the answer. Both import this module.

The variant is BrowseComp-Plus's request for a confidence with the answer
(texttron/BrowseComp-Plus ``search_agent/prompts.py``, ``QUERY_TEMPLATE*``: "Confidence:
{your confidence score between 0% and 100% for your answer}" after "Exact Answer:"),
carried into Search-R1's tag protocol: Search-R1 stops generating at ``</answer>``, so
the confidence is asked for *inside* the answer tags, after the answer (the prompt
text lives in :mod:`aethersearch.agents.prompts`). BrowseComp-Plus reads the number
with an LLM judge told to "put 100 if there is no confidence score available"; this
project never guesses: a missing or unreadable confidence is recorded as such
(``status``), counted in ``scores.json`` and left out of calibration.

Reading rules (an aethersearch convention, ``CONFIDENCE_RULE``):

* the label is the *last* ``confidence`` (optionally ``confidence score``) in the
  answer followed by ``:``/``=``, or directly by a number; the answer is the text
  before it, with trailing separators (``, ; - ( [`` and a trailing ``|``) stripped;
* the value is the number right after the label: ``85%`` and ``85`` read as 0.85 (the
  prompt asks for 0-100%); a number from 0 to 1 written with a decimal point and no
  ``%`` (``0.85``, ``1.0``) reads as a fraction;
* a label with no number after it is ``unparseable``; a number above 100% is
  ``out_of_range`` (never clamped); no label at all is ``missing`` (the answer is
  then the whole text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["CONFIDENCE_RULE", "PROMPT_VARIANT_KEY", "PROMPT_VARIANTS", "STATED", "STATED_CONFIDENCE",
           "STATUSES", "StatedAnswer", "elicits_confidence", "split_confidence"]

#: The agent setting (``--prompt-variant``, ``agent_config["prompt_variant"]``) naming the prompt.
PROMPT_VARIANT_KEY = "prompt_variant"
#: The opt-in variant that asks for a confidence with the answer.
STATED_CONFIDENCE = "stated-confidence"
#: ``search-r1`` is Search-R1's own prompt, byte for byte (the default, left out of run.json).
PROMPT_VARIANTS: tuple[str, ...] = ("search-r1", STATED_CONFIDENCE)
CONFIDENCE_RULE = "aethersearch-stated-confidence-v1"

STATED = "stated"
STATUSES: tuple[str, ...] = (STATED, "missing", "unparseable", "out_of_range")

_LABEL = re.compile(r"\bconfidence(?:\s+score)?\s*(?:[:=]|(?=\d))", re.IGNORECASE)
_NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(%?)")
_TRAILING = " \t\r\n,;:-–—([|"


class StatedAnswer(NamedTuple):
    """An answer split into its text and its stated confidence in [0, 1] (None unless ``status`` is stated)."""

    answer: str
    confidence: float | None
    status: str


def split_confidence(text: str) -> StatedAnswer:
    """Split ``text`` (the content of the answer tags) into the answer and the confidence it states."""
    labels = list(_LABEL.finditer(text))
    if not labels:
        return StatedAnswer(text.strip(), None, "missing")
    label = labels[-1]
    answer = text[:label.start()].rstrip(_TRAILING).strip()
    number = _NUMBER.match(text, label.end())
    if number is None:
        return StatedAnswer(answer, None, "unparseable")
    digits, percent = number.group(1), number.group(2)
    value = float(digits)
    if not percent and "." in digits and value <= 1.0:
        fraction = value
    else:
        fraction = value / 100.0
    if fraction > 1.0:
        return StatedAnswer(answer, None, "out_of_range")
    return StatedAnswer(answer, fraction, STATED)


def elicits_confidence(agent_config: Mapping[str, Any] | None) -> bool:
    """Whether a run's recorded agent settings (``run.json`` ``agent_config``) asked for a stated confidence."""
    return agent_config is not None and agent_config.get(PROMPT_VARIANT_KEY) == STATED_CONFIDENCE
