"""The optional offline vLLM backend: a clear error without vllm; a real generation with it (GPU)."""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

from aethersearch.errors import ConfigError
from aethersearch.records import Decoding

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed: the missing-package error cannot occur")
def test_without_vllm_the_engine_explains_how_to_get_it() -> None:
    from aethersearch.agents.vllm_engine import VLLMEngine

    with pytest.raises(ConfigError, match="needs the vllm package"):
        VLLMEngine("any-model")


@pytest.mark.skipif(not HAS_VLLM or not os.environ.get("AETHER_VLLM_MODEL"),
                    reason="needs vllm, a GPU and AETHER_VLLM_MODEL (a local model path)")
def test_vllm_engine_generates_with_stop_strings() -> None:
    from aethersearch.agents.vllm_engine import VLLMEngine

    engine = VLLMEngine(os.environ["AETHER_VLLM_MODEL"], gpu_memory_utilization=0.5)

    async def go():
        return await asyncio.gather(*(engine.complete(f"Count: {i}, {i + 1},", Decoding(max_tokens=8, stop=["\n"]))
                                      for i in range(4)))
    results = asyncio.run(go())
    assert all(r.completion_tokens <= 8 and "\n" not in r.text for r in results)
