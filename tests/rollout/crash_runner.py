"""Subprocess body for the crash test: run (or resume) the questions of a rollout file.

Usage: python crash_runner.py URL ROLLOUT RUN_DIR [SAMPLES] — prints "ready" once imports are done.
With SAMPLES K > 1 each question is sampled K times at temperature 0.7 (seeds derived per sample).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aethersearch.agents.llm import OpenAIClient  # noqa: E402
from aethersearch.agents.search_r1 import SearchR1Agent  # noqa: E402
from aethersearch.records import Budget, Decoding  # noqa: E402
from aethersearch.rollout.fingerprint import load_rollout_questions  # noqa: E402
from aethersearch.rollout.runner import run_questions  # noqa: E402
from tests.agents.fakes import FakeSearchEnv  # noqa: E402
from tests.rollout.helpers import fingerprint  # noqa: E402


def main() -> None:
    url, rollout, run_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    samples = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    questions = load_rollout_questions(rollout)
    agent = SearchR1Agent()
    decoding = Decoding(temperature=0.7) if samples > 1 else None
    fp = fingerprint(rollout, agent, url, count=len(questions), samples=samples, decoding=decoding)
    print("ready", flush=True)
    run_questions(questions, agent, lambda q: FakeSearchEnv(), Budget(), run_dir, fp,
                  llm=OpenAIClient(url, "m", max_retries=0), concurrency=3)
    print("done", flush=True)


if __name__ == "__main__":
    main()
