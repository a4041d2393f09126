"""Write a hint-free construction as a release in the benchmark's own format.

Files (same formats as ``aethersearch.release.manifest``, whose row encoder
and checksum writer are reused): ``eval.jsonl`` (``records.EvalRow``: the
single-hop question text, gold aliases, provenance of the triple),
``rollout_questions.jsonl`` (exactly ``id``, ``question``), ``diagnostics.jsonl``
(``records.DiagnosticsRow``: ``path``, ``hops``, ``alternative_paths``,
``evidence``, ``hop_questions``; ``extra["mask"]`` is what the sandbox
enforces), ``manifest.json`` and ``checksums.sha256`` (``sha256sum -c``
compatible). No timestamps go into any file, so identical inputs give
byte-identical releases. The directory is assembled beside ``out_dir`` and
renamed into place: a reader sees the old release, none, or the new one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aethersearch.construct.diversity import distributions, goals
from aethersearch.construct.hintfree import ConstructionConfig, ConstructionResult
from aethersearch.corpus.graph import LinkGraph
from aethersearch.errors import ConfigError, ShortageError
from aethersearch.jsonl import dumps_pretty, sha256_bytes
from aethersearch.records import SCHEMA_VERSION, DiagnosticsRow, EvalRow
from aethersearch.release.manifest import (
    HINTFREE_MANIFEST_KIND,
    HintfreeManifest,
    encode_release_rows,
    row_digests,
    verifier_source,
    write_release_files,
)

__all__ = ["MANIFEST_KIND", "companion_path", "graph_hash", "release_rows", "write_hintfree_release"]

MANIFEST_KIND = HINTFREE_MANIFEST_KIND


def graph_hash(graph: LinkGraph) -> str:
    """sha256 of the graph's ids and CSR arrays (identifies the exact link structure used)."""
    body = b"\n".join(str(i).encode("utf-8") for i in graph.ids) + b"\x00"
    return "sha256:" + sha256_bytes(body + graph.indptr.astype("<i8").tobytes() + graph.indices.astype("<i4").tobytes())


def release_rows(result: ConstructionResult, *, name: str, source_dataset: str, per_source: bool = False,
                 screen: Mapping[str, dict[str, Any]] | None = None,
                 llm_verdicts: Mapping[str, dict[str, Any]] | None = None
                 ) -> tuple[list[EvalRow], list[DiagnosticsRow]]:
    """Eval and diagnostics rows, ids ``<name>_0001...`` in construction order.

    ``per_source``: label each row ``<source_dataset>-<its seed dataset>`` (seed
    questions from several real datasets keep their provenance per dataset).
    ``screen``: triple id -> parametric-screen record (``extra["parametric_screen"]``).
    ``llm_verdicts``: triple id -> the LLM validator's record (``extra["llm_verdict"]``: verdict and reply).
    """
    eval_rows: list[EvalRow] = []
    diagnostics: list[DiagnosticsRow] = []
    for number, q in enumerate(result.questions, start=1):
        qid = f"{name}_{number:04d}"
        t = q.triple
        label = f"{source_dataset}-{t.source_dataset}" if per_source else source_dataset
        extra: dict[str, Any] = {}
        if screen is not None:
            extra["parametric_screen"] = screen.get(t.id, {"screened": False})
        if llm_verdicts is not None:
            record = llm_verdicts.get(t.id)
            extra["llm_verdict"] = {"verdict": record["verdict"], "reply": record["reply"]} if record else None
        eval_rows.append(EvalRow(
            id=qid, question=t.question, answers=list(t.answers), source_dataset=label,
            source_split=t.source_split, source_id=t.source_id, source_row_number=t.source_row_number,
            source_file=t.source_file,
        ))
        diagnostics.append(DiagnosticsRow(
            id=qid, source_dataset=label, question_type=t.relation, path=list(q.path),
            hops=len(q.path) - 1, alternative_paths=[list(p) for p in q.alternatives], evidence=list(q.path[:-1]),
            hop_questions=q.hop_questions,
            extra={"mask": q.mask.to_json(), "triple_id": t.id,
                   # None: an unlinked seed pair (allow_unlinked) -- v0 never linked vn, nothing was removed
                   "direct_link": [q.path[0], q.path[-1]] if q.direct_link else None,
                   "direct_evidence": t.evidence, "alternative_paths_truncated": q.alternatives_truncated,
                   "equal_shortest_paths": q.equal_paths, "equal_shortest_paths_capped": q.equal_paths_capped,
                   "validators": result.validators, "hint_screen": q.hint_screen,
                   "chain_entailment": q.chain_entailment, "popularity": q.popularity, **extra},
        ))
    return eval_rows, diagnostics


def _sources(eval_rows: list[EvalRow]) -> list[dict[str, Any]]:
    """The manifest's provenance records: one (dataset, split, file) per source dataset."""
    sources: dict[str, dict[str, Any]] = {}
    for row in eval_rows:
        record = {"dataset": row.source_dataset, "split": row.source_split, "source_file": row.source_file}
        if sources.setdefault(row.source_dataset, record) != record:
            raise ConfigError(f"hint-free rows of {row.source_dataset!r} come from several splits/files "
                              f"({sources[row.source_dataset]} and {record}); {row.id} breaks provenance",
                              fix="give each split or file its own source_dataset name")
    return list(sources.values())


