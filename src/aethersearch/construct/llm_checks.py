"""Model-backed construction checks through any OpenAI-compatible endpoint.

* :class:`LLMChainValidator` -- a :class:`~aethersearch.construct.validate.ChainValidator`
  that shows a model the question, its answer and the chain's hop statements
  (the sentence on each ``v(i-1)`` that names ``v(i)``) and asks whether the
  chain is necessary and sufficient (WebDetective used an LLM for chain
  necessity). The reply's **first word** decides (:func:`parse_verdict`):
  ``VALID`` keeps the candidate; ``INVALID`` rejects it as
  ``llm_invalid_chain``; any other reply -- "The chain is valid", "Not valid",
  an empty or garbled one -- is *unparseable* and rejects it as
  ``llm_unparseable_reply``. A weak model's prose can therefore never be read
  as a pass (a search for the word anywhere would read "not VALID" as VALID).
  Every candidate the model judged is kept in :attr:`LLMChainValidator.records`
  (written to the release manifest, ``construction.triples.llm_validator.verdicts``). With ``enforce=False``
  (``--validator-policy advisory``) the verdicts are recorded -- per candidate,
  per release row and counted in the manifest -- but reject nothing: for a
  model too weak to follow the format (SmolLM2-135M answers prose, so an
  enforced check rejects every chain), the release then shows what the model
  said instead of being empty. The validator's name says which
  (``llm`` / ``llm-advisory``), and an advisory verdict is never a pass.
* :func:`parametric_screen` -- asks the model each accepted question *without
  search* (the paper's parametric-inaccessibility screen) and records per
  question its prediction, exact match and cover match against the golds;
  ``answered_without_search`` is either of them (a screen should rather flag
  too many than too few). The record goes into the release
  (``extra["parametric_screen"]``) and the manifest counts it; whether to drop
  such questions is the caller's choice.

A failed call is retried (:data:`ATTEMPTS` times, with back-off); if the
endpoint still fails -- refused connection, timeout, HTTP error, a body that is
not an OpenAI chat completion -- an :class:`~aethersearch.errors.EndpointError`
names the candidate, how many were judged before, and the endpoint, and the
build stops without writing a release. A dead endpoint must never turn into a
release of unchecked (or silently rejected) questions.

Both checks use temperature 0 and a short ``max_tokens``, over plain ``httpx``.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from aethersearch.construct.hintfree import ConstructedQuestion
from aethersearch.construct.statements import hop_statement
from aethersearch.construct.validate import ACCEPT, Candidate, Verdict
from aethersearch.errors import EndpointError
from aethersearch.records import Document
from aethersearch.text import normalize_answer

__all__ = ["ATTEMPTS", "CHAIN_PROMPT", "ChatEndpoint", "INVALID_REASON", "LLMChainValidator", "SCREEN_PROMPT",
    "UNPARSEABLE_REASON", "cover_match", "exact_match", "parametric_screen", "parse_verdict", "screen_counts"]

CHAIN_PROMPT = (
    "You check multi-hop questions for a benchmark.\n"
    "Question: {question}\nAnswer: {answer}\n"
    "The answer is meant to be reached only by following this chain of statements, one per hop:\n{chain}\n"
    "Is every statement needed, and do the statements together lead from the question's subject to the "
    "answer? Reply with one word first, VALID or INVALID, then one sentence of reason."
)
SCREEN_PROMPT = "Answer the question with a short phrase only, no explanation.\nQuestion: {question}\nAnswer:"
ATTEMPTS = 3
_FIRST_WORD = re.compile(r"[A-Za-z]+")

#: Rejection reasons of the LLM validator (counted in the manifest's ``rejected``).
INVALID_REASON = "llm_invalid_chain"
UNPARSEABLE_REASON = "llm_unparseable_reply"


def parse_verdict(reply: str) -> str | None:
    """``"VALID"`` / ``"INVALID"`` when that is the reply's first word (any case, markup ignored), else None."""
    first = _FIRST_WORD.search(reply)
    word = first.group(0).upper() if first else ""
    return word if word in ("VALID", "INVALID") else None


