"""Optional offline vLLM backend: the :class:`~aethersearch.agents.llm.LLM` protocol without a server.

Why: on a GPU box, evaluating a local checkpoint (Search-R1 Base/SFT/DPO/RL) with
``vllm.LLM`` avoids running and babysitting an HTTP server, and batches all
concurrent episodes into one ``generate`` call. Requests that arrive within
``batch_window_s`` of each other are generated together in a worker thread, so
the async runner drives it exactly like :class:`~aethersearch.agents.llm.OpenAIClient`.

Install with the ``vllm`` extra; without vllm (or without a GPU) constructing the
engine raises ``ConfigError`` and the tests skip. Tool calling is not offered
offline (vLLM's tool parsers live in its server): use ``search-r1``, ``direct`` or
``naive-rag`` with this backend, or serve the model with ``vllm serve`` for ``react``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aethersearch.agents.llm import LLM, Completion, ConstrainedDecoding
from aethersearch.errors import ConfigError, EndpointError
from aethersearch.records import Decoding

__all__ = ["VLLMEngine"]


class VLLMEngine(LLM):
    """``vllm.LLM`` behind the async ``complete``/``chat`` interface, with micro-batching."""

    endpoint: str | None = None

    def __init__(self, model: str, *, batch_window_s: float = 0.01, max_batch: int = 512,
                 **engine_kwargs: Any) -> None:
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            raise ConfigError("the vLLM offline backend needs the vllm package (and a GPU)",
                              fix="pip install 'aethersearch[vllm]', or serve the model with "
                                  "`vllm serve` and pass --endpoint") from None
        self._sampling_params = SamplingParams
        self._llm = LLM(model=model, **engine_kwargs)
        self.model = model
        self.endpoint = f"vllm-offline:{model}"
        self.batch_window_s = batch_window_s
        self.max_batch = max_batch
        self._pending: list[tuple[str, Any, asyncio.Future[Completion]]] = []
        self._flusher: asyncio.Task[None] | None = None

    def _params(self, decoding: Decoding) -> Any:
        if isinstance(decoding, ConstrainedDecoding):  # never drop a constraint silently
            raise ConfigError("the offline vLLM backend does not apply response_format (structured output)",
                              fix="serve the model with `vllm serve` and pass --endpoint, or set the agent's "
                                  "structured option to off")
        return self._sampling_params(temperature=decoding.temperature, top_p=decoding.top_p,
                                     top_k=decoding.top_k, min_p=decoding.min_p,
                                     repetition_penalty=decoding.repetition_penalty,
                                     presence_penalty=decoding.presence_penalty,
                                     frequency_penalty=decoding.frequency_penalty,
                                     max_tokens=decoding.max_tokens, seed=decoding.seed,
                                     stop=list(decoding.stop) or None)

    @staticmethod
    def _completion(output: Any, elapsed: float) -> Completion:
        best = output.outputs[0]
        stop_reason = best.stop_reason if isinstance(best.stop_reason, str) else None
        return Completion(text=best.text, finish_reason=best.finish_reason, stop_reason=stop_reason,
                          prompt_tokens=len(output.prompt_token_ids or []),
                          completion_tokens=len(best.token_ids), tool_calls=[], elapsed_s=elapsed, attempts=1)

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        """Queue ``prompt``; it is generated with the other prompts of its batch window."""
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._pending.append((prompt, self._params(decoding), future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            await asyncio.sleep(self.batch_window_s)
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            start = time.monotonic()
            try:
                outputs = await asyncio.to_thread(self._llm.generate, [p for p, _, _ in batch],
                                                  [s for _, s, _ in batch], use_tqdm=False)
            except Exception as exc:  # noqa: BLE001 — every waiting episode gets the error
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(EndpointError(f"vLLM generate failed: {exc}"))
                continue
            elapsed = time.monotonic() - start
            for (_, _, future), output in zip(batch, outputs, strict=True):
                if not future.done():
                    future.set_result(self._completion(output, elapsed))

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """Chat with the model's own chat template (no tool calling offline)."""
        if tools:
            raise ConfigError("the offline vLLM backend does not parse tool calls",
                              fix="serve the model with `vllm serve --enable-auto-tool-choice` and use --endpoint")
        start = time.monotonic()
        outputs = await asyncio.to_thread(self._llm.chat, [messages], self._params(decoding), use_tqdm=False)
        return self._completion(outputs[0], time.monotonic() - start)
