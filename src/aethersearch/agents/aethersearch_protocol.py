"""AetherSearch's action grammar (``outcome/parser.py: parse_model_action`` at d2a21bd).

Why here, below scoring: their evaluation loop (:mod:`.aethersearch_loop`) stops
an episode at the first action this grammar rejects, and their scorer
(``scoring/aethersearch_compat.py``) reads the same rule, so it lives where both
may import it; it reads no gold.

An action (one model generation, as text) is valid when it holds no
``<information>``/``</information>`` tag (any case), its ``think``/``search``/
``answer`` tags are balanced (case-insensitive counts), it has at most one span of
each, exactly one of ``search``/``answer``, and the whole text is
``[ws] [<think>…</think> ws] (<search>…</search> | <answer>…</answer>) [ws]``; the
query or answer is the stripped content and must not be empty. The first failing
rule names the error, with their names and in their order.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["ActionCheck", "check_action"]

_INFORMATION_TAG = re.compile(r"</?information>", re.IGNORECASE)
_SPANS = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.IGNORECASE | re.DOTALL)
          for tag in ("think", "search", "answer")}
_GRAMMAR = re.compile(
    r"\s*(?:<think>.*?</think>\s*)?(?:<search>(?P<search>.*?)</search>|<answer>(?P<answer>.*?)</answer>)\s*",
    re.IGNORECASE | re.DOTALL)


class ActionCheck(NamedTuple):
    """One action under their parser: ``kind`` search/answer (None when invalid), its value, its error."""

    kind: str | None
    value: str | None
    error: str | None
    wrote_information: bool

    @property
    def valid(self) -> bool:
        """Whether the action parsed."""
        return self.error is None


def _invalid(error: str, wrote_information: bool = False) -> ActionCheck:
    return ActionCheck(None, None, error, wrote_information)


_OPEN = {tag: re.compile(f"<{tag}>", re.IGNORECASE) for tag in _SPANS}
_CLOSE = {tag: re.compile(f"</{tag}>", re.IGNORECASE) for tag in _SPANS}


def _balanced(text: str, tag: str) -> bool:
    # regex case folding, not str.lower: it also folds the Kelvin sign and the long s as theirs does
    return len(_OPEN[tag].findall(text)) == len(_CLOSE[tag].findall(text))


def check_action(text: str) -> ActionCheck:
    """Their ``parse_model_action``: the first failing rule names the error, in their order."""
    if _INFORMATION_TAG.search(text):
        return _invalid("model_generated_information", True)
    if not all(_balanced(text, tag) for tag in _SPANS):
        return _invalid("unbalanced_tags")
    counts = {tag: len(pattern.findall(text)) for tag, pattern in _SPANS.items()}
    if max(counts.values()) > 1:
        return _invalid("duplicate_action_tags")
    if (counts["search"] > 0) == (counts["answer"] > 0):
        return _invalid("action_must_contain_exactly_one_search_or_answer")
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        return _invalid("invalid_tag_order_or_nesting")
    if match.group("search") is not None:
        query = match.group("search").strip()
        return ActionCheck("search", query, None, False) if query else _invalid("empty_search_query")
    answer = match.group("answer").strip()
    return ActionCheck("answer", answer, None, False) if answer else _invalid("empty_answer")


