"""K sampled Search-R1 rollouts of the real small model on the demo: mean@K, pass@k and maj@K with CIs.

Usage (after scripts/install_real_model.sh; one model server, so run it alone):

    flock /tmp/realmodel.lock python scripts/real_model_samples.py OUT [--samples 5] [--per-source 5]
        [--temperature 0.8] [--max-tokens 200] [--max-turns 3]

It builds the demo world's corpus, BM25 index and a release of ``--per-source``
questions from each of the six demo sources other than Bamboogle (30 by default),
serves SmolLM2-135M-Instruct with ``scripts/serve_gguf.py`` on a free local port,
runs ``aether run --samples K`` with sampling on, scores the run and prints EM's
mean@K, pass@1..K and maj@K with their 95% CIs (clustered by question) and the
within-question variance share. The figures are what ``OUT/run/scores.json`` holds.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique")


def build_inputs(out: Path, per_source: int) -> tuple[Path, Path]:
    """The demo corpus and index, and a release of ``per_source`` questions from each of SOURCES."""
    from aethersearch.curation.build import build_from_config
    from aethersearch.sources.demo import write_demo_sources
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    store = import_corpus("demo", "demo", out / "corpus", seed=0, overwrite=True).store
    build_index(store, "bm25", out / "index", config={"numba": False}, overwrite=True)
    config_path = write_demo_sources(out / "demo_sources", seed=0)
    config = yaml.safe_load(config_path.read_text())
    config["planned_per_source"] = per_source
    config["sources"] = [s for s in config["sources"] if s["dataset"] in SOURCES]
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return build_from_config(config_path, out / "release").release_dir, out / "index"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(gguf: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the model server (two threads, passive OpenMP waits) and wait until it answers."""
    port = _free_port()
    with log.open("wb") as handle:
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "serve_gguf.py"), "--model", gguf,
                                 "--port", str(port), "--n-ctx", "8192", "--threads", "2", "--alias", "smollm2"],
                                stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, "OMP_WAIT_POLICY": "passive"})
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the model server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(root + "/v1/models", timeout=5) as reply:
                if reply.status == 200:
                    return proc, root + "/v1"
        except OSError:
            time.sleep(1)
    proc.kill()
    raise SystemExit(f"the model server did not answer within 300 s: {log.read_text()[-2000:]}")


def aether(*args: str) -> None:
    """Run one ``aether`` command of this venv; its failure ends the script with its exit code."""
    done = subprocess.run([str(Path(sys.executable).with_name("aether")), *args], check=False)
    if done.returncode != 0:
        raise SystemExit(done.returncode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--per-source", type=int, default=5)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--max-turns", type=int, default=3)
    args = parser.parse_args()
    status = json.loads((Path(sys.prefix) / "real-model.json").read_text())
    if status.get("status") != "ok":
        raise SystemExit(f"real model not installed: {status.get('reason')} (run scripts/install_real_model.sh)")
    args.out.mkdir(parents=True, exist_ok=True)
    release, index = build_inputs(args.out, args.per_source)
    proc, url = serve(status["gguf"], args.out / "server.log")
    try:
        start = time.monotonic()
        aether("run", str(release), "--out", str(args.out / "run"), "--agent", "search-r1", "--endpoint", url,
               "--model", "smollm2", "--index", str(index), "--concurrency", "1", "--samples", str(args.samples),
               "--temperature", str(args.temperature), "--max-tokens", str(args.max_tokens),
               "--max-turns", str(args.max_turns), "--max-tool-calls", str(args.max_turns), "--no-progress")
        wall = time.monotonic() - start
    finally:
        proc.terminate()
        proc.wait(30)
    aether("score", str(args.out / "run"), "--release", str(release))
    scores = json.loads((args.out / "run" / "scores.json").read_text())
    micro = scores["overall"]["micro"]
    print(f"{scores['question_count']} questions x {scores['samples']} samples, temperature {args.temperature}, "
          f"rollout wall {wall:.0f} s; EM with 95% CIs clustered by question:")
    from aethersearch.scoring.reducers import reducer_names

    for name in reducer_names(scores["samples"], binary=True):
        est = micro["reducers"]["em"][name]
        print(f"  {name:>7}  {100 * est['mean']:5.1f}  [{100 * est['ci_low']:5.1f}, {100 * est['ci_high']:5.1f}]")
    print(f"  within-question variance share: {micro['variance']['em']['share']}")
    print(f"  outcomes: {scores['outcomes']}")


if __name__ == "__main__":
    main()