def write_hintfree_release(result: ConstructionResult, out_dir: str | Path, *, name: str, source_dataset: str,
                           config: ConstructionConfig, corpus: dict[str, Any], graph: LinkGraph,
                           triple_stats: dict[str, Any] | None = None, overwrite: bool = False,
                           per_source: bool = False, screen: Mapping[str, dict[str, Any]] | None = None,
                           llm_verdicts: Mapping[str, dict[str, Any]] | None = None,
                           companions: Mapping[str, bytes] | None = None, tier: str = "entailing") -> Path:
    """Write the release for ``result`` into ``out_dir`` (refusing a non-empty one unless ``overwrite``).

    ``companions`` (e.g. the seed review file) are construction records, not
    release files: a release holds exactly its six files (the verifier rejects
    any other), so each is written *beside* it as ``<release dir>.<name>``
    (:func:`companion_path`), and its sha256 is bound in the manifest
    (``construction.companions``). ``tier`` names what the release holds
    (``construction.tier``): ``entailing`` chains (the release), or the
    ``detour`` tier of chains that do not entail their answer, written as a
    separately named release that no report mixes with the first.
"""
    out = Path(out_dir)
    if not result.questions:
        raise ShortageError(f"construction accepted no questions (rejected: {result.rejected})",
                            fix="relax --min-hops/--max-hops or check the triples and graph")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a directory", fix="choose another --out")
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(f"{out} already exists and is not empty", fix="choose another --out or pass --force")
        if not (out / "manifest.json").is_file():  # --force replaces a release, never an arbitrary folder
            raise ConfigError(f"{out} is not a release directory (no manifest.json); refusing to replace it",
                              fix="choose a new --out directory or remove it yourself")
    eval_rows, diagnostics = release_rows(result, name=name, source_dataset=source_dataset, per_source=per_source,
                                          screen=screen, llm_verdicts=llm_verdicts)
    files = encode_release_rows(eval_rows, diagnostics)
    data_sha = sha256_bytes(files["eval.jsonl"])
    manifest = {
        "kind": MANIFEST_KIND, "schema_version": SCHEMA_VERSION, "name": name,
        "release_id": f"{name}-{data_sha[:12]}", "source_dataset": source_dataset,
        "question_count": len(eval_rows), "data_sha256": data_sha,
        "composition": [{"dataset": d, "selected": n}
                        for d, n in sorted(Counter(r.source_dataset for r in eval_rows).items())],
        "rollout_sha256": sha256_bytes(files["rollout_questions.jsonl"]),
        "row_sha256": row_digests(files["eval.jsonl"]), "exclusions": [],
        "sources": _sources(eval_rows),
        "construction": {**config.model_dump(mode="json"), "validators": result.validators,
                         "considered": result.considered, "rejected": result.rejected,
                         "hop_distribution": {str(k): v for k, v in result.hop_distribution.items()},
                         "tier": tier, "hop_mix": result.hop_mix,
                         "diversity": distributions([q.triple.answer_page for q in result.questions],
                                                    [q.triple.subject for q in result.questions],
                                                    [q.path for q in result.questions],
                                                    [q.popularity for q in result.questions],
                                                    config.max_answer_share),
                         "goals": goals([q.triple.relation for q in result.questions],
                                        [q.triple.answer_page for q in result.questions],
                                        [len(q.path) - 1 for q in result.questions], result.rejected),
                         "triples": triple_stats or {},
                         "companions": {fname: sha256_bytes(data) for fname, data in sorted((companions or {}).items())}},
        "corpus": corpus,
        "graph": {"nodes": graph.n_nodes, "edges": graph.n_edges, "graph_hash": graph_hash(graph)},
        "files": {fname: sha256_bytes(data) for fname, data in sorted(files.items())},
        "sandbox": "each question's chain mask is diagnostics.jsonl extra.mask; open with "
                   "aethersearch.sandbox.episode.open_sandbox(release_dir, index, store)",
    }
    files["manifest.json"] = dumps_pretty(HintfreeManifest.model_validate(manifest))
    files["verify_release.py"] = verifier_source()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        write_release_files(tmp, files)
        tmp.chmod(0o755)
        old = None
        if out.exists():  # move the old release aside first, so a failed swap never loses both
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / out.name)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for fname, data in (companions or {}).items():
        target = companion_path(out, fname)
        part = target.with_name(f".{target.name}.tmp")
        part.write_bytes(data)
        os.replace(part, target)
    return out


def companion_path(release_dir: str | Path, name: str) -> Path:
    """Where a release's companion file ``name`` lives: beside the release, ``<release dir>.<name>``."""
    release = Path(release_dir)
    return release.with_name(f"{release.name}.{name}")