class ChatEndpoint:
    """One OpenAI-compatible chat endpoint with bounded retries; a persistent failure raises EndpointError."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None, timeout_s: float,
                 purpose: str, option: str, backoff_s: float = 1.0) -> None:
        headers = {}
        if api_key_env and os.environ.get(api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[api_key_env]}"
        self.base_url, self.model, self.purpose, self.option = base_url, model, purpose, option
        self.backoff_s = backoff_s
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)

    def chat(self, prompt: str, max_tokens: int, *, item: str, done: int) -> str:
        """The reply text; raises EndpointError naming ``item`` after :data:`ATTEMPTS` failed tries."""
        problem = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self.client.post("/chat/completions", json={
                    "model": self.model, "messages": [{"role": "user", "content": prompt}],
                    "temperature": 0, "max_tokens": max_tokens})
                response.raise_for_status()
                content = response.json()["choices"][0]["message"]["content"]
                return "" if content is None else str(content)
            except httpx.HTTPStatusError as exc:
                problem = f"HTTP {exc.response.status_code}: {exc.response.text[:200]}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                problem = f"not an OpenAI chat completion ({type(exc).__name__}: {exc})"
        raise EndpointError(
            f"{self.purpose} endpoint {self.base_url} (model {self.model!r}) failed at {item} after {done} "
            f"answered and {ATTEMPTS} tries: {problem}; no release was written",
            kind="connection", fix=f"check that the server behind {self.option} is up and serves the model, "
                                   "then rerun the build")

    def close(self) -> None:
        self.client.close()


class LLMChainValidator:
    """Chain necessity judged by a model behind an OpenAI-compatible endpoint (see the module doc)."""

    name = "llm"

    def __init__(self, pages: Mapping[str, Document], base_url: str, model: str, *,
                 api_key_env: str | None = None, timeout_s: float = 60.0, backoff_s: float = 1.0,
                 enforce: bool = True) -> None:
        self.pages = pages
        self.model = model
        self.base_url = base_url
        self.enforce = enforce
        self.name = "llm" if enforce else "llm-advisory"
        self._endpoint = ChatEndpoint(base_url, model, api_key_env=api_key_env, timeout_s=timeout_s,
                                   purpose="LLM chain validator", option="--validator-endpoint",
                                   backoff_s=backoff_s)
        #: triple id -> ``{triple_id, path, verdict ("valid"|"invalid"|"unparseable"), reply}``
        self.records: dict[str, dict[str, Any]] = {}

    def prompt(self, candidate: Candidate) -> str:
        """The prompt for one candidate (its hop statements as the sandbox serves the pages)."""
        lines = []
        for i in range(1, len(candidate.path)):
            source, target = candidate.path[i - 1], candidate.path[i]
            finals = candidate.triple.answers if i < len(candidate.path) - 1 else ()
            statement = hop_statement(candidate.mask.render(self.pages[source]), candidate.mask.hidden_terms[target],
                                      finals)
            lines.append(f"{i}. On the page {self.pages[source].title!r}: {statement or '(link only)'}")
        return CHAIN_PROMPT.format(question=candidate.triple.question, answer=candidate.triple.answers[0],
                                   chain="\n".join(lines))

    def validate(self, candidate: Candidate) -> Verdict:
        """First word VALID keeps the chain; INVALID or an unparseable reply rejects it (by reason).

        Raises EndpointError when the endpoint keeps failing (the build stops).
        """
        tid = candidate.triple.id
        reply = self._endpoint.chat(self.prompt(candidate), 64, item=f"candidate {tid!r}", done=len(self.records))
        verdict = parse_verdict(reply)
        label = {"VALID": "valid", "INVALID": "invalid", None: "unparseable"}[verdict]
        self.records[tid] = {"triple_id": tid, "path": list(candidate.path), "verdict": label, "reply": reply}
        if verdict == "VALID" or not self.enforce:
            return ACCEPT
        if verdict == "INVALID":
            return Verdict(False, INVALID_REASON, reply[:200])
        return Verdict(False, UNPARSEABLE_REASON, f"reply does not start with VALID or INVALID: {reply[:80]!r}")

    def counts(self) -> dict[str, Any]:
        """Manifest summary: the model, how many candidates it judged, and its verdicts by kind."""
        verdicts = Counter(r["verdict"] for r in self.records.values())
        return {"model": self.model, "policy": "enforced" if self.enforce else "advisory (recorded, rejects nothing)",
                "judged": len(self.records),
                **{kind: verdicts.get(kind, 0) for kind in ("valid", "invalid", "unparseable")},
                "parse_rule": "first word of the reply must be VALID or INVALID (case-insensitive); anything "
                              "else is unparseable; INVALID and unparseable reject the candidate when enforced"}

    def close(self) -> None:
        """Close the HTTP client."""
        self._endpoint.close()


def parametric_screen(questions: Sequence[ConstructedQuestion], base_url: str, model: str, *,
                      api_key_env: str | None = None, timeout_s: float = 60.0, backoff_s: float = 1.0,
                      on_question: Callable[[int, int], None] | None = None) -> dict[str, dict[str, Any]]:
    """Triple id -> ``{screened, model, prediction, exact_match, cover_match, answered_without_search}``.

    Raises EndpointError (naming the question) when the endpoint keeps
    failing: a screen with holes would under-report parametric answers.
    ``on_question(done, total)`` reports progress.
    """
    out: dict[str, dict[str, Any]] = {}
    endpoint = ChatEndpoint(base_url, model, api_key_env=api_key_env, timeout_s=timeout_s,
                         purpose="parametric screen", option="--screen-endpoint", backoff_s=backoff_s)
    try:
        for number, q in enumerate(questions, start=1):
            prediction = endpoint.chat(SCREEN_PROMPT.format(question=q.triple.question), 32,
                                       item=f"question {q.triple.id!r}", done=number - 1).strip()
            exact, cover = exact_match(prediction, q.triple.answers), cover_match(prediction, q.triple.answers)
            out[q.triple.id] = {"screened": True, "model": model, "prediction": prediction, "exact_match": exact,
                                "cover_match": cover, "answered_without_search": exact or cover}
            if on_question is not None:
                on_question(number, len(questions))
    finally:
        endpoint.close()
    return out


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    """Search-R1 exact match (the scorer's rule; construct sits below scoring, so it is restated on text.py)."""
    pred = normalize_answer(prediction)
    return bool(pred) and any(pred == normalize_answer(g) for g in golds)


def cover_match(prediction: str, golds: Sequence[str]) -> bool:
    """A normalised gold alias occurs as whole tokens in the normalised prediction ("born in Mecca, ...")."""
    pred = f" {normalize_answer(prediction)} "
    return any(f" {g} " in pred for g in (normalize_answer(x) for x in golds) if g)


def screen_counts(screen: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Manifest counts of a parametric screen."""
    screened = [s for s in screen.values() if s.get("screened")]
    return {"screened": len(screened),
            "answered_without_search": sum(bool(s["answered_without_search"]) for s in screened),
            "exact_match": sum(bool(s["exact_match"]) for s in screened),
            "cover_match_only": sum(bool(s["cover_match"]) and not s["exact_match"] for s in screened),
            "empty_predictions": sum(not s["prediction"] for s in screened),
            "rule": "answered_without_search = exact match or a gold alias as whole tokens in the prediction "
                    "(Search-R1 normalisation); recorded per question, not dropped"}
