"""Model-backed construction checks through any OpenAI-compatible endpoint.

* :class:`LLMChainValidator` -- a :class:`~aethersearch.construct.validate.ChainValidator`
  that shows a model the question, its answer and the chain's hop statements
  (the sentence on each ``v(i-1)`` that names ``v(i)``) and asks whether the
  chain is necessary and sufficient (WebDetective used an LLM for chain
  necessity). ``VALID`` keeps the candidate; ``INVALID`` rejects it as
  ``llm_rejected``; a failed call or a reply with neither word rejects it as
  ``llm_error`` (counted; a question is never kept unchecked).
* :func:`parametric_screen` -- asks the model each accepted question *without
  search* (the paper's parametric-inaccessibility screen) and records per
  question whether it answered correctly (exact match against the golds).
  The record goes into the release (``extra["parametric_screen"]``) and the
  manifest counts it; whether to drop such questions is the caller's choice.

Both use temperature 0 and a short ``max_tokens``, over plain ``httpx``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from aethersearch.construct.hintfree import ConstructedQuestion, hop_statement
from aethersearch.construct.validate import ACCEPT, Candidate, Verdict
from aethersearch.records import Document
from aethersearch.text import normalize_answer

CHAIN_PROMPT = (
    "You check multi-hop questions for a benchmark.\n"
    "Question: {question}\nAnswer: {answer}\n"
    "The answer is meant to be reached only by following this chain of statements, one per hop:\n{chain}\n"
    "Is every statement needed, and do the statements together lead from the question's subject to the "
    "answer? Reply with one word first, VALID or INVALID, then one sentence of reason."
)
SCREEN_PROMPT = "Answer the question with a short phrase only, no explanation.\nQuestion: {question}\nAnswer:"
_VERDICT = re.compile(r"\b(INVALID|VALID)\b")


def _chat(client: httpx.Client, model: str, prompt: str, max_tokens: int) -> str:
    response = client.post("/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": prompt}],
        "temperature": 0, "max_tokens": max_tokens})
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"] or "")


def _client(base_url: str, api_key_env: str | None, timeout_s: float) -> httpx.Client:
    headers = {}
    if api_key_env and os.environ.get(api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[api_key_env]}"
    return httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)


class LLMChainValidator:
    """Chain necessity judged by a model behind an OpenAI-compatible endpoint (see the module doc)."""

    name = "llm"

    def __init__(self, pages: Mapping[str, Document], base_url: str, model: str, *,
                 api_key_env: str | None = None, timeout_s: float = 60.0) -> None:
        self.pages = pages
        self.model = model
        self.base_url = base_url
        self._client = _client(base_url, api_key_env, timeout_s)
        self.replies: dict[str, str] = {}

    def prompt(self, candidate: Candidate) -> str:
        """The prompt for one candidate (its hop statements as the sandbox would serve them)."""
        lines = []
        for i in range(1, len(candidate.path)):
            source, target = candidate.path[i - 1], candidate.path[i]
            finals = candidate.triple.answers if i < len(candidate.path) - 1 else ()
            statement = hop_statement(self.pages[source], candidate.mask.hidden_terms[target], finals)
            lines.append(f"{i}. On the page {self.pages[source].title!r}: {statement or '(link only)'}")
        return CHAIN_PROMPT.format(question=candidate.triple.question, answer=candidate.triple.answers[0],
                                   chain="\n".join(lines))

    def validate(self, candidate: Candidate) -> Verdict:
        """VALID keeps the chain; INVALID, an error or an unreadable reply rejects it (by reason)."""
        try:
            reply = _chat(self._client, self.model, self.prompt(candidate), 64)
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
            return Verdict(False, "llm_error", f"{type(exc).__name__}: {exc}")
        self.replies[candidate.triple.id] = reply
        found = _VERDICT.search(reply.upper())
        if found is None:
            return Verdict(False, "llm_error", f"reply has no VALID/INVALID: {reply[:80]!r}")
        return ACCEPT if found.group(1) == "VALID" else Verdict(False, "llm_rejected", reply[:200])


def parametric_screen(questions: Sequence[ConstructedQuestion], base_url: str, model: str, *,
                      api_key_env: str | None = None, timeout_s: float = 60.0) -> dict[str, dict[str, Any]]:
    """Triple id -> ``{screened, model, prediction, answered_correctly}`` (or the error) per question."""
    out: dict[str, dict[str, Any]] = {}
    with _client(base_url, api_key_env, timeout_s) as client:
        for q in questions:
            try:
                prediction = _chat(client, model, SCREEN_PROMPT.format(question=q.triple.question), 32).strip()
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
                out[q.triple.id] = {"screened": False, "model": model, "error": f"{type(exc).__name__}: {exc}"}
                continue
            out[q.triple.id] = {"screened": True, "model": model, "prediction": prediction,
                                "answered_correctly": _exact(prediction, q.triple.answers)}
    return out


def _exact(prediction: str, golds: Sequence[str]) -> bool:
    """Search-R1 exact match (the scorer's rule; construct sits below scoring, so it is restated on text.py)."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(g) for g in golds)


def screen_counts(screen: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Manifest counts of a parametric screen."""
    screened = [s for s in screen.values() if s.get("screened")]
    return {"screened": len(screened), "answered_without_search": sum(bool(s["answered_correctly"]) for s in screened),
            "errors": sum(1 for s in screen.values() if "error" in s)}
