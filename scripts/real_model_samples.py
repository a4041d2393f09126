"""K sampled Search-R1 rollouts of the real small model on the demo: mean@K, pass@k and maj@K with CIs.

Usage (after scripts/install_real_model.sh; one model server, so run it alone):

    flock /tmp/realmodel.lock python scripts/real_model_samples.py OUT [--samples 5] [--per-source 5]
        [--temperature 0.8] [--max-tokens 200] [--max-turns 3] [--call-timeout 600]
        [--question-deadline 3600] [--attempts 3]

It builds the demo world's corpus, BM25 index and a release of ``--per-source``
questions from each of the six demo sources other than Bamboogle (30 by default),
serves SmolLM2-135M-Instruct with ``scripts/serve_gguf.py`` on a free local port,
runs ``aether run --samples K`` with sampling on, scores the run and prints EM's
mean@K, pass@1..K and maj@K with their 95% CIs (clustered by question) and the
within-question variance share. The figures are what ``OUT/run/scores.json`` holds.

Why the long timeouts and the attempts: on a shared 2-core machine one 200-token
call of the 135M model took up to 4 minutes, past ``aether run``'s 60 s call
timeout, and a run with any errored sample exits non-zero (``--max-error-rate``
0), so the first such sample ended the script before anything was scored. The
run is resumable: each further attempt reruns exactly the errored (id, sample)
pairs; if some still fail after ``--attempts``, the script exits 1 naming them,
and rerunning it with the same OUT retries them.
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
from collections.abc import Callable
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
    code = aether_code(*args)
    if code != 0:
        raise SystemExit(code)


def aether_code(*args: str) -> int:
    """Run one ``aether`` command of this venv; return its exit code."""
    return subprocess.run([str(Path(sys.executable).with_name("aether")), *args], check=False).returncode


def errored_samples(traces: Path) -> list[str]:
    """``id#sample`` of every (id, sample) whose latest trace is an error outcome (what a resume reruns)."""
    from aethersearch.rollout.store import RETRIED_OUTCOMES

    retried = {outcome.value for outcome in RETRIED_OUTCOMES}
    latest: dict[tuple[str, int], str] = {}
    if traces.is_file():
        for line in traces.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                latest[(row["id"], int(row.get("sample", 0)))] = row.get("outcome")
    return [f"{key[0]}#{key[1]}" for key, outcome in sorted(latest.items()) if outcome in retried]


def rollout(run_args: list[str], run_dir: Path, attempts: int,
            run: Callable[..., int] = aether_code) -> None:
    """``aether run`` until it succeeds, at most ``attempts`` times (each resume reruns only errored samples).

    Exits 1 with the errored samples named, and how to retry them, when the last attempt still fails.
    """
    code = 0
    for attempt in range(1, attempts + 1):
        code = run(*run_args)
        if code == 0:
            return
        left = errored_samples(run_dir / "traces.jsonl")
        print(f"aether run exited {code} (attempt {attempt} of {attempts}); errored samples: "
              f"{', '.join(left[:10]) or 'none recorded'}", file=sys.stderr)
    left = errored_samples(run_dir / "traces.jsonl")
    raise SystemExit(f"error: aether run still failed after {attempts} attempts (exit {code}); "
                     f"{len(left)} sample(s) ended in an error outcome in {run_dir / 'traces.jsonl'}: "
                     f"{', '.join(left[:10])}. Nothing was scored. Fix: check the model server "
                     f"({run_dir.parent / 'server.log'}), raise --call-timeout/--question-deadline, and rerun "
                     f"this script with the same OUT (finished samples are kept)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--per-source", type=int, default=5)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--call-timeout", type=float, default=600.0, help="seconds one model call may take")
    parser.add_argument("--question-deadline", type=float, default=3600.0, help="seconds one rollout may take")
    parser.add_argument("--attempts", type=int, default=3, help="aether run attempts (resumes) before giving up")
    args = parser.parse_args()
    status = json.loads((Path(sys.prefix) / "real-model.json").read_text())
    if status.get("status") != "ok":
        raise SystemExit(f"real model not installed: {status.get('reason')} (run scripts/install_real_model.sh)")
    args.out.mkdir(parents=True, exist_ok=True)
    release, index = build_inputs(args.out, args.per_source)
    proc, url = serve(status["gguf"], args.out / "server.log")
    try:
        start = time.monotonic()
        rollout(["run", str(release), "--out", str(args.out / "run"), "--agent", "search-r1", "--endpoint", url,
                 "--model", "smollm2", "--index", str(index), "--concurrency", "1", "--samples", str(args.samples),
                 "--temperature", str(args.temperature), "--max-tokens", str(args.max_tokens),
                 "--max-turns", str(args.max_turns), "--max-tool-calls", str(args.max_turns),
                 "--call-timeout", str(args.call_timeout), "--question-deadline", str(args.question_deadline),
                 "--no-progress"], args.out / "run", args.attempts)
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
