"""Shared helpers for runner tests: a rollout file, a fingerprint, a Search-R1 rule model."""

from __future__ import annotations

from pathlib import Path

from aethersearch.jsonl import write_jsonl
from aethersearch.records import Budget, Decoding, RolloutQuestion, RunFingerprint
from aethersearch.rollout.fingerprint import build_fingerprint, rollout_file_info
from aethersearch.testing.scripted_server import search_r1_rule


def questions(n: int) -> list[RolloutQuestion]:
    """``n`` questions whose scripted answer is derivable from the text."""
    return [RolloutQuestion(id=f"q{i:03d}", question=f"Which harbour is case {i} about in Paris")
            for i in range(n)]


def answer_for(question: str) -> str:
    """The scripted model's answer: ``answer <case number>``."""
    return "answer " + question.split("case ")[1].split(" ")[0]


MODEL = search_r1_rule(answer_for, searches=1)


def write_rollout(path: Path, rows: list[RolloutQuestion]) -> Path:
    write_jsonl(path, rows)
    return path


def fingerprint(rollout: Path, agent, url: str | None, *, budget: Budget | None = None,
                decoding: Decoding | None = None, count: int = 0, samples: int = 1) -> RunFingerprint:
    return build_fingerprint(rollout_file_info(rollout), question_count=count, agent=agent,
                             budget=budget or Budget(), decoding=decoding or Decoding(),
                             endpoint=url, model="m", corpus_hash="c" * 8, index_hash="i" * 8, samples=samples)
