"""Subprocess body for the kill -9 test: serve the six-page sandbox with a durable action log.

Usage: python serve_mini.py INDEX_DIR PORT ACTION_LOG
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aethersearch.sandbox.episode import Sandbox  # noqa: E402
from aethersearch.sandbox.server import serve  # noqa: E402
from aethersearch.search.index_dir import open_index  # noqa: E402
from tests.sandbox.conftest import make_masks  # noqa: E402


def main() -> None:
    index_dir, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    opened = open_index(index_dir)
    serve(Sandbox(make_masks(), opened.index, opened.store, release_id="mini"), port=port, action_log=log)


if __name__ == "__main__":
    main()
