"""``aether export verl|flashrag``: a release as the validation file a trainer reads.

Formats, from the tools' own code:

* **verl / Search-R1** (``scripts/data_process/qa_search_test_merge.py``): parquet rows
  ``{"id", "question", "golden_answers", "data_source", "prompt": [{"role": "user", "content": <Search-R1 template>}],
  "ability": "fact-reasoning", "reward_model": {"style": "rule", "ground_truth":
  {"target": [golds]}}, "extra_info": {"split", "index", ...}}``. The question is
  stripped and gets a ``?`` when it lacks one, as Search-R1 does; ``extra_info`` also
  names the release and the row (``release_id``, ``row_id``) so the reward function
  and ``aether import verl`` bind every generation to its exact release row. The
  top-level ``id``, ``question`` and ``golden_answers`` are the official Search-R1
  parquet's own columns; AetherSearch's fixed-eval loader (``runtime/fixed_eval.py``
  at d2a21bd) reads ``id`` and refuses a file without it. The per-source counts
  (lower-cased, as their manifest counts them) and the file's sha256 are what
  their ``evaluation:`` block pins (:func:`aethersearch_pins`).
  The file holds each question once; how many samples per prompt verl draws is the
  trainer's ``actor_rollout_ref.rollout.val_kwargs.n`` (with ``val_kwargs.do_sample=True``
  and a ``val_kwargs.temperature`` > 0, or the n samples are identical). verl then logs
  ``val-core/{data_source}/reward/mean@n``, and ``aether import verl`` reads the n
  generations of each prompt as K = n samples (``aether run --samples K`` is the same
  evaluation outside the trainer).
* **FlashRAG** (its ``*.jsonl`` datasets): ``{"id", "question", "golden_answers"}``.

These files carry gold on purpose: they are the trainer's validation input. Each
export writes a sidecar ``<out>.aether.json`` naming the release (id, data sha256,
eval sha256) and the file's own sha256, so a number computed from the file can be
traced to the release it came from. ``aether run`` is unaffected: agents still see
only ``rollout_questions.jsonl``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Literal, NamedTuple

from aethersearch.errors import DataError
from aethersearch.jsonl import atomic_write_bytes, atomic_write_json, encode_jsonl, loads, sha256_bytes, sha256_file
from aethersearch.records import SCHEMA_VERSION, EvalRow, Record
from aethersearch.release_layout import release_layout
from aethersearch.scoring.extract import searchr1_prompt
from aethersearch.scoring.join import load_release

__all__ = ["ABILITY", "EXPORT_KIND", "ExportSidecar", "ReleaseRows", "SIDECAR_SUFFIX", "SPLIT", "aethersearch_pins",
    "export_flashrag", "export_verl", "flashrag_rows", "question_as_searchr1_sees_it", "read_release",
    "sidecar_path", "verl_rows"]

SIDECAR_SUFFIX = ".aether.json"
EXPORT_KIND = "aethersearch-export"
ABILITY = "fact-reasoning"
SPLIT = "test"


class ExportSidecar(Record):
    """``<out>.aether.json``: which release an exported file was made from, and the file's own hash."""

    schema_version: int = SCHEMA_VERSION
    kind: str = EXPORT_KIND
    format: Literal["verl", "flashrag"]
    file: str
    file_sha256: str
    rows: int
    release_dir: str
    release_id: str
    release_data_sha256: str | None
    release_eval_sha256: str
    #: Rows per ``data_source``, lower-cased and sorted (AetherSearch's ``expected_source_counts``).
    source_counts: dict[str, int] = {}
    carries_gold: bool = True
    note: str = ("a trainer's validation file: it holds gold answers by design; agents under `aether run` "
                 "still see only rollout_questions.jsonl")


class ReleaseRows(NamedTuple):
    """A release's gold rows with its identity."""

    rows: list[EvalRow]
    release_id: str
    data_sha256: str | None
    eval_sha256: str


