"""Subprocess body for the crash test: run (or resume) the questions of a rollout file.

Usage: python crash_runner.py URL ROLLOUT RUN_DIR — prints "ready" once imports are done.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aethersearch.agents.llm import OpenAIClient  # noqa: E402
from aethersearch.agents.search_r1 import SearchR1Agent  # noqa: E402
from aethersearch.records import Budget  # noqa: E402
from aethersearch.rollout.fingerprint import load_rollout_questions  # noqa: E402
from aethersearch.rollout.runner import run_questions  # noqa: E402
from tests.agents.fakes import FakeSearchEnv  # noqa: E402
from tests.rollout.helpers import fingerprint  # noqa: E402


def main() -> None:
    url, rollout, run_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    questions = load_rollout_questions(rollout)
    agent = SearchR1Agent()
    fp = fingerprint(rollout, agent, url, count=len(questions))
    print("ready", flush=True)
    run_questions(questions, agent, lambda q: FakeSearchEnv(), Budget(), run_dir, fp,
                  llm=OpenAIClient(url, "m", max_retries=0), concurrency=3)
    print("done", flush=True)


if __name__ == "__main__":
    main()
