"""The LLM entailment validator: do a chain's hop statements, composed, answer the question?

Where hops carry no typed relation (dataset seeds over plain hyperlinks), the
relation-composition rules cannot say whether a chain entails its answer.
WebDetective checked its chains with an LLM for *sufficiency* (the evidence
together answers the question) and *necessity* (every piece is needed);
:class:`LLMEntailmentJudge` asks the model exactly that, through any
OpenAI-compatible endpoint (``--validator-endpoint``):

1. **Sufficiency**: the question, the answer and every hop statement (the
   sentence on page ``v(i-1)`` that names ``v(i)``, as the sandbox serves it);
   the reply's first word must be ``YES``.
2. **Necessity**: the same with hop ``i`` left out, once per hop; each reply's
   first word must be ``NO`` (without that hop the rest does not establish
   the answer).

The chain entails its answer only if both hold. Any other first word is
*unparseable* and counts against the chain, so a weak model's prose never
passes a chain. A hop that only mentions the next page ("Melbourne ...
Australian rules football") relates nothing, and the prompt says so; the
model is asked to judge, not to trust the chain. Every prompt's reply is kept
in the row's ``extra.chain_entailment`` so a reader can check the verdict.

A failing endpoint raises :class:`~aethersearch.errors.EndpointError` (after
the shared retries of ``llm_checks``) and the build writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aethersearch.construct.llm_checks import ChatEndpoint
from aethersearch.construct.triples import QATriple

__all__ = ["LLMEntailmentJudge", "PROMPT", "parse_yes_no"]

PROMPT = (
    "You check multi-hop questions for a benchmark.\n"
    "Question: {question}\nProposed answer: {answer}\n"
    "Statements, one per line:\n{statements}\n"
    "Taken together, do these statements alone establish that the answer to the question is the proposed "
    "answer? A statement that only mentions something without relating it to the question's subject or to "
    "the answer establishes nothing. Reply with one word first, YES or NO, then one sentence of reason."
)
_FIRST_WORD = re.compile(r"[A-Za-z]+")


def parse_yes_no(reply: str) -> str | None:
    """``"yes"`` / ``"no"`` when that is the reply's first word (any case), else None (unparseable)."""
    first = _FIRST_WORD.search(reply)
    word = first.group(0).lower() if first else ""
    return word if word in ("yes", "no") else None


class LLMEntailmentJudge:
    """Sufficiency and necessity of a chain's hop statements, judged by a model (see the module docstring)."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = None, timeout_s: float = 60.0,
                 backoff_s: float = 1.0) -> None:
        self.model = model
        self.name = f"llm:{model}"
        self._endpoint = ChatEndpoint(base_url, model, api_key_env=api_key_env, timeout_s=timeout_s,
                                   purpose="LLM entailment validator", option="--validator-endpoint",
                                   backoff_s=backoff_s)
        self.judged = 0

    def _ask(self, triple: QATriple, statements: Sequence[str]) -> tuple[str | None, str]:
        lines = "\n".join(f"- {s}" for s in statements)
        reply = self._endpoint.chat(PROMPT.format(question=triple.question, answer=triple.answers[0],
                                                  statements=lines),
                                    64, item=f"chain of {triple.id!r}", done=self.judged)
        return parse_yes_no(reply), reply

    def judge(self, triple: QATriple, path: Sequence[str], statements: Sequence[str]) -> dict[str, Any]:
        """The ``extra.chain_entailment`` record of one chain (sufficiency first; necessity only if sufficient)."""
        sufficient, reply = self._ask(triple, statements)
        record: dict[str, Any] = {"validator": self.name, "sufficiency": sufficient or "unparseable",
                                  "sufficiency_reply": reply, "necessity": []}
        entailing = sufficient == "yes"
        if entailing:
            for hop in range(len(statements)):
                verdict, why = self._ask(triple, [s for i, s in enumerate(statements) if i != hop])
                record["necessity"].append({"dropped_hop": hop + 1, "still_sufficient": verdict or "unparseable",
                                            "reply": why})
                entailing = entailing and verdict == "no"
        self.judged += 1
        record["entailing"] = entailing
        record["how"] = ("the model answered YES to the hop statements together and NO with each hop left out "
                         "(first word of each reply; anything else is unparseable and counts against the chain)")
        return record

    def close(self) -> None:
        """Close the HTTP client."""
        self._endpoint.close()
