"""Stop strings that give exactly the text Search-R1's client-side cut gives, at server-side speed.

Why this exists: Search-R1 generates without stop strings (until EOS or 500 tokens)
and then cuts the text after the first ``</search>``, else after the first
``</answer>`` (``_postprocess_responses``). Sending the stops to the server is much
cheaper (the model does not write on for hundreds of tokens), but an
OpenAI-compatible server *removes* the stop string and reports ``finish_reason:
"stop"`` for a stop string and for end-of-text alike. A reply ``… <search> q`` is
then ambiguous: did the model write ``</search>`` (a valid search) or stop there (an
invalid action in Search-R1)? Guessing, by appending the tag of
whatever was left open, turns invalid actions into searches and answers.

:func:`generate` establishes the truth and records how (``notes["stop"]``):

* ``in_text`` — the server kept the stop string (vLLM ``include_stop_str_in_output``);
* ``stop_reason`` — the server named it (vLLM's ``stop_reason``);
* ``continuation`` — neither: the model is asked for a few more tokens of the same
  context (from before any trailing whitespace, which the server may have cut out
  of a token such as ``" </"``) with no stop strings; the stop string was matched
  when the continuation starts with it;
* ``regenerated`` — the continuation does not show the stop (end of text, or a
  token boundary it cannot see through): the turn is generated again without stop
  strings and cut client-side, which is Search-R1 itself (exact for greedy decoding;
  with sampling it is a fresh sample), at the cost of one longer call;
* ``no_open_tag`` / ``length`` — nothing to restore.

A stop of lower priority that ends the text while a higher-priority tag is still
open (``<search> a <answer> b </answer>`` — Search-R1 keeps generating and cuts at
a later ``</search>``) is continued with only the higher-priority stops, so even
that case matches. ``mode="client"`` sends no stops at all and cuts afterwards
(Search-R1 verbatim, slower); an endpoint that cannot be asked for a continuation
(no ``served`` attribute) always gets ``client``.

The model's own text is kept byte for byte (``raw``); ``text`` adds only the stop
strings the server removed after the model wrote them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from aethersearch.agents.llm import LLM, Completion
from aethersearch.agents.served import ServedModel
from aethersearch.records import Decoding

__all__ = ["Generation", "PROBE_TOKENS", "STOP_MODES", "generate"]

STOP_MODES = ("server", "client")
PROBE_TOKENS = 8


class Generation(NamedTuple):
    """One model turn: the first server reply, the model's raw text, the text as Search-R1 sees it."""

    completion: Completion
    raw: str
    text: str
    completion_tokens: int
    notes: dict[str, Any]


def _open(text: str, stop: str) -> bool:
    """True when ``stop`` is a closing tag ``</x>`` whose ``<x>`` is open at the end of ``text``."""
    if not (stop.startswith("</") and stop.endswith(">")):
        return True  # not a tag: any ending may have been this stop
    opening = "<" + stop[2:]
    return text.rfind(opening) > text.rfind(stop)


def _known(completion: Completion, stops: Sequence[str]) -> tuple[str, str] | None:
    """(stop string the server removed or "", how) when the reply itself says; None when a probe must ask.

    Why apart from :func:`_matched`: this is every turn's answer with a server that
    names its stop (vLLM, the scripted server) or keeps it in the text, and deciding it
    without a coroutine keeps an await layer off the hot path.
    """
    if completion.finish_reason != "stop":
        return "", completion.finish_reason or "unknown"
    raw = completion.text
    for stop in stops:
        if stop in raw:
            return "", "in_text"
    if completion.stop_reason in stops:
        return str(completion.stop_reason), "stop_reason"
    return None


async def _matched(served: Any, prompt: str, completion: Completion, stops: Sequence[str],
                   decoding: Decoding, written: str) -> tuple[str, str]:
    """(stop string the server removed or "", how that was established) when :func:`_known` cannot tell.

    ``written``: this turn so far.
    """
    raw = completion.text
    candidates = [stop for stop in stops if _open(written + raw, stop)]
    if not candidates:
        return "", "no_open_tag"
    # Continue from before any trailing whitespace: the server cut inside a token such as " </" and the
    # text re-tokenized with a dangling space is not what the model continued from.
    head = raw.rstrip()
    tail = raw[len(head):]
    probe = await served.complete(prompt + head, decoding.model_copy(
        update={"stop": [], "max_tokens": PROBE_TOKENS}))
    for stop in candidates:
        if probe.text.startswith(tail + stop):
            return stop, "continuation"
    return "", "ambiguous"


async def generate(llm: LLM, prompt: str, decoding: Decoding, stops: Sequence[str],
                   cut: Callable[[str], str], *, mode: str = "server", written: str = "") -> Generation:
    """One turn on ``prompt``: ``stops`` in priority order, ``cut`` the client-side postprocessing.

    ``llm`` is the (budgeted) endpoint; continuations and probes go through
    ``llm.served`` and are not charged as turns (they are part of this turn).
    ``written`` is what the model already wrote in this turn (for a continuation).
    """
    served = llm.served
    if mode == "client" or served is None:
        completion = await llm.complete(prompt, decoding.model_copy(update={"stop": []}))
        raw = completion.text
        return Generation(completion, raw, cut(raw), completion.completion_tokens,
                          {"stop": "client_cut", "stop_mode": "client"})
    sent = decoding if decoding.stop == list(stops) else decoding.model_copy(update={"stop": list(stops)})
    completion = await llm.complete(prompt, sent)  # no copy per call when the stops are already the ones sent
    raw, tokens = completion.text, completion.completion_tokens
    restored, how = _known(completion, stops) or await _matched(served, prompt, completion, stops, decoding, written)
    if how == "ambiguous":  # end of text, or a boundary the probe cannot see through: generate uncut
        again = await served.complete(prompt, decoding.model_copy(update={"stop": []}))
        return Generation(again, again.text, cut(again.text), again.completion_tokens,
                          {"stop": "regenerated", "stop_mode": "server", "server_stop_text": raw})
    text = raw + restored
    notes: dict[str, Any] = {"stop": how, "stop_mode": "server"}
    if restored:
        notes["stop_restored"] = restored
    higher: list[str] = []  # the stops ranked above the restored one
    if restored and restored in stops and restored != stops[0]:  # none above the first: no list work then
        higher = list(stops[:list(stops).index(restored)])
    if higher:
        still_open = [stop for stop in higher if _open(written + text, stop)]
        left = decoding.max_tokens - tokens
        if still_open and left > 0:  # Search-R1 would have generated on, to a later higher-priority stop
            more = await generate(_Unbudgeted(served), prompt + text, decoding.model_copy(
                update={"max_tokens": left}), higher, lambda t: t, mode="server", written=written + text)
            raw, text, tokens = raw + restored + more.raw, text + more.text, tokens + more.completion_tokens
            notes["continued_for"] = still_open
    return Generation(completion, raw, cut(text), tokens, notes)


class _Unbudgeted(LLM):
    """The served endpoint as an LLM, for continuations that belong to the current turn."""

    endpoint: str | None = None
    model: str | None = None

    def __init__(self, served: ServedModel) -> None:
        self.served: ServedModel = served

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        result: Completion = await self.served.complete(prompt, decoding)
        return result

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """Never called: a continuation is a text completion."""
        raise NotImplementedError("a stop-string continuation is a text completion")
