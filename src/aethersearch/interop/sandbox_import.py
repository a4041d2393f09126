"""``aether import sandbox``: another project's agent loop, run against ``aether sandbox serve``, as a run directory.

Why: a harness of its own (MiroThinker's, an inspect_ai solver, a verl rollout)
can browse the masked sandbox over HTTP, but its episodes live in the
sandbox's action log, not in a run directory, so ``score``, ``factorise``,
``compare``, ``report`` and ``view`` could not read them. The action log
already holds every tool call of every episode (masked ids included, on the
server's side); the harness adds its final answer when it closes the episode
(``POST /episodes/{id}/close {"answer": "..."}``; a refusal is an answer shaped
like one, "I don't know", by the one rule of ``abstention.py``). Importing one run id turns its episodes into ``traces.jsonl`` (one step
per tool call, as the agent saw it) and a ``run.json`` bound to the release and
to what served it: the log's ``serve`` events name the release, the corpus and
index hashes and the mask policy, and each is checked against the release.

Per question the episode opened last under the run id is the one imported (a
harness that retried a question replaced the earlier one); an episode never
closed is a tool error (the harness stopped mid-episode), never a wrong answer;
a question with no episode is left out, and ``aether score`` reports it missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from aethersearch.agents.base import finish
from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.interop.verl_import import refuse_occupied, write_imported_run
from aethersearch.jsonl import sha256_file
from aethersearch.records import ErrorKind, Outcome, Step, Trace, Usage
from aethersearch.release.manifest import hintfree_corpus_hash
from aethersearch.release_layout import release_layout
from aethersearch.rollout.fingerprint import load_rollout_questions, release_info
from aethersearch.sandbox.action_log import NO_ANSWER, LoggedEpisode, read_episodes, read_served
from aethersearch.sandbox.contract import MASK_POLICY, sandbox_contract
from aethersearch.sandbox.serving import public_call

__all__ = ["SandboxImport", "episode_trace", "import_sandbox_log"]

IMPORT_KIND = "aethersearch-sandbox-import"


class SandboxImport(NamedTuple):
    """What an import wrote: the run directory and how its episodes were counted."""

    run_dir: Path
    imported: int
    release_rows: int
    unclosed: int
    superseded: int


def episode_trace(episode: LoggedEpisode, question_seen: str, agent: str) -> Trace:
    """One logged episode as a trace: a step per tool call (the agent's copy: no masked ids), then its answer."""
    steps = [Step(index=i, tool_calls=[public_call(call)]) for i, call in enumerate(episode.calls)]
    usage = Usage(tool_calls=len(steps))
    if not episode.closed:
        return Trace(id=episode.question_id, question_seen=question_seen, agent=agent, steps=steps,
                     outcome=Outcome.TOOL_ERROR, stop_reason="not_closed", error_kind=ErrorKind.ENVIRONMENT,
                     error=f"episode {episode.episode_id} was never closed in the action log (the harness stopped "
                           "mid-episode)", usage=usage)
    if episode.answer is NO_ANSWER or episode.answer is None:
        output = finish("", None, "closed_without_answer")
    else:  # a refusal is a refusal-shaped answer ("I don't know"), by the project's one rule (abstention.py)
        output = finish(str(episode.answer), str(episode.answer), "answer")
    return Trace(id=episode.question_id, question_seen=question_seen, agent=agent, steps=steps,
                 response=output.response, prediction=output.prediction, outcome=output.outcome,
                 stop_reason=output.stop_reason, usage=usage)


def _served(action_log: Path, release_dir: Path) -> dict[str, str | None]:
    """The log's ``serve`` events, checked against the release: the release id, its corpus, one policy."""
    events = read_served(action_log)
    if not events:
        raise DataError(action_log, "no `serve` event: this log was not written by `aether sandbox serve` of this "
                        "version, so what served its episodes is unknown",
                        fix="rerun the harness against `aether sandbox serve RELEASE --index DIR --action-log FILE`")
    info = release_info(release_dir)
    expected = {"release_id": info.release_id, "corpus_hash": hintfree_corpus_hash(release_dir),
                "mask_policy": MASK_POLICY}
    rows = [event.model_dump() for event in events]
    for key, value in expected.items():
        found = sorted({str(row[key]) for row in rows})
        if found != [str(value)]:
            raise IntegrityError(f"{action_log}: the sandbox served {key} {', '.join(found)}, but release "
                                 f"{release_dir} needs {value}", fix="import against the release the sandbox "
                                                                     "served, or rerun the harness on this one")
    indexes = sorted({str(event.index_hash) for event in events})
    if len(indexes) != 1:
        raise IntegrityError(f"{action_log}: the sandbox was restarted over different indexes ({', '.join(indexes)})",
                             fix="one run is one index: import a log written by one sandbox index")
    return {"corpus_hash": expected["corpus_hash"], "index_hash": indexes[0]}


def import_sandbox_log(action_log: Path, release_dir: Path, out: Path, *, run_id: str, agent: str = "external",
                       model: str | None = None, force: bool = False) -> SandboxImport:
    """Write ``out`` (run.json, traces.jsonl, import.json) from the episodes of ``run_id`` in ``action_log``."""
    action_log, release_dir, out = Path(action_log), Path(release_dir), Path(out)
    if not action_log.is_file():
        raise DataError(action_log, "action log does not exist",
                        fix="pass the --action-log file of the `aether sandbox serve` the harness used")
    refuse_occupied(out, force)
    hashes = _served(action_log, release_dir)
    questions = {q.id: q.question for q in load_rollout_questions(release_layout(release_dir).rollout)}
    chosen: dict[str, LoggedEpisode] = {}
    superseded = 0
    episodes = read_episodes(action_log)
    for episode in episodes.values():  # in order of opening: the last one of a question wins
        if episode.run_id != run_id:
            continue
        if episode.question_id not in questions:
            raise DataError(action_log, f"run {run_id!r} has an episode for question {episode.question_id!r}, "
                                        f"which is not in release {release_dir}",
                            fix="import against the release the sandbox served")
        superseded += episode.question_id in chosen
        chosen[episode.question_id] = episode
    if not chosen:
        runs = sorted({e.run_id for e in episodes.values()})
        raise ConfigError(f"{action_log} has no episode of run {run_id!r}; its runs: {', '.join(runs[:20]) or 'none'}",
                          fix="pass the run_id the harness sent with POST /episodes")
    order = {qid: i for i, qid in enumerate(questions)}
    traces = [episode_trace(chosen[qid], questions[qid], agent) for qid in sorted(chosen, key=order.__getitem__)]
    unclosed = sum(not chosen[qid].closed for qid in chosen)
    write_imported_run(out, traces, release_dir, len(questions), agent=agent, agent_config={},
                       model=model or run_id,
                       record={"kind": IMPORT_KIND, "action_log": str(action_log),
                               "action_log_sha256": sha256_file(action_log), "run_id": run_id,
                               "episodes": len(traces), "unclosed": unclosed, "superseded": superseded},
                       environment="sandbox", corpus_hash=hashes["corpus_hash"], index_hash=hashes["index_hash"],
                       sandbox=sandbox_contract())
    return SandboxImport(out, len(traces), len(questions), unclosed, superseded)
