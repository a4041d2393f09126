"""LLM judges over OpenAI-compatible endpoints: a pinned grading contract whose failures are never grades.

Why a contract: a judge's number depends on its prompt, model, decoding and the rule
that reads its reply as much as on the answers it grades (two judges of the same runs
differ by points; a grader whose regex never matched marked every answer wrong). So
each judge is pinned and recorded: the prompt text (the project's own, or any
published grader given with ``--judge-prompt FILE``) and its sha256, the model, the
decoding (temperature, seed, max tokens) and the verdict parser. All of it is in
``scores.json`` and in every cache key, so a changed grader never reuses old verdicts.

Why failures are never grades: an unparseable reply, an API error after the retries,
or a refusal to grade is a *judge error* for that question: the judge metric leaves
the question out of its denominator and ``scores.json`` counts it, never a 0 that
reads as a wrong answer. Only transport failures (429, 5xx, connection, timeout) are
retried; a parsed verdict is never re-asked to get another.

The client is a thin ``httpx.AsyncClient`` (the ``openai`` SDK costs 10-40x more client
CPU per call). Verdicts, with the raw reply and the tokens the call cost, are cached in
a JSONL file, so rescoring never calls the endpoint twice for the same case.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import httpx
from pydantic import BaseModel, ConfigDict, Field

from aethersearch.errors import ConfigError, DataError
from aethersearch.jsonl import DurableAppender, dumps, read_jsonl_tolerant, sha256_bytes

__all__ = ["JUDGE_PROMPT", "JudgeCase", "JudgeConfig", "PARSERS", "PLACEHOLDERS", "PROMPT_HASH", "Parser",
    "VERDICTS", "Verdict", "build_judges", "cache_key", "disagreement_table", "fill", "judge_cases",
    "judge_cases_async", "load_cache", "load_prompt_file", "parse_verdict"]

JUDGE_PROMPT = """You are grading an answer to a question against a list of gold answers.

Question: {question}
Gold answers: {golds}
Predicted answer: {prediction}

Decide whether the predicted answer means the same as one of the gold answers.
- CORRECT: it contains the meaning of a gold answer and nothing that contradicts it (paraphrases, aliases, extra detail that is true are fine).
- INCORRECT: it gives an answer that does not match any gold answer, or contradicts one.
- NOT_ATTEMPTED: it declines, says it does not know, or gives no answer.

Reply with exactly one word: CORRECT, INCORRECT or NOT_ATTEMPTED."""
"""The project's own judge prompt; changing a character changes ``PROMPT_HASH`` and so every cache key."""

PROMPT_HASH = sha256_bytes(JUDGE_PROMPT.encode("utf-8"))
VERDICTS: tuple[str, ...] = ("correct", "incorrect", "not_attempted")
_TRANSIENT = {408, 409, 425, 429, 500, 502, 503, 504}
#: the names a prompt file may use for each field (the project's, BrowseComp's and SimpleQA's graders)
PLACEHOLDERS: dict[str, str] = {"question": "question", "golds": "golds", "correct_answer": "golds",
                                "target": "golds", "prediction": "prediction", "response": "prediction",
                                "predicted_answer": "prediction"}
Parser = Literal["three-way", "yes-no", "letter"]


def _three_way(reply: str) -> str | None:
    """The reply's last line is one verdict word (``Verdict: CORRECT`` and ``**incorrect.**`` read too).

    Strict on purpose: "I cannot tell whether this is correct" is not a verdict, and the first
    verdict-like word of a sentence is not one either.
    """
    lines = [line for line in (reply or "").strip().splitlines() if line.strip()]
    if not lines:
        return None
    last = re.sub(r"^\W*(verdict|answer|grade)\s*:\s*", "", lines[-1].strip(), flags=re.IGNORECASE)
    word = re.fullmatch(r"[\W_]*(not[_ ]attempted|incorrect|correct)[\W_]*", last, flags=re.IGNORECASE)
    return None if word is None else word.group(1).lower().replace(" ", "_")


def _yes_no(reply: str) -> str | None:
    """BrowseComp's grader format: a ``correct: yes|no`` line (its extracted answer and confidence beside)."""
    found = re.findall(r"^\W*correct\W*:\s*\**\s*(yes|no)\b", reply or "", flags=re.IGNORECASE | re.MULTILINE)
    if len(found) != 1:
        return None  # no verdict line, or two that may disagree: a judge error, not a grade
    return "correct" if found[0].lower() == "yes" else "incorrect"


def _letter(reply: str) -> str | None:
    """SimpleQA's grader format: the reply is one letter, A (correct), B (incorrect) or C (not attempted)."""
    word = re.fullmatch(r"[\W_]*([ABC])[\W_]*", (reply or "").strip())
    return None if word is None else {"A": "correct", "B": "incorrect", "C": "not_attempted"}[word.group(1)]


