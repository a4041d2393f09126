"""``aether import verl``: verl's dumped validation generations as a run directory.

verl (``RayPPOTrainer._dump_generations``, enabled by
``trainer.validation_data_dir``) writes ``{step}.jsonl`` with one line per sample:
``input`` (decoded prompt), ``output`` (decoded response), ``gts`` (the row's
``reward_model.ground_truth``), ``score``, ``step`` and every key the reward
function returned. Importing writes ``run.json`` + ``traces.jsonl`` so ``aether
score``, ``compare`` and ``report`` work on evaluations done inside the trainer.

Each line is bound to its release row by the ``aether_row_id`` our reward function
returns (``interop.verl_reward``); without it, by the question in the prompt
(Search-R1's template ends ``Question: {question}``). The line's ``gts`` must equal
that row's gold: generations scored against other gold are refused, not imported.

Several samples per prompt (verl's ``actor_rollout_ref.rollout.val_kwargs.n`` > 1,
repeated prompts in the dump) are read as a run of K samples: a row's generations
are its samples 0..K-1 in the order the dump holds them, ``run.json`` records
``samples`` K, and scoring reports mean@K (verl's ``reward/mean@N``), pass@k and
maj@K. Every row in the dump must have the same K (a row with fewer generations
than the others is a truncated dump and is refused, naming the row).

Action boundaries: AetherSearch's scorer (``--compat aethersearch``) reads each
model action on its own, and a dump holds one decoded text per episode. Each
response is cut back into actions by the tag protocol
(:func:`aethersearch.agents.aethersearch_protocol.split_response`), which needs the
end-of-sequence text (``--eos-text``, Qwen2.5's ``<|im_end|>`` by default) kept in
the dump; a response it cannot cut exactly keeps no steps, ``import.json`` names it,
and ``aether score --compat aethersearch`` refuses the run rather than score it.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal, NamedTuple

from aethersearch.agents.aethersearch_protocol import split_response
from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.interop.exports import question_as_searchr1_sees_it, read_release
from aethersearch.interop.verl_reward import AGENT, ROW_KEY, golds_of, response_trace
from aethersearch.jsonl import atomic_write_bytes, atomic_write_json, encode_jsonl, iter_jsonl, sha256_file
from aethersearch.records import Budget, Decoding, LLMCall, RunFingerprint, SandboxContract, Step, ToolCall, Trace
from aethersearch.rollout.fingerprint import release_info
from aethersearch.rollout.samples import unit_label
from aethersearch.scoring.extract import SEARCHR1_PROMPT
from aethersearch.text import question_key

__all__ = ["DEFAULT_EOS_TEXT", "IMPORT_FILE", "ImportResult", "import_generations", "refuse_occupied",
    "with_actions", "write_imported_run"]

IMPORT_FILE = "import.json"
#: The end-of-sequence text of Qwen2.5, the family AetherSearch and Search-R1 train (``--eos-text``).
DEFAULT_EOS_TEXT = "<|im_end|>"
_QUESTION = re.compile(r"Question: (.*?)\n", re.DOTALL)


class ImportResult(NamedTuple):
    """What an import wrote: the run directory, how many generations, and which release rows they cover."""

    run_dir: Path
    imported: int
    release_rows: int
    step: int | None
    unsplit: tuple[str, ...] = ()
    """Row ids (``id#sample``) whose response could not be cut into actions exactly (no per-action scores)."""


def _row_for(line: dict[str, Any], path: Path, number: int, by_id: dict[str, int],
             by_question: dict[str, list[int]]) -> int:
    row_id = line.get(ROW_KEY)
    if isinstance(row_id, str) and row_id:
        if row_id not in by_id:
            raise DataError(path, f"{ROW_KEY} {row_id!r} is not a row of the release", line=number,
                            fix="import against the release the validation file was exported from")
        return by_id[row_id]
    found = _QUESTION.findall(str(line.get("input", "")))
    if not found:
        raise DataError(path, f"no {ROW_KEY} and no 'Question: ...' in the prompt to find the release row",
                        line=number, fix="validate with the reward function aethersearch.interop.verl_reward")
    candidates = by_question.get(question_key(found[-1]), [])
    if len(candidates) != 1:
        what = "matches no release question" if not candidates else "matches several release questions"
        raise DataError(path, f"prompt question {found[-1]!r} {what}", line=number,
                        fix="validate with aethersearch.interop.verl_reward so each line names its row")
    return candidates[0]


def with_actions(trace: Trace, eos_text: str | None) -> tuple[Trace, str | None]:
    """The trace with one step per action its response splits into exactly, or unchanged and why not."""
    split = split_response(trace.response, eos_text)
    if split.ambiguous is not None:
        return trace, split.ambiguous
    steps = []
    for index, action in enumerate(split.actions):
        calls = [ToolCall(tool="search", arguments={"query": split.queries[index]})] \
            if index < len(split.queries) else []
        steps.append(Step(index=index, llm=LLMCall(text=action), tool_calls=calls))
    return trace.model_copy(update={"steps": steps}), None


def import_generations(generations: Path, release_dir: Path, out: Path, *, model: str | None = None,
                       force: bool = False, eos_text: str | None = DEFAULT_EOS_TEXT) -> ImportResult:
    """Write ``out`` (run.json, traces.jsonl, import.json) from one verl generations dump."""
    generations, release_dir, out = Path(generations), Path(release_dir), Path(out)
    if not generations.is_file():
        raise DataError(generations, "generations file does not exist",
                        fix="pass a {step}.jsonl that verl wrote under trainer.validation_data_dir")
    refuse_occupied(out, force)
    release = read_release(release_dir)
    release_info(release_dir)  # refuse a release whose rollout file fails its checksum before reading lines
    by_id = {row.id: index for index, row in enumerate(release.rows)}
    by_question: dict[str, list[int]] = {}
    for index, row in enumerate(release.rows):
        by_question.setdefault(question_key(question_as_searchr1_sees_it(row.question)), []).append(index)
    traces: list[Trace] = []
    seen: dict[int, list[int]] = {}
    steps: set[int] = set()
    unsplit: dict[str, str] = {}
    for number, line in iter_jsonl(generations):
        if not isinstance(line, dict) or not isinstance(line.get("output"), str):
            raise DataError(generations, "expected an object with a string 'output'", line=number,
                            fix="pass the jsonl verl's _dump_generations wrote")
        index = _row_for(line, generations, number, by_id, by_question)
        row = release.rows[index]
        lines = seen.setdefault(index, [])
        lines.append(number)
        if "gts" in line and sorted(golds_of(line["gts"])) != sorted(row.answers):
            raise IntegrityError(f"{generations}:{number}: gold {golds_of(line['gts'])!r} differs from release "
                                 f"row {row.id!r} ({row.answers!r})",
                                 fix="import against the release the validation parquet was exported from")
        if isinstance(line.get("step"), int):
            steps.add(line["step"])
        trace = response_trace(row.id, question_as_searchr1_sees_it(row.question), line["output"])
        trace, why = with_actions(trace.model_copy(update={"sample": len(lines) - 1}), eos_text)
        if why is not None:
            unsplit[unit_label((row.id, trace.sample))] = f"line {number}: {why}"
        traces.append(trace)
    if not traces:
        raise DataError(generations, "no generations in the file", fix="check trainer.validation_data_dir")
    samples = _samples_per_row(seen, release.rows, generations)
    step = max(steps) if steps else None
    write_imported_run(out, traces, release_dir, len(release.rows), agent=AGENT,
                       agent_config={"source": "verl validation generations", "step": step,
                                     "decoding": "set by the trainer; not recorded in verl's dump",
                                     "samples": "val_kwargs.n: generations per prompt in the dump, in dump order"},
                       model=model or (f"step-{step}" if step is not None else generations.stem), samples=samples,
                       record={"kind": "aethersearch-verl-import", "generations": str(generations),
                               "generations_sha256": sha256_file(generations), "lines": len(traces),
                               "step": step, "prompt_template": SEARCHR1_PROMPT, "eos_text": eos_text,
                               "actions_unrecovered": unsplit})
    return ImportResult(out, len(traces), len(release.rows), step, tuple(unsplit))


def refuse_occupied(out: Path, force: bool) -> None:
    """An importer never writes into a non-empty directory unless told to (``--force``): one rule, every importer."""
    if out.exists() and any(out.iterdir()) and not force:
        raise ConfigError(f"{out} already exists and is not empty", fix="choose another --out or pass --force")


def write_imported_run(out: Path, traces: list[Trace], release_dir: Path, question_count: int, *, agent: str,
                       agent_config: dict[str, Any], model: str, record: dict[str, Any], samples: int = 1,
                       environment: Literal["search", "sandbox", "none"] = "search", corpus_hash: str | None = None,
                       index_hash: str | None = None, sandbox: SandboxContract | None = None) -> None:
    """Write an imported run: ``traces.jsonl``, ``import.json`` (``record``) and a ``run.json`` bound to the release.

    The fingerprint pins the release's data and rollout sha256, so ``aether score``
    refuses the run against any other release, as it does for a run of our own;
    ``environment``/``sandbox`` and the hashes say what served the episodes, where the source knows it.
    """
    info = release_info(release_dir)
    fingerprint = RunFingerprint(
        release_id=info.release_id, release_data_sha256=info.data_sha256, rollout_sha256=info.rollout_sha256,
        question_count=question_count, corpus_hash=corpus_hash, index_hash=index_hash, environment=environment,
        agent=agent, agent_config=agent_config,
        prompt_template_hash=None, budget=Budget(max_tool_calls=None, max_turns=None), endpoint=None,
        model=model, decoding=Decoding(), software_version=_version(), samples=samples, sandbox=sandbox)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "traces.jsonl", encode_jsonl(traces))
    atomic_write_json(out / IMPORT_FILE, record)
    atomic_write_json(out / "run.json", fingerprint.model_dump(mode="json"))


def _samples_per_row(seen: dict[int, list[int]], rows: list[Any], path: Path) -> int:
    """K: the generations per prompt, the same for every row in the dump (else the dump is refused)."""
    counts = {index: len(lines) for index, lines in seen.items()}
    tally = Counter(counts.values())
    k = max(tally, key=lambda count: (tally[count], count))  # what most rows have (ties: the larger)
    short = sorted((index for index, count in counts.items() if count != k), key=lambda i: seen[i][0])
    if short:
        first = short[0]
        raise DataError(path, f"row {rows[first].id!r} has {counts[first]} generation(s) (lines "
                              f"{', '.join(map(str, seen[first]))}) but other rows have {k}; {len(short)} row(s) "
                              "differ, so the K samples per prompt cannot be read", line=seen[first][0],
                        fix="import a complete dump of one validation pass (every prompt val_kwargs.n times)")
    return k


def _version() -> str:
    from aethersearch import __version__

    return __version__
