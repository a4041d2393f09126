"""Distractor robustness probe: does *injected* noise derail synthesis of evidence the agent still reached?

A robustness test of this project's own, not WebDetective's Lead-astray (which
is about the noise of the agent's *own* trajectory: ``lead_astray.py``;
both are written out in ``docs/webdetective-metrics.md``). The agent is rerun
with the same settings, except that its environment inserts distractor
passages drawn from the corpus into every observation at a controlled ratio,
seeded. Then, per question:

* eligible(q)    = the clean run answered q correctly AND the noisy run still
  gathered all of q's evidence by its tools (the evidence stayed accessible);
* distracted(q)  = eligible(q) AND the noisy run did not answer q correctly.

distractor_rate = |distracted| / |eligible| (``None`` when nothing is
eligible); the Pass@1 drop from clean to noisy is reported beside it.

Distractors never include a page of the question's own path/evidence (so noise
cannot add real evidence or un-mask a hidden hop), are drawn without
replacement per call, land at seeded ranks among search hits and after the
page of a visit, and their ids are recorded in the noisy ToolCall's
``arguments["_noise"]`` so a trace shows exactly what was injected.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aethersearch.corpus.base import DocumentStore
from aethersearch.diagnostics.factorised import EpisodeEvidence
from aethersearch.environment import Environment, ToolResult
from aethersearch.errors import ConfigError
from aethersearch.records import Document

__all__ = ["NoisyEnvironment", "distractor_count", "distractor_summary"]


def _title_key(title: str) -> str:
    return " ".join(title.casefold().replace("_", " ").split())


def distractor_count(real: int, ratio: float) -> int:
    """How many distractors make them ``ratio`` of an observation holding ``real`` documents.

    ratio = d / (d + real)  ⇒  d = round(real · ratio / (1 − ratio)); at least one
    distractor whenever ratio > 0 and something was returned.
    """
    if not 0.0 <= ratio < 1.0:
        raise ConfigError(f"lead-astray ratio must be in [0, 1), got {ratio!r}",
                          fix="use e.g. --ratio 0.5 (half of every observation is noise)")
    if ratio == 0.0 or real == 0:
        return 0
    return max(1, round(real * ratio / (1.0 - ratio)))


class NoisyEnvironment:
    """An Environment wrapper inserting seeded corpus distractors into observations.

    Distractors are drawn from ``pool`` (candidate ids) when given, else by
    seeded row from a store that offers ``id_at`` (the JSONL store: no list of
    21M ids is ever built), else from ``store.ids()``. ``exclude`` holds the
    question's own page ids and ``exclude_titles`` its supporting-page titles
    (7-source rows name pages by title). The draw for the n-th call of an
    episode depends only on (seed, episode key, n), so a rerun is identical.
    """

    def __init__(self, inner: Environment, store: DocumentStore, pool: Sequence[str] | None = None, *,
                 ratio: float, seed: int, key: str, exclude: Sequence[str] = (),
                 exclude_titles: Sequence[str] = (),
                 noisy_tools: Sequence[str] = ("search", "visit")) -> None:
        distractor_count(1, ratio)  # validates the ratio early
        self._inner = inner
        self._store = store
        self._excluded = frozenset(exclude)
        self._excluded_titles = frozenset(_title_key(t) for t in exclude_titles)
        rows = store.rows
        #: the id of a drawn row: the pool's, else the store's own row (no id list held)
        self._id_at: Callable[[int], str]
        self._pool: list[str] | None = None  # the ids drawn from, when the store has no rows to draw by
        if pool is not None or rows is None:
            self._pool = list(pool) if pool is not None else list(store.ids())
            self._size, self._id_at = len(self._pool), self._pool.__getitem__
        else:
            self._size, self._id_at = len(store), rows.id_at
        self._ratio = ratio
        self._seed = seed
        self._key = key
        self._noisy_tools = tuple(noisy_tools)
        self._calls = 0
        self.injected: list[str] = []

    @property
    def tools(self) -> tuple[str, ...]:
        return self._inner.tools

    def _rng(self) -> random.Random:
        digest = hashlib.sha256(f"{self._seed}\x1f{self._key}\x1f{self._calls}".encode()).digest()
        self._calls += 1
        return random.Random(int.from_bytes(digest[:8], "big"))

    def _draw(self, rng: random.Random, count: int, present: set[str]) -> list[Document]:
        """Up to ``count`` distinct distractors, none excluded or already shown (rejection sampling)."""
        chosen: list[Document] = []
        seen = set(present)
        for _ in range(50 * count + 50):
            if len(chosen) == count or self._size == 0:
                break
            row = rng.randrange(self._size)
            doc_id = self._id_at(row)
            if doc_id in seen or doc_id in self._excluded:
                continue
            seen.add(doc_id)
            document = self._store.get(doc_id)
            if _title_key(document.title) in self._excluded_titles:
                continue
            chosen.append(document)
        return chosen

    def _noisy(self, result: ToolResult) -> ToolResult:
        rng = self._rng()
        if result.call.error is not None or result.call.tool not in self._noisy_tools:
            return result
        count = distractor_count(len(result.documents), self._ratio)
        chosen = self._draw(rng, count, {doc.id for doc in result.documents}) if count else []
        if not chosen:
            return result
        documents: list[Document] = list(result.documents)
        # search: distractors land at seeded ranks among the hits; visit: the page
        # asked for stays first (the tool's contract) and distractors follow it
        low = 0 if result.call.tool == "search" else len(documents)
        for document in chosen:
            documents.insert(rng.randint(low, len(documents)), document)
        ids = [doc.id for doc in chosen]
        self.injected += ids
        arguments = {**result.call.arguments, "_noise": {"distractor_ids": ids, "ratio": self._ratio}}
        call = result.call.model_copy(update={"returned_ids": [doc.id for doc in documents],
                                              "arguments": arguments})
        return ToolResult(documents, call)

    async def search(self, query: str, k: int) -> ToolResult:
        """Search through the inner environment, then mix in distractors."""
        return self._noisy(await self._inner.search(query, k))

    async def visit(self, page: str) -> ToolResult:
        """Visit through the inner environment, then append/insert distractor passages."""
        return self._noisy(await self._inner.visit(page))

    async def close(self) -> None:
        await self._inner.close()


def distractor_summary(clean: Mapping[str, EpisodeEvidence], noisy: Mapping[str, EpisodeEvidence],
                       *, ratio: float, seed: int) -> dict[str, Any]:
    """``probes.json["distractors"]``: the rate, its parts, the Pass@1 drop and the distracted ids.

    Only questions present in both runs count; errors in either are left out.
    """
    ids = sorted(set(clean) & set(noisy))
    eligible = [q for q in ids if clean[q].correct and noisy[q].sufficient_by_search]
    led = [q for q in eligible if not noisy[q].correct]
    n = len(ids)
    clean_pass = sum(clean[q].correct for q in ids) / n if n else None
    noisy_pass = sum(noisy[q].correct for q in ids) / n if n else None
    return {
        "ratio": ratio,
        "seed": seed,
        "n": n,
        "n_eligible": len(eligible),
        "n_distracted": len(led),
        "distractor_rate": len(led) / len(eligible) if eligible else None,
        "pass_at_1_clean": clean_pass,
        "pass_at_1_noisy": noisy_pass,
        "pass_at_1_drop": (clean_pass - noisy_pass) if clean_pass is not None and noisy_pass is not None else None,
        "distracted_ids": led,
        "definition": "robustness probe of this project (not the paper's Lead-astray): eligible = clean run "
                      "correct and noisy run still gathered all evidence; rate = eligible but wrong with seeded "
                      "corpus distractors injected / eligible",
    }