PARSERS: dict[str, Callable[[str], str | None]] = {"three-way": _three_way, "yes-no": _yes_no, "letter": _letter}


class JudgeConfig(BaseModel):
    """One judge's contract (prompt, model, decoding, parser) and how hard to push its endpoint.

    The API key is read from ``api_key_env`` and never recorded. ``prompt`` is the grader's text
    (the project's own by default); ``prompt_source`` says where it came from, for the record.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    model: str
    name: str = ""
    api_key_env: str | None = None
    prompt: str = JUDGE_PROMPT
    prompt_source: str = "aethersearch default"
    parser: Parser = "three-way"
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int | None = 0
    max_tokens: int = Field(default=16, ge=1)
    cache_path: Path | None = None
    concurrency: int = 8
    timeout_s: float = 60.0
    max_retries: int = 4
    deadline_s: float = 600.0

    @property
    def label(self) -> str:
        """The judge's name in tables and metric keys: ``name``, else the model."""
        return self.name or self.model

    @property
    def prompt_sha256(self) -> str:
        """sha256 of the prompt text: part of every cache key and of ``scores.json``."""
        return sha256_bytes(self.prompt.encode("utf-8"))

    def contract(self) -> dict[str, Any]:
        """What decides this judge's verdicts, as recorded in ``scores.json`` and hashed into the cache key."""
        return {"model": self.model, "base_url": self.base_url, "prompt_sha256": self.prompt_sha256,
                "prompt_source": self.prompt_source, "parser": self.parser, "temperature": self.temperature,
                "seed": self.seed, "max_tokens": self.max_tokens}


def load_prompt_file(path: Path) -> str:
    """A published grader's prompt, checked to use only placeholders this project fills.

    A prompt with an unknown ``{field}`` would fail on every case; it is refused here with the names
    the project fills (``PLACEHOLDERS``), and literal braces must be doubled as in ``str.format``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(path, f"cannot read the judge prompt: {exc}", fix="pass a UTF-8 text file") from None
    try:
        fill(text, JudgeCase("check", "q", ["g"], "p"))
    except ConfigError as exc:
        raise DataError(path, exc.message, fix=exc.fix) from None
    return text


class JudgeCase(NamedTuple):
    """One question to judge."""

    id: str
    question: str
    golds: list[str]
    prediction: str


class Verdict(NamedTuple):
    """A judge verdict (``None`` with ``error`` set when the judge gave none: never a grade)."""

    verdict: str | None
    cached: bool
    error: str | None
    reply: str | None = None
    usage: Mapping[str, int] | None = None


class _Fields(dict[str, str]):
    def __missing__(self, key: str) -> str:
        raise ConfigError(f"the judge prompt uses {{{key}}}, which this project does not fill",
                          fix=f"use {', '.join('{' + k + '}' for k in PLACEHOLDERS)}; double a literal brace")


def fill(prompt: str, case: JudgeCase) -> str:
    """``prompt`` with the case's question, golds and prediction under every name in ``PLACEHOLDERS``."""
    values = {"question": case.question, "golds": "; ".join(case.golds), "prediction": case.prediction}
    try:
        return prompt.format_map(_Fields({name: values[field] for name, field in PLACEHOLDERS.items()}))
    except (ValueError, IndexError) as exc:
        raise ConfigError(f"the judge prompt is not a format template: {exc}",
                          fix="double literal braces ({{ and }}) and use named fields only") from None


def cache_key(config: JudgeConfig | str, case: JudgeCase) -> str:
    """sha256 over (the judge's contract, question, gold, prediction): the cache identity of a verdict.

    A bare model name stands for the project's default contract with that model.
    """
    judge = config if isinstance(config, JudgeConfig) else JudgeConfig(base_url="", model=config)
    return _case_key(_keyed_contract(judge), case)


def _keyed_contract(judge: JudgeConfig) -> dict[str, Any]:
    """The part of the contract that decides a verdict (where the judge is served and the prompt's file name
    do not): computed once per judged run, not once per case."""
    return {k: v for k, v in judge.contract().items() if k not in ("base_url", "prompt_source")}


def _case_key(contract: dict[str, Any], case: JudgeCase) -> str:
    return sha256_bytes(dumps([contract, case.question, list(case.golds), case.prediction]))


def parse_verdict(text: str, parser: str = "three-way") -> str | None:
    """Read one of ``VERDICTS`` from a judge's reply with the named parser; None when it holds none."""
    return PARSERS[parser](text)


def load_cache(path: Path | None) -> dict[str, dict[str, Any]]:
    """Cached verdicts by key, with their reply and usage (a torn last line from an interrupted run is ignored)."""
    if path is None:
        return {}
    return {row["key"]: row for row in read_jsonl_tolerant(path).rows
            if isinstance(row, dict) and row.get("verdict") in VERDICTS}


