"""Optional LLM judge over an OpenAI-compatible endpoint, cached on disk.

Why: EM under-credits correct paraphrases ("JFK" vs "John F. Kennedy") and
over-credits nothing; a judge catches the former. To stay reproducible the
judge is pinned: one fixed prompt (its sha256 goes into every cache key and into
``scores.json``), temperature 0, and exactly three verdicts (``correct``,
``incorrect``, ``not_attempted``). Verdicts are cached in a JSONL file keyed by
(judge model, prompt hash, question, gold, prediction), so rescoring a run or
re-running a report never calls the endpoint twice for the same case.

The client is a thin ``httpx.AsyncClient`` (DESIGN.md: the ``openai`` SDK costs
10-40x more client CPU per call). Transient failures (429, 5xx, connection,
timeout) are retried with jittered backoff up to a cap; anything else, or an
unparseable reply, is recorded as a judge error for that question, never a crash.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import httpx
from pydantic import BaseModel, ConfigDict

from aethersearch.jsonl import DurableAppender, dumps, read_jsonl_tolerant, sha256_bytes

JUDGE_PROMPT = """You are grading an answer to a question against a list of gold answers.

Question: {question}
Gold answers: {golds}
Predicted answer: {prediction}

Decide whether the predicted answer means the same as one of the gold answers.
- CORRECT: it contains the meaning of a gold answer and nothing that contradicts it (paraphrases, aliases, extra detail that is true are fine).
- INCORRECT: it gives an answer that does not match any gold answer, or contradicts one.
- NOT_ATTEMPTED: it declines, says it does not know, or gives no answer.

Reply with exactly one word: CORRECT, INCORRECT or NOT_ATTEMPTED."""
"""The pinned judge prompt; changing a character changes ``PROMPT_HASH`` and so every cache key."""

PROMPT_HASH = sha256_bytes(JUDGE_PROMPT.encode("utf-8"))
VERDICTS: tuple[str, ...] = ("correct", "incorrect", "not_attempted")
_VERDICT_RE = re.compile(r"\b(NOT[_ ]ATTEMPTED|INCORRECT|CORRECT)\b", re.IGNORECASE)
_TRANSIENT = {408, 409, 425, 429, 500, 502, 503, 504}


class JudgeConfig(BaseModel):
    """Where the judge lives and how hard to push it. The API key is read from ``api_key_env``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    model: str
    api_key_env: str | None = None
    cache_path: Path | None = None
    concurrency: int = 8
    timeout_s: float = 60.0
    max_retries: int = 4
    deadline_s: float = 600.0


class JudgeCase(NamedTuple):
    """One question to judge."""

    id: str
    question: str
    golds: list[str]
    prediction: str


class Verdict(NamedTuple):
    """A judge verdict (``None`` with ``error`` set when the judge could not give one)."""

    verdict: str | None
    cached: bool
    error: str | None


def render_prompt(case: JudgeCase) -> str:
    """The pinned prompt filled in for one case."""
    return JUDGE_PROMPT.format(question=case.question, golds="; ".join(case.golds), prediction=case.prediction)


def cache_key(model: str, case: JudgeCase) -> str:
    """sha256 over (judge, prompt hash, question, gold, prediction): the cache identity of a verdict."""
    return sha256_bytes(dumps([model, PROMPT_HASH, case.question, list(case.golds), case.prediction]))


def parse_verdict(text: str) -> str | None:
    """Map the judge's reply to one of ``VERDICTS`` (the first verdict word wins); None if absent."""
    found = _VERDICT_RE.search(text or "")
    if not found:
        return None
    word = found.group(1).upper().replace(" ", "_")
    return {"CORRECT": "correct", "INCORRECT": "incorrect", "NOT_ATTEMPTED": "not_attempted"}[word]


def load_cache(path: Path | None) -> dict[str, str]:
    """Cached verdicts by key (a torn last line from an interrupted run is ignored)."""
    if path is None:
        return {}
    return {row["key"]: row["verdict"] for row in read_jsonl_tolerant(path).rows
            if isinstance(row, dict) and row.get("verdict") in VERDICTS}


