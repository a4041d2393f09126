"""What a paper table needs from several runs: labels from what differs, one source x run table, release groups,
and the one number format (``fmt``) every table of the report shares.

Why: a reader of a checkpoint comparison wants one table whose columns say what
changed between runs (``model=sft-ckpt`` vs ``model=rl-ckpt``, or ``topk=5``), not
directory names, and no chart or table may put runs scored on two different
releases side by side as if they were comparable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from aethersearch.records import RunFingerprint
from aethersearch.scoring.scores_file import Scores

__all__ = ["ReleaseGroup", "display_labels", "fmt", "has_model_usage", "release_groups", "run_labels",
    "source_matrix"]

#: Fingerprint fields that never make a useful label (hashes of the release, software version).
_UNLABELLED = frozenset({"schema_version", "release_id", "release_data_sha256", "rollout_sha256", "question_count",
                         "software_version", "endpoint", "served_model", "sent_decoding", "limits"})


def fmt(value: Any, digits: int = 3) -> str:
    """Display form of a number (``—`` for missing or NaN)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "—" if value != value else f"{value:.{digits}f}"
    if isinstance(value, list | tuple):
        return f"[{len(value)} items]"
    return str(value)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def _short(value: Any) -> str:
    text = str(value)
    if isinstance(value, str) and (text.startswith("sha256") or len(text) == 64):
        return text.split(":")[-1][:10]
    return text if len(text) <= 40 else text[:37] + "..."


def run_labels(names: Sequence[str], fingerprints: Sequence[RunFingerprint | None]) -> list[str]:
    """One label per run from the settings that differ between the runs (the run name when none does)."""
    flat = [_flatten(fp.model_dump(mode="json")) if fp is not None else {} for fp in fingerprints]
    keys = sorted({k for f in flat for k in f if k.split(".")[0] not in _UNLABELLED})
    differing = [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1]
    labels = []
    for name, values in zip(names, flat, strict=True):
        parts = [f"{k.split('.')[-1] if k.startswith('agent_config.') else k}={_short(values.get(k))}"
                 for k in differing[:3]]
        labels.append(", ".join(parts) if parts and values else name)
    if len(set(labels)) != len(labels):  # settings alone do not tell them apart: keep the run names
        labels = [f"{name} ({label})" if label != name else name for name, label in zip(names, labels, strict=True)]
    return labels


def display_labels(names: Sequence[str], fingerprints: Sequence[RunFingerprint | None],
                   explicit: Sequence[str] = ()) -> list[str]:
    """Run labels for a paper: ``--label`` values in run order, else the model name, else what differs.

    Why: a paper's columns read "Qwen2.5-7B-SFT", not "agent=lexical, rounds=2".
    A label given on the command line wins; a run without one is named by its
    model when the models tell the runs apart, and by :func:`run_labels` otherwise.
    """
    if explicit and len(explicit) != len(names):
        from aethersearch.errors import ConfigError

        raise ConfigError(f"{len(explicit)} --label values for {len(names)} runs",
                          fix="give one --label per run, in the order of the runs, or none")
    if explicit:
        return list(explicit)
    models = [fp.model if fp is not None and fp.model else None for fp in fingerprints]
    if all(models) and len(set(models)) == len(models):
        return [str(m) for m in models]
    return run_labels(names, fingerprints)


class ReleaseGroup(NamedTuple):
    """Runs scored on the same release (same eval.jsonl sha256): the only runs one table or chart may hold."""

    release: str
    eval_sha256: str
    members: list[int]


def release_groups(all_scores: Sequence[Scores]) -> list[ReleaseGroup]:
    """Runs grouped by the exact gold they were scored on, in first-appearance order."""
    groups: dict[str, ReleaseGroup] = {}
    for index, scores in enumerate(all_scores):
        key = scores.gold.eval_sha256
        if key not in groups:
            groups[key] = ReleaseGroup(scores.gold.release_id or scores.gold.release_dir, key, [])
        groups[key].members.append(index)
    return list(groups.values())


def source_matrix(all_scores: Sequence[Scores], members: Sequence[int], metric: str = "em") -> list[dict[str, Any]]:
    """Rows ``{"source", "n", "cells": [{"mean", "low", "high"} per run]}``, sources then overall micro/macro."""
    sources: list[str] = []
    for i in members:
        sources.extend(s for s in all_scores[i].by_source if s not in sources)

    def cell(estimate: Any) -> dict[str, str]:
        if estimate is None:
            return {"mean": "—", "low": "—", "high": "—"}
        return {"mean": fmt(estimate.mean), "low": fmt(estimate.ci_low), "high": fmt(estimate.ci_high)}

    rows = []
    for source in sources:
        entries = [all_scores[i].by_source.get(source) for i in members]
        n = next((e.n for e in entries if e is not None), 0)
        rows.append({"source": source, "n": n,
                     "cells": [cell(e.metrics.get(metric) if e is not None else None) for e in entries]})
    rows.append({"source": "overall (micro)", "n": all_scores[members[0]].overall.micro.n,
                 "cells": [cell(all_scores[i].overall.micro.metrics.get(metric)) for i in members]})
    rows.append({"source": "overall (macro)", "n": f"{all_scores[members[0]].overall.macro.sources} sources",
                 "cells": [cell(all_scores[i].overall.macro.metrics.get(metric)) for i in members]})
    return rows


def has_model_usage(scores: Scores, fingerprint: RunFingerprint | None) -> bool:
    """Whether a usage chart has anything to show for this run (an agent without a model has no tokens)."""
    if fingerprint is not None and not fingerprint.model:
        return False
    usage = scores.usage
    return bool(usage.prompt_tokens.mean or usage.completion_tokens.mean or usage.tool_calls.mean)
