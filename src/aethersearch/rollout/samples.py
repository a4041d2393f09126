"""K samples per question: the (question, sample) units of a run and each sample's own seed.

Why a seed per sample: a sampled policy evaluated K times per question must send
K *different* requests, and the same K requests again on a resume, on another Ray
shard or on another replica. So sample ``k`` of question ``q`` uses a seed derived
from the run's seed, ``q`` and ``k`` alone (sha256, never Python's randomised
``hash``, never the order questions happen to run in). A one-sample run keeps the
run's own seed unchanged, so its requests are exactly those of a run made before
``--samples`` existed. A run with no seed (``--seed`` unset) sends none: its
samples are then drawn by the server's own randomness and are not reproducible.

A run's unit of work is a :data:`SampleKey` ``(question id, sample)``: the run
store keeps the latest trace per key, a resume runs exactly the missing or
errored keys, and ``predictions.jsonl`` holds one row per key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence

from aethersearch.errors import ConfigError
from aethersearch.records import Decoding, RolloutQuestion

__all__ = ["SEED_MODULUS", "SampleKey", "check_samples", "derive_seed", "pending_units", "sample_decoding",
    "sample_keys", "sample_seed", "unit_label"]

#: (question id, sample index): one rollout of a run
SampleKey = tuple[str, int]

#: Derived seeds stay below 2**31: llama.cpp, vLLM and SGLang all accept a non-negative 32-bit int.
SEED_MODULUS = 2**31 - 1


def check_samples(samples: int) -> int:
    """Validate ``--samples K`` (a whole number >= 1)."""
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}",
                          fix="pass --samples 1 for one rollout per question, or K > 1 for K sampled rollouts")
    return samples


def derive_seed(seed: int, question_id: str, sample: int) -> int:
    """The seed of sample ``sample`` of ``question_id`` in a run seeded ``seed`` (stable across processes)."""
    digest = hashlib.sha256(f"aether-sample\0{seed}\0{question_id}\0{sample}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_MODULUS


def sample_seed(seed: int | None, question_id: str, sample: int, samples: int) -> int | None:
    """The seed sent for one sample: the run's seed when K = 1, a derived one when K > 1, None without a seed."""
    if seed is None or samples == 1:
        return seed
    return derive_seed(seed, question_id, sample)


def sample_decoding(decoding: Decoding, question_id: str, sample: int, samples: int) -> Decoding:
    """``decoding`` with the seed of this sample (the same object when nothing changes)."""
    seed = sample_seed(decoding.seed, question_id, sample, samples)
    return decoding if seed == decoding.seed else decoding.model_copy(update={"seed": seed})


def sample_keys(question_ids: Iterable[str], samples: int) -> Iterator[SampleKey]:
    """Every (id, sample) of a run, question by question, samples in order: the order of ``predictions.jsonl``."""
    for question_id in question_ids:
        for sample in range(samples):
            yield (question_id, sample)


def pending_units(questions: Sequence[RolloutQuestion], samples: int,
                  finished: set[SampleKey]) -> list[tuple[RolloutQuestion, int]]:
    """The (question, sample) pairs still to run: every pair whose key has no final trace."""
    return [(question, sample) for question in questions for sample in range(samples)
            if (question.id, sample) not in finished]


def unit_label(key: SampleKey) -> str:
    """How messages name one rollout: the id, with ``#k`` for the samples after the first."""
    question_id, sample = key
    return question_id if sample == 0 else f"{question_id}#{sample}"
