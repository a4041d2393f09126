"""``benchmarks/rollout.py --where``: each CPU sample goes to the innermost harness module on its stack.

Why a test: the table it prints is the issue's "where the extra time per call goes"; a
sample put in the wrong row (the outermost harness frame, or aiohttp under the client
counted as event-loop time) would send the next optimisation to the wrong place.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "rollout.py"


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("rollout_benchmark_under_test", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass-like NamedTuples look their module up while the file runs
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        gc.callbacks.remove(module.GC_CLOCK._callback)  # the benchmark's GC clock, registered at import
        del sys.modules[spec.name]


def _function_in(path: str) -> Callable[..., Any]:
    """A function whose code says it lives in ``path``: called with an inner function, it calls that,
    else it returns its own frame."""
    namespace: dict[str, Any] = {}
    source = "import sys\ndef f(inner=None):\n    return inner() if inner is not None else sys._getframe()\n"
    exec(compile(source, path, "exec"), namespace)  # noqa: S102 -- a fixed source, only its file name varies
    return namespace["f"]  # type: ignore[no-any-return]


def _stack(*paths: str) -> FrameType:
    """The innermost frame of nested calls through functions of ``paths`` (outermost first)."""
    call: Callable[[], Any] | None = None
    for path in reversed(paths):
        call = (lambda f, inner: (lambda: f(inner)))(_function_in(path), call)
    assert call is not None
    frame: FrameType = call()
    return frame


def test_a_sample_belongs_to_the_innermost_harness_module(bench: ModuleType) -> None:
    sampler = bench.CpuSampler()
    under_client = _stack("/venv/asyncio/events.py", "/src/aethersearch/rollout/runner.py",
                          "/src/aethersearch/agents/search_r1.py", "/src/aethersearch/agents/llm.py",
                          "/venv/site-packages/aiohttp/client.py")
    assert sampler._category(under_client) == bench.WHERE["aethersearch/agents/llm.py"]
    in_runner = _stack("/venv/asyncio/events.py", "/src/aethersearch/rollout/runner.py",
                       "/venv/site-packages/orjson.py")
    assert sampler._category(in_runner) == bench.WHERE["aethersearch/rollout/runner.py"]
    loop_only = _stack("/venv/asyncio/base_events.py", "/venv/site-packages/aiohttp/client_proto.py")
    assert sampler._category(loop_only) == bench.NO_HARNESS_FRAME


def test_the_sampler_counts_cpu_time(bench: ModuleType) -> None:
    with bench.CpuSampler() as sampler:
        start = time.process_time()
        while time.process_time() - start < 0.05:  # CPU, not wall time: a loaded machine only takes longer
            sum(range(1000))
    assert sum(sampler.counts.values()) >= 1
    assert set(sampler.counts) <= {*bench.WHERE.values(), *bench.WHERE_HERE.values(), bench.NO_HARNESS_FRAME}
