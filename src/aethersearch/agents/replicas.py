"""Several OpenAI-compatible replicas behind one client: least-outstanding balancing, health, failover.

Why: a real evaluation runs many episodes against several vLLM/SGLang replicas of one
model. Round-robin piles work on a replica that has slowed down; sending each call to
the healthy replica with the fewest calls in flight does not. A replica whose call
fails transiently (connection refused or reset, timeout, 5xx, 429) is benched for a
growing cool-down and the same call is sent again at once to another replica, so one
replica dying mid-run costs no question. Non-transient refusals (a 4xx such as a
context-length error) are the request's fault and are raised as they are: another
replica would refuse them too.

Every replica must serve the same model: :meth:`ReplicaPool.served_model` asks each
one (``GET /v1/models``) and refuses the run when their answers differ, because
mixing two checkpoints in one run would silently average them.

``--endpoint`` takes the replicas comma-separated: ``--endpoint http://a:8000/v1,http://b:8000/v1``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from aethersearch.agents.llm import LLM, Completion, OpenAIClient
from aethersearch.errors import ConfigError, EndpointError
from aethersearch.records import Decoding

__all__ = ["ReplicaPool", "_T", "split_endpoints"]

_T = TypeVar("_T")


def split_endpoints(endpoint: str) -> list[str]:
    """The replica URLs of an ``--endpoint`` value (comma-separated; blanks and duplicates refused)."""
    urls = [u.strip() for u in endpoint.split(",")]
    if any(not u for u in urls):
        raise ConfigError(f"--endpoint {endpoint!r} has an empty URL", fix="separate replica URLs by single commas")
    if len(set(urls)) != len(urls):
        raise ConfigError(f"--endpoint {endpoint!r} lists a replica twice", fix="list each replica once")
    return urls


class _Replica:
    """One replica's client and its live state."""

    def __init__(self, client: OpenAIClient) -> None:
        self.client = client
        self.outstanding = 0
        self.failures = 0  # consecutive transient failures
        self.benched_until = 0.0
        self.calls = 0

    def healthy(self, now: float) -> bool:
        return now >= self.benched_until


class ReplicaPool(LLM):
    """An :class:`~aethersearch.agents.llm.LLM` over several replicas of one model.

    Each replica's client makes a single attempt per call (``max_retries=0``); the pool
    owns retries, so a failed attempt moves to another replica instead of backing off on
    the dead one. Retries are capped by ``max_retries`` and the ``deadline_s`` of the call.
    """

    def __init__(self, urls: Sequence[str], model: str, *, api_key: str | None = None, concurrency: int = 64,
                 call_timeout_s: float = 120.0, deadline_s: float = 600.0, max_retries: int = 6,
                 backoff_base_s: float = 0.25, backoff_cap_s: float = 8.0, bench_s: float = 1.0,
                 bench_cap_s: float = 30.0, seed: int | None = None) -> None:
        if len(urls) < 1:
            raise ConfigError("no replica URL given", fix="pass --endpoint URL[,URL...]")
        self.replicas = [_Replica(OpenAIClient(u, model, api_key=api_key, concurrency=concurrency,
                                               call_timeout_s=call_timeout_s, deadline_s=deadline_s,
                                               max_retries=0, seed=seed)) for u in urls]
        self.endpoint = ",".join(r.client.base_url for r in self.replicas)
        self.model = model
        #: chat template and tokenizer queries (agents/served.py): the replicas serve one model, ask the first
        self.served = self.replicas[0].client.served
        self.deadline_s = deadline_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.bench_s = bench_s
        self.bench_cap_s = bench_cap_s
        self._rng = random.Random(seed)
        self._next = 0  # rotates ties, so equal loads spread evenly
        self.retries = 0

    @property
    def calls(self) -> int:
        """HTTP attempts made by all replicas together."""
        return sum(r.client.calls for r in self.replicas)

    async def __aenter__(self) -> ReplicaPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every replica's session."""
        for replica in self.replicas:
            await replica.client.aclose()

    def _pick(self, avoid: _Replica | None) -> _Replica:
        """The healthy replica with the fewest calls in flight (else the one back soonest)."""
        now = time.monotonic()
        n = len(self.replicas)
        start = self._next
        self._next = (self._next + 1) % n
        order = [self.replicas[(start + i) % n] for i in range(n)]
        healthy = [r for r in order if r.healthy(now) and r is not avoid] or [r for r in order if r.healthy(now)]
        if healthy:
            return min(healthy, key=lambda r: r.outstanding)
        return min(order, key=lambda r: r.benched_until)

    async def _call(self, send: Callable[[OpenAIClient], Awaitable[_T]]) -> _T:
        start = time.monotonic()
        last: _Replica | None = None
        attempt = 0
        while True:
            attempt += 1
            replica = self._pick(last)
            wait = replica.benched_until - time.monotonic()
            if wait > 0:  # every replica is benched: wait for the first to come back, with jitter
                pause = wait + self._rng.uniform(0.0, min(self.backoff_cap_s, self.backoff_base_s * 2 ** attempt))
                if time.monotonic() + pause - start >= self.deadline_s:
                    raise EndpointError(f"all {len(self.replicas)} replicas of {self.model!r} are failing "
                                        f"({self.endpoint}); the call's {self.deadline_s:g}s deadline would pass",
                                        transient=True, kind="connection",
                                        fix="check the model servers; rerun the same command to retry errored ids")
                await asyncio.sleep(pause)
            replica.outstanding += 1
            replica.calls += 1
            try:
                result = await send(replica.client)
            except EndpointError as exc:
                if not exc.transient:
                    raise
                replica.failures += 1
                replica.benched_until = time.monotonic() + min(self.bench_cap_s,
                                                               self.bench_s * 2 ** (replica.failures - 1))
                if attempt > self.max_retries:
                    raise EndpointError(f"{exc.message} — giving up after {attempt} attempts over "
                                        f"{len(self.replicas)} replicas", status=exc.status, transient=True,
                                        kind=exc.kind, fix=exc.fix) from None
                self.retries += 1
                last = replica
                continue
            finally:
                replica.outstanding -= 1
            replica.failures = 0
            replica.benched_until = 0.0
            return result

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        """Text completion on the least-loaded healthy replica (another one if it fails)."""
        return await self._call(lambda client: client.complete(prompt, decoding))

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """Chat completion on the least-loaded healthy replica (another one if it fails)."""
        return await self._call(lambda client: client.chat(messages, decoding, tools))

    def sent_decoding(self, decoding: Decoding) -> dict[str, Any]:
        """The decoding fields every replica receives (one client code path, so one answer; for run.json)."""
        return self.replicas[0].client.sent_decoding(decoding)

    async def served_model(self) -> dict[str, Any] | None:
        """What every replica serves; ConfigError unless all report the same model.

        An unreachable replica raises :class:`EndpointError` (after its client's preflight
        retries): a run never starts with a replica nobody has checked.
        """
        answers = []
        for replica in self.replicas:
            client = replica.client
            saved, client.max_retries = client.max_retries, 3  # the preflight may retry a slow starter
            try:
                answers.append(await client.served_model())
            finally:
                client.max_retries = saved
        if any(a != answers[0] for a in answers[1:]):
            listing = "; ".join(f"{r.client.base_url}: {a}" for r, a in zip(self.replicas, answers, strict=True))
            raise ConfigError(f"the replicas do not serve the same model: {listing}",
                              fix="point --endpoint only at replicas of one checkpoint")
        return answers[0]