async def _ask(client: httpx.AsyncClient, config: JudgeConfig, prompt: str) -> str:
    body = {"model": config.model, "messages": [{"role": "user", "content": prompt}],
            "temperature": 0, "max_tokens": 16}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + config.deadline_s
    attempt = 0
    while True:
        attempt += 1
        try:
            response = await client.post("/chat/completions", json=body)
            if response.status_code in _TRANSIENT:
                raise httpx.HTTPStatusError(f"HTTP {response.status_code}", request=response.request,
                                            response=response)
            response.raise_for_status()
            payload: Any = response.json()
            return str(payload["choices"][0]["message"]["content"] or "")
        except (httpx.TransportError, httpx.HTTPStatusError) as exc:
            transient = not isinstance(exc, httpx.HTTPStatusError) or exc.response.status_code in _TRANSIENT
            if not transient or attempt > config.max_retries or loop.time() >= deadline:
                raise
            await asyncio.sleep(min(8.0, 0.2 * 2 ** (attempt - 1)) * (0.5 + random.random()))


async def judge_cases_async(cases: Sequence[JudgeCase], config: JudgeConfig, *,
                            transport: httpx.AsyncBaseTransport | None = None) -> dict[str, Verdict]:
    """Judge every case (cache first), appending new verdicts durably to the cache."""
    cache = load_cache(config.cache_path)
    results: dict[str, Verdict] = {}
    todo: list[tuple[JudgeCase, str]] = []
    for case in cases:
        key = cache_key(config.model, case)
        if key in cache:
            results[case.id] = Verdict(cache[key], True, None)
        else:
            todo.append((case, key))
    if not todo:
        return results
    headers = {}
    if config.api_key_env and os.environ.get(config.api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[config.api_key_env]}"
    appender = DurableAppender(config.cache_path) if config.cache_path is not None else None
    semaphore = asyncio.Semaphore(max(1, config.concurrency))
    async with httpx.AsyncClient(base_url=config.base_url.rstrip("/"), headers=headers,
                                 timeout=config.timeout_s, transport=transport) as client:

        async def one(case: JudgeCase, key: str) -> None:
            async with semaphore:
                try:
                    verdict = parse_verdict(await _ask(client, config, render_prompt(case)))
                except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
                    results[case.id] = Verdict(None, False, f"{type(exc).__name__}: {exc}")
                    return
                if verdict is None:
                    results[case.id] = Verdict(None, False, "reply had no verdict word")
                    return
                results[case.id] = Verdict(verdict, False, None)
                if appender is not None:
                    appender.append({"key": key, "verdict": verdict, "model": config.model,
                                     "prompt_hash": PROMPT_HASH, "id": case.id})

        try:
            await asyncio.gather(*(one(case, key) for case, key in todo))
        finally:
            if appender is not None:
                appender.close()
    return results


def judge_cases(cases: Sequence[JudgeCase], config: JudgeConfig, *,
                transport: httpx.AsyncBaseTransport | None = None) -> dict[str, Verdict]:
    """Synchronous wrapper of ``judge_cases_async`` (for the CLI and ``score_run``)."""
    return asyncio.run(judge_cases_async(cases, config, transport=transport))


def disagreement_table(em_by_id: dict[str, float], verdicts: dict[str, Verdict]) -> dict[str, Any]:
    """EM (0/1) x judge verdict counts, with the ids where the two disagree.

    Disagreement: EM 1 but the judge did not say correct (EM too lenient, or a
    judge miss), and EM 0 but the judge said correct (a paraphrase EM missed).
    """
    table = {str(e): dict.fromkeys((*VERDICTS, "error"), 0) for e in (0, 1)}
    em_only: list[str] = []
    judge_only: list[str] = []
    for qid in sorted(verdicts):
        verdict = verdicts[qid].verdict or "error"
        em_value = int(em_by_id.get(qid, 0.0) >= 1.0)
        table[str(em_value)][verdict] += 1
        if em_value == 1 and verdict != "correct":
            em_only.append(qid)
        elif em_value == 0 and verdict == "correct":
            judge_only.append(qid)
    judged = sum(sum(row.values()) for row in table.values())
    agree = table["1"]["correct"] + sum(table["0"][v] for v in ("incorrect", "not_attempted"))
    return {"em_vs_verdict": table, "em_correct_judge_not": em_only, "judge_correct_em_not": judge_only,
            "agreement": (agree / judged) if judged else None, "judged": judged}
