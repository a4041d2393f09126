"""Is greedy decoding on this server a function of the prompt alone? Replay one recorded step cold and prefix-warm.

Why: ``aether noise`` measures how often reruns of the same run disagree, and a budget curve
is checked against reruns; both assume nothing but the prompt decides a temperature-0 reply.
On llama.cpp it does not: evaluating a prompt on top of a cached prefix (a sequential run,
where turn k's prompt extends turn k-1's) splits the work into other batches than evaluating
it in one pass (after another question's prompt), and the logits differ enough to flip the
greedy argmax. This replays step ``--step`` of a Search-R1 trace with the run's own
``sent_decoding``, on the run's server or another serving the same model:

* ``cold``: another prompt is evaluated first, then the step's context;
* ``again``: the same context immediately again (full cache hit);
* ``prefix-warm``: the previous step's context first (as the run did), then this one.

and prints each reply beside the recorded one. ``python benchmarks/greedy_cache.py RUN QUESTION_ID
--endpoint http://127.0.0.1:8080`` (the endpoint without ``/v1``; needs ``scripts/serve_gguf.py``'s
``/apply-template``). Measured on SmolLM2-135M (docs/deltas-that-hold-up.md): two of two
diverging questions reproduce the recorded text prefix-warm and the rerun's text cold.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx

from aethersearch.agents.prompts import search_r1_prompt_for

OTHER_PROMPT = "The history of the Roman Empire spans many centuries. " * 30


def step_contexts(trace: dict[str, Any], rendered: str, step: int) -> tuple[str, str]:
    """(the context of step ``step - 1``, the context of ``step``): the rendered prompt plus every earlier turn."""
    text = rendered
    contexts = [text]
    for recorded in trace["steps"][:step]:
        if recorded["notes"].get("context_truncated"):
            raise SystemExit(f"{trace['id']} step {recorded['index']}: the context was cut; it cannot be replayed")
        text += recorded["notes"].get("context_text", (recorded.get("llm") or {}).get("text", ""))
        text += recorded.get("observation") or ""
        contexts.append(text)
    return contexts[-2], contexts[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("question")
    parser.add_argument("--step", type=int, default=1, help="which step's reply to replay (>= 1)")
    parser.add_argument("--endpoint", required=True, help="server root, e.g. http://127.0.0.1:8080")
    parser.add_argument("--tokens", type=int, default=40)
    args = parser.parse_args()
    fingerprint = json.loads((args.run / "run.json").read_text())
    trace = next((json.loads(line) for line in (args.run / "traces.jsonl").open()
                  if json.loads(line)["id"] == args.question), None)
    if trace is None or len(trace["steps"]) <= args.step or args.step < 1:
        raise SystemExit(f"{args.run}/traces.jsonl has no step {args.step} for {args.question!r}")
    if fingerprint["agent"] != "search-r1" or fingerprint["agent_config"].get("prompt_format") == "raw":
        raise SystemExit("replays search-r1 runs in chat format only (the prompt is rendered by the server)")
    user = search_r1_prompt_for(fingerprint["agent_config"].get("prompt_variant", "search-r1"))
    body = {**(fingerprint.get("sent_decoding") or {}), "model": fingerprint["model"], "max_tokens": args.tokens}
    with httpx.Client(base_url=args.endpoint, timeout=600) as client:
        messages = [{"role": "user", "content": user.format(question=trace["question_seen"])}]
        rendered = client.post("/apply-template", json={"messages": messages}).json()["prompt"]
        before, context = step_contexts(trace, rendered, args.step)

        def reply(prompt: str) -> str:
            answer = client.post("/v1/completions", json={**body, "prompt": prompt}).json()
            return str(answer["choices"][0]["text"])

        reply(OTHER_PROMPT)
        results = {"cold": reply(context), "again": reply(context)}
        reply(before)
        results["prefix-warm"] = reply(context)
    recorded = trace["steps"][args.step]["llm"]["text"]
    print(f"{'recorded':12s} {recorded[:80]!r}")
    for name, text in results.items():
        same = "same" if recorded.startswith(text) or text.startswith(recorded) else "DIFFERS"
        print(f"{name:12s} {text[:80]!r}  {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
