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

__all__ = ["INFORMATION_CLOSE", "INFORMATION_OPEN", "ActionCheck", "ResponseSplit", "check_action", "split_response"]

INFORMATION_OPEN = "<information>"
INFORMATION_CLOSE = "</information>"

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




class ResponseSplit(NamedTuple):
    """One decoded response cut back into the loop's actions (``ambiguous``: why it cannot be, else None)."""

    actions: tuple[str, ...]
    queries: tuple[str, ...]
    ambiguous: str | None


def _unrecoverable(why: str) -> ResponseSplit:
    return ResponseSplit((), (), why)


def split_response(response: str, eos_text: str | None = None) -> ResponseSplit:
    """The actions of one episode written as a single response (a verl dump), exactly or not at all.

    Their loop writes ``action [EOS] <information>…</information> action …``: it
    observes only after a valid search and stops at the first invalid action or the
    answer. So an ``<information>`` after text that is not a valid search is the
    model's own (the action is invalid and the episode ended inside it). After a
    valid search the tag is the loop's only if the action ended at end-of-sequence:
    with no stop strings a model may write ``<search>q</search><information>…`` in
    one action, which their parser rejects. A response decoded without its EOS
    (verl's default, ``skip_special_tokens``) cannot tell the two apart, so such a
    response is *ambiguous* and no score is read from it. Text after an EOS that is
    not an observation, an unterminated observation, or an observation holding
    ``</information>`` cannot come from their loop either and is ambiguous too. A
    response that ends with an observation (a token cap ended the episode) has no
    action after it. The actions are returned without their EOS, as their ``model_actions`` hold them.
    """
    actions: list[str] = []
    queries: list[str] = []
    position = 0
    while True:
        start = response.find(INFORMATION_OPEN, position)
        segment = response[position:] if start == -1 else response[position:start]
        if actions and INFORMATION_CLOSE in segment:
            return _unrecoverable(f"the text after observation {len(actions)} holds another {INFORMATION_CLOSE}, "
                                  "so where that observation ended is unknown")
        if start == -1:
            break
        ended = bool(eos_text) and segment.endswith(str(eos_text))
        action = segment[:-len(str(eos_text))] if ended else segment
        check = check_action(action)
        if check.kind != "search":  # the loop observes only after a valid search: the model wrote this tag
            segment = response[position:]
            break
        if not ended:
            return _unrecoverable(f"action {len(actions) + 1} is a valid search followed by {INFORMATION_OPEN} with "
                                  "no end-of-sequence between: the model may have written that block itself (an "
                                  "invalid action that ends the episode) or the loop may have (after an "
                                  "end-of-sequence the decoder dropped)")
        close = response.find(INFORMATION_CLOSE, start)
        if close == -1:
            return _unrecoverable(f"observation {len(actions) + 1} has no {INFORMATION_CLOSE} (the loop always "
                                  "writes both tags)")
        actions.append(action)
        queries.append(str(check.value))
        position = close + len(INFORMATION_CLOSE)
    if actions and not segment:  # a cap ended the episode after an observation: no last action
        return ResponseSplit(tuple(actions), tuple(queries), None)
    if eos_text and segment.endswith(eos_text):
        segment = segment[:-len(eos_text)]
    if eos_text and eos_text in segment:
        return _unrecoverable(f"action {len(actions) + 1} goes on after an end-of-sequence without an observation, "
                              "which the loop never does")
    actions.append(segment)
    return ResponseSplit(tuple(actions), tuple(queries), None)