def read_release(release_dir: Path) -> ReleaseRows:
    """Gold rows and identity of a release directory (``DataError`` naming what is missing)."""
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        raise DataError(release_dir, "release directory does not exist",
                        fix="pass a release built by `aether build` (the folder holding eval.jsonl)")
    rows = load_release(release_dir)
    manifest: dict[str, Any] = {}
    layout = release_layout(release_dir)
    path = layout.manifest
    if path.is_file():
        try:
            manifest = loads(path.read_bytes())
        except ValueError as exc:
            raise DataError(path, f"invalid JSON: {exc}", fix="rebuild the release") from None
    release_id = str(manifest.get("release_id") or manifest.get("name") or release_dir.name)
    data_sha = manifest.get("data_sha256")
    return ReleaseRows(rows, release_id, str(data_sha) if data_sha else None, sha256_file(layout.eval))


def question_as_searchr1_sees_it(question: str) -> str:
    """Search-R1's ``process_fn``: strip, then append ``?`` when the question lacks one."""
    question = question.strip()
    return question if question.endswith("?") else question + "?"


def verl_rows(release: ReleaseRows) -> list[dict[str, Any]]:
    """The verl/Search-R1 validation rows of a release (release order)."""
    out = []
    for index, row in enumerate(release.rows):
        seen = question_as_searchr1_sees_it(row.question)
        out.append({
            "id": row.id,
            "question": row.question,
            "golden_answers": list(row.answers),
            "data_source": row.source_dataset,
            "prompt": [{"role": "user", "content": searchr1_prompt(seen)}],
            "ability": ABILITY,
            "reward_model": {"style": "rule", "ground_truth": {"target": list(row.answers)}},
            "extra_info": {"split": SPLIT, "index": index, "release_id": release.release_id,
                           "row_id": row.id, "question": seen},
        })
    return out


def flashrag_rows(release: ReleaseRows) -> list[dict[str, Any]]:
    """FlashRAG dataset rows: ``id``, ``question``, ``golden_answers``."""
    return [{"id": row.id, "question": row.question, "golden_answers": list(row.answers)} for row in release.rows]


def _parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def _write(out: Path, data: bytes, fmt: Literal["verl", "flashrag"], release_dir: Path,
           release: ReleaseRows) -> ExportSidecar:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for row in release.rows:
        counts[row.source_dataset.lower()] = counts.get(row.source_dataset.lower(), 0) + 1
    sidecar = ExportSidecar(format=fmt, file=out.name, file_sha256=sha256_bytes(data), rows=len(release.rows),
                            release_dir=str(release_dir), release_id=release.release_id,
                            release_data_sha256=release.data_sha256, release_eval_sha256=release.eval_sha256,
                            source_counts=dict(sorted(counts.items())))
    atomic_write_bytes(out, data)
    atomic_write_json(sidecar_path(out), sidecar.model_dump(mode="json"))
    return sidecar


def sidecar_path(out: Path) -> Path:
    """Where the sidecar of an exported file lives."""
    return Path(out).with_name(Path(out).name + SIDECAR_SUFFIX)


def export_verl(release_dir: Path, out: Path) -> ExportSidecar:
    """Write the release as verl/Search-R1 validation parquet at ``out`` (plus its sidecar)."""
    release = read_release(release_dir)
    return _write(out, _parquet_bytes(verl_rows(release)), "verl", Path(release_dir), release)


def export_flashrag(release_dir: Path, out: Path) -> ExportSidecar:
    """Write the release as a FlashRAG jsonl dataset at ``out`` (plus its sidecar)."""
    release = read_release(release_dir)
    return _write(out, encode_jsonl(flashrag_rows(release)), "flashrag", Path(release_dir), release)


def aethersearch_pins(sidecar: ExportSidecar) -> str:
    """The ``evaluation:`` keys AetherSearch's fixed eval checks, filled for this export (YAML text)."""
    counts = "".join(f"    {source}: {count}\n" for source, count in sidecar.source_counts.items())
    return (f"evaluation:\n  manifest_mode: full_validation\n  expected_validation_sha256: {sidecar.file_sha256}\n"
            f"  expected_row_count: {sidecar.rows}\n  expected_source_counts:\n{counts}")