class _Reply(NamedTuple):
    text: str
    usage: dict[str, int]


async def _ask(client: httpx.AsyncClient, config: JudgeConfig, prompt: str) -> _Reply:
    body: dict[str, Any] = {"model": config.model, "messages": [{"role": "user", "content": prompt}],
                            "temperature": config.temperature, "max_tokens": config.max_tokens}
    if config.seed is not None:
        body["seed"] = config.seed
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
            usage = payload.get("usage") or {}
            return _Reply(str(payload["choices"][0]["message"]["content"] or ""),
                          {k: int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")})
        except (httpx.TransportError, httpx.HTTPStatusError) as exc:
            transient = not isinstance(exc, httpx.HTTPStatusError) or exc.response.status_code in _TRANSIENT
            if not transient or attempt > config.max_retries or loop.time() >= deadline:
                raise
            await asyncio.sleep(min(8.0, 0.2 * 2 ** (attempt - 1)) * (0.5 + random.random()))


async def judge_cases_async(cases: Sequence[JudgeCase], config: JudgeConfig, *,
                            transport: httpx.AsyncBaseTransport | None = None) -> dict[str, Verdict]:
    """Judge every case (cache first), appending new verdicts durably to the cache.

    A reply the parser cannot read, and an API error after the transport retries, become a
    ``Verdict`` with ``error`` set and no verdict; neither is cached, so a later run asks again.
    """
    cache = load_cache(config.cache_path)
    results: dict[str, Verdict] = {}
    todo: list[tuple[JudgeCase, str]] = []
    contract = _keyed_contract(config)
    for case in cases:
        key = _case_key(contract, case)
        if key in cache:
            row = cache[key]
            results[case.id] = Verdict(row["verdict"], True, None, row.get("reply"), row.get("usage"))
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
                    reply = await _ask(client, config, fill(config.prompt, case))
                except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
                    results[case.id] = Verdict(None, False, f"{type(exc).__name__}: {exc}")
                    return
                verdict = parse_verdict(reply.text, config.parser)
                if verdict is None:
                    results[case.id] = Verdict(None, False, f"unparseable reply ({config.parser} parser): "
                                                            f"{reply.text[:200]!r}", reply.text, reply.usage)
                    return
                results[case.id] = Verdict(verdict, False, None, reply.text, reply.usage)
                if appender is not None:
                    appender.append({"key": key, "verdict": verdict, "model": config.model,
                                     "prompt_hash": contract["prompt_sha256"], "id": case.id, "reply": reply.text,
                                     "usage": reply.usage})

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


def _nth(values: Sequence[Any], index: int, count: int, option: str, default: Any) -> Any:
    """The ``index``-th judge's value of a repeatable option: one value for all, or one per ``--judge``."""
    if not values:
        return default
    if len(values) == 1:
        return values[0]
    if len(values) != count:
        raise ConfigError(f"{len(values)} {option} values for {count} --judge endpoints",
                          fix=f"give {option} once (for every judge) or once per --judge, in order")
    return values[index]


def build_judges(urls: Sequence[str], *, models: Sequence[str] = (), names: Sequence[str] = (),
                 prompts: Sequence[Path] = (), parsers: Sequence[str] = (), api_key_env: str | None = None,
                 temperature: float = 0.0, seed: int | None = 0,
                 max_tokens: int | None = None) -> list[JudgeConfig]:
    """The judges of ``--judge URL`` (repeatable) with their per-judge options, in order.

    ``max_tokens`` defaults by parser: 16 for a one-word verdict, 1024 for BrowseComp-style graders
    that explain before their ``correct:`` line (a cut reply would be a judge error, not a grade).
    """
    judges = []
    for i, url in enumerate(urls):
        parser = _nth(parsers, i, len(urls), "--judge-parser", "three-way")
        if parser not in PARSERS:
            raise ConfigError(f"unknown --judge-parser {parser!r}", fix=f"use one of {', '.join(PARSERS)}")
        prompt_file = _nth(prompts, i, len(urls), "--judge-prompt", None)
        judges.append(JudgeConfig(
            base_url=url, model=_nth(models, i, len(urls), "--judge-model", "gpt-4o-mini"),
            name=_nth(names, i, len(urls), "--judge-name", ""), api_key_env=api_key_env,
            prompt=load_prompt_file(prompt_file) if prompt_file else JUDGE_PROMPT,
            prompt_source=Path(prompt_file).name if prompt_file else "aethersearch default", parser=parser,
            temperature=temperature, seed=seed,
            max_tokens=max_tokens or (1024 if parser == "yes-no" else 16)))
    return judges
