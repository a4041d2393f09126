"""Near-duplicate audit of held-out questions against the complete training union.

Why: exact-key exclusion misses training questions that were lightly edited or
reworded. The card's step 5 audits every selected question twice:

* **exhaustive character similarity** (``audit_similarity``): rapidfuzz cdist over
  every (selected, training) pair, with a named scorer and threshold;
* **rare-token retrieval** (``audit_tokens``): training questions sharing the
  selected question's rarest tokens, scored by IDF-weighted overlap.

Flagged pairs are resolved by recorded review decisions (``audit_review``);
``exclude`` decisions go back to the builder, which reselects deterministically
and calls the audit again until nothing new is excluded. Before sampling, the
same two methods run over the whole candidate pool at stricter thresholds (the
character pass blocked by rare n-grams, ``audit_blocking``) and drop near-certain
duplicates automatically, with the reason recorded.

``make_audit_hooks`` is what ``curation.build`` calls; ``audit_questions`` and
``audit_selection_file`` serve the standalone ``aether audit`` command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aethersearch.audit.blocking import blocked_similarity, build_gram_index
from aethersearch.audit.rare_tokens import SCORE_FORMULA, build_token_index, rare_token_pairs
from aethersearch.audit.review import (
    FlaggedPair,
    ReviewDecision,
    load_reviews,
    pair_key,
    require_reviews,
    resolve_reviews,
)
from aethersearch.audit.similarity import exhaustive_similarity
from aethersearch.errors import ConfigError
from aethersearch.text import question_key

if TYPE_CHECKING:  # the builder's types; imported lazily at run time
    from aethersearch.sources.base import Candidate

__all__ = ["AUDIT_SCHEMA_VERSION", "AuditHooks", "AuditSettings", "PoolSettings", "QuestionAudit",
    "RareTokenSettings", "Report", "SimilaritySettings", "StandaloneAudit", "TrainingUnion", "audit_pool",
    "audit_questions", "audit_selection_file", "make_audit_hooks", "parse_settings", "read_selection",
    "recorded_audit"]

AUDIT_SCHEMA_VERSION = 1

Report = Callable[[str, int, "int | None"], None]
"""``report(step, done, total)``: the audit's progress, step by step (the CLI renders it)."""


def _silent(step: str, done: int, total: int | None) -> None:
    return None


class SimilaritySettings(BaseModel):
    """Exhaustive character pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    scorer: str = "ratio"
    threshold: float = Field(default=85.0, gt=0, le=100)


class RareTokenSettings(BaseModel):
    """Rare-token retrieval pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    k: int = Field(default=3, ge=1)
    max_df: int | None = Field(default=None, ge=1)
    threshold: float = Field(default=0.6, gt=0, le=1)


class PoolSettings(BaseModel):
    """Stricter automatic removal over the candidate pool before sampling."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    enabled: bool = True
    similarity_threshold: float = Field(default=95.0, gt=0, le=100)
    rare_token_threshold: float = Field(default=0.9, gt=0, le=1)
    ngram: int = Field(default=4, ge=2, le=8)
    blocking_k: int = Field(default=8, ge=1)


class AuditSettings(BaseModel):
    """The build config's ``audit:`` section (resolved copy goes into the manifest)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    similarity: SimilaritySettings = SimilaritySettings()
    rare_tokens: RareTokenSettings = RareTokenSettings()
    pool: PoolSettings = PoolSettings()
    reviews: str | None = Field(default=None, description="review decisions file (resolved by the builder)")
    review_template: str | None = None


def parse_settings(audit_config: dict[str, Any] | None) -> AuditSettings:
    """Validate the ``audit:`` section; a bad value is a ConfigError naming the field."""
    try:
        return AuditSettings.model_validate(audit_config or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"audit config field audit.{where}: {first['msg']}",
                          fix="see AuditSettings in aethersearch/audit/near_duplicates.py") from None


class TrainingUnion:
    """The distinct normalised training keys, with their indexes built once on first use.

    ``training_keys`` must already be ``question_key`` outputs (the builder's union);
    they are not normalised again (``question_key`` is not idempotent on a key that
    ends in " ?", so re-normalising could merge two recorded keys).
    """

    def __init__(self, training_keys: Sequence[str]) -> None:
        self.keys: list[str] = sorted(set(training_keys))
        self._tokens: Any = None
        self._grams: dict[int, Any] = {}

    def tokens(self) -> Any:
        """The rare-token inverted index."""
        if self._tokens is None:
            self._tokens = build_token_index(self.keys)
        return self._tokens

    def grams(self, n: int) -> Any:
        """The character n-gram blocking index."""
        if n not in self._grams:
            self._grams[n] = build_gram_index(self.keys, n)
        return self._grams[n]


class QuestionAudit(NamedTuple):
    """Flagged pairs of one audit pass and the counters that prove what it covered."""

    flagged: list[FlaggedPair]
    methods: dict[str, Any]


def _merge(queries: Sequence[tuple[str | None, str, str]], union: TrainingUnion,
           char: Any, token: Any) -> list[FlaggedPair]:
    """Merge both passes into one FlaggedPair per (selected, training) pair."""
    merged: dict[tuple[int, int], list[float | None]] = {}
    for q, c, s in zip(char.query_index.tolist(), char.choice_index.tolist(), char.score.tolist(), strict=True):
        merged.setdefault((q, c), [None, None])[0] = float(s)
    for q, c, s in zip(token.query_index.tolist(), token.choice_index.tolist(), token.score.tolist(), strict=True):
        merged.setdefault((q, c), [None, None])[1] = float(s)
    out = []
    for (q, c), (sim, tok) in sorted(merged.items()):
        ident, text, key = queries[q]
        out.append(FlaggedPair(key, union.keys[c], ident, text, sim, tok))
    return out


def audit_questions(queries: Sequence[tuple[str | None, str]], union: TrainingUnion,
                    settings: AuditSettings, progress: Report = _silent) -> QuestionAudit:
    """Run both passes for ``(id or None, question)`` rows against the training union.

    ``progress`` hears ``similarity`` (question rows scored against every training
    question) and ``rare tokens`` (index, then retrieval), so a minutes-long audit is never silent.
    """
    rows = [(ident, text, question_key(text)) for ident, text in queries]
    keys = [key for _, _, key in rows]
    char = exhaustive_similarity(keys, union.keys, scorer=settings.similarity.scorer,
                                 threshold=settings.similarity.threshold,
                                 progress=lambda done, total: progress("similarity", done, total))
    rt = settings.rare_tokens
    progress("rare tokens", 0, 2)
    index = union.tokens()
    progress("rare tokens", 1, 2)
    token = rare_token_pairs(index, keys, k=rt.k, max_df=rt.max_df, threshold=rt.threshold)
    progress("rare tokens", 2, 2)
    methods = {
        "similarity": {"method": "rapidfuzz.process.cdist (exhaustive)", "scorer": char.scorer,
                       "threshold": char.threshold, "pairs_visited": char.pairs_visited,
                       "pairs_flagged": len(char.score)},
        "rare_tokens": {"method": "scipy.sparse inverted index, k rarest tokens", "formula": SCORE_FORMULA,
                        "k": token.k, "max_df": token.max_df, "threshold": token.threshold,
                        "candidates_scored": token.candidates_scored,
                        "queries_without_rare_token": token.queries_without_rare_token,
                        "pairs_flagged": len(token.score)},
    }
    return QuestionAudit(_merge(rows, union, char, token), methods)


def audit_pool(keys: Sequence[str], union: TrainingUnion, settings: AuditSettings,
               progress: Report = _silent) -> tuple[dict[str, str], dict[str, Any]]:
    """Near-certain duplicates in the candidate pool: key -> reason, plus the pool report.

    ``progress("pool", step, 4)``: n-gram index, blocked similarity, rare-token index, retrieval.
    """
    pool = settings.pool
    distinct = sorted(set(keys))
    if not pool.enabled or not distinct:
        return {}, {"enabled": pool.enabled, "candidates": len(distinct), "removed": 0}
    progress("pool", 0, 4)
    grams = union.grams(pool.ngram)
    progress("pool", 1, 4)
    char = blocked_similarity(distinct, grams, union.keys, scorer=settings.similarity.scorer,
                              threshold=pool.similarity_threshold, k=pool.blocking_k)
    progress("pool", 2, 4)
    rt = settings.rare_tokens
    index = union.tokens()
    progress("pool", 3, 4)
    token = rare_token_pairs(index, distinct, k=rt.k, max_df=rt.max_df,
                             threshold=pool.rare_token_threshold)
    progress("pool", 4, 4)
    remove: dict[str, str] = {}
    for q, c, s in zip(char.query_index.tolist(), char.choice_index.tolist(), char.score.tolist(), strict=True):
        remove.setdefault(distinct[q], f"pool audit: {settings.similarity.scorer} {s:.2f} >= "
                                       f"{pool.similarity_threshold} with training question {union.keys[c]!r}")
    for q, c, s in zip(token.query_index.tolist(), token.choice_index.tolist(), token.score.tolist(), strict=True):
        remove.setdefault(distinct[q], f"pool audit: rare-token overlap {s:.3f} >= "
                                       f"{pool.rare_token_threshold} with training question {union.keys[c]!r}")
    report = {
        "enabled": True, "candidates": len(distinct), "removed": len(remove),
        "similarity": {"method": "blocked", "blocking": char.rule, "scorer": char.scorer,
                       "threshold": char.threshold, "candidates_scored": char.candidates_scored,
                       "pairs_flagged": len(char.score)},
        "rare_tokens": {"threshold": token.threshold, "k": token.k, "max_df": token.max_df,
                        "candidates_scored": token.candidates_scored, "pairs_flagged": len(token.score)},
        "removed_keys": dict(sorted(remove.items())),
    }
    return remove, report


def _audit_decision() -> Any:
    """The builder's AuditDecision, or an identical local NamedTuple if select.py is absent."""
    try:
        from aethersearch.selection.sampling import AuditDecision
    except ImportError:
        return _LocalAuditDecision
    return AuditDecision


class _LocalAuditDecision(NamedTuple):
    exclude: dict[str, str]
    retained: list[dict[str, Any]]
    report: dict[str, Any]


class AuditHooks:
    """State shared by the pool filter and the selection audit across the build's iterations."""

    def __init__(self, settings: AuditSettings, union: TrainingUnion, *, reviews_path: Path | None,
                 auto_review: bool, stage_keys: dict[str, set[str]] | None = None,
                 progress: Report = _silent) -> None:
        self.settings = settings
        self.progress: Report = lambda step, done, total: progress(f"audit {step}", done, total)
        self.stage_keys = stage_keys or {}
        self.union = union
        self.reviews_path = reviews_path
        self.auto_review = auto_review
        self.decisions = load_reviews(reviews_path)
        self.pool_report: dict[str, Any] = {"enabled": settings.pool.enabled, "ran": False}
        self.flags: dict[str, list[FlaggedPair]] = {}  # selected key -> its flagged pairs
        self.methods: dict[str, Any] = {}
        self.excluded: dict[str, str] = {}
        self.iterations = 0

    def template_path(self) -> Path:
        """Where the ready-to-edit review template goes."""
        if self.settings.review_template:
            return Path(self.settings.review_template)
        if self.reviews_path is not None:
            return self.reviews_path.with_name(self.reviews_path.stem + ".todo.json")
        return Path.cwd() / "audit_reviews.todo.json"

    def pool_filter(self, candidates: Sequence[Candidate]) -> dict[str, str]:
        """PoolFilter: near-duplicates to drop before sampling (key -> reason)."""
        remove, report = audit_pool([c.key for c in candidates], self.union, self.settings, self.progress)
        self.pool_report = {**report, "ran": True}
        return remove

    def selection_audit(self, selected: Sequence[Candidate]) -> Any:
        """SelectionAudit: audit the current selection, resolve reviews, return the decision."""
        self.iterations += 1
        new = [c for c in selected if c.key not in self.flags]
        if new:
            result = audit_questions([(None, c.question) for c in new], self.union, self.settings, self.progress)
            self._accumulate(result.methods)
            for c in new:
                self.flags[c.key] = []
            for pair in result.flagged:
                self.flags[pair.selected_key].append(pair)
        current = [p for c in selected for p in self.flags[c.key]]
        resolution = resolve_reviews(current, self.decisions, auto_review=self.auto_review)
        details = {c.key: {"dataset": c.source_dataset, "source_row_number": c.source_row_number,
                           "source_id": c.source_id, "source_file": c.source_file, "answers": list(c.answers)}
                   for c in selected}
        require_reviews(resolution, template=self.template_path(), existing=self.decisions,
                        reviews_path=self.reviews_path, details=details, stages=self.stages_of)
        exclude = {k: v for k, v in resolution.exclude.items() if k not in self.excluded}
        self.excluded.update(exclude)
        return _audit_decision()(exclude, resolution.retained, self.report(resolution))

    def stages_of(self, training_key: str) -> list[str]:
        """The training stages a training question belongs to."""
        return [stage for stage, keys in sorted(self.stage_keys.items()) if training_key in keys]

    def _accumulate(self, methods: dict[str, Any]) -> None:
        """Sum each pass's counters over the iterations (static fields kept from the first)."""
        for name, info in methods.items():
            total = self.methods.get(name)
            if total is None:
                self.methods[name] = dict(info)
                continue
            for field in _COUNTERS:
                if field in info:
                    total[field] = total.get(field, 0) + info[field]

    def report(self, last: Any) -> dict[str, Any]:
        """Counts like the card, over every iteration, plus every flagged pair and its decision."""
        all_pairs = [p for pairs in self.flags.values() for p in pairs]
        # Every pair was resolved while its question was selected (require_reviews), so
        # resolving them all again cannot leave any pending.
        everything = resolve_reviews(all_pairs, self.decisions, auto_review=self.auto_review)
        retained_questions = {r["pair"][0] for r in last.retained}
        return {
            "schema_version": AUDIT_SCHEMA_VERSION,
            "settings": self.settings.model_dump(mode="json"),
            "training_union_size": len(self.union.keys),
            "methods": self.methods,
            "pool": self.pool_report,
            "iterations": self.iterations,
            "auto_review": self.auto_review,
            "counts": {
                "questions_audited": len(self.flags),
                "pairs_flagged": len(all_pairs),
                "questions_involved": len({p.selected_key for p in all_pairs}),
                "questions_retained_with_reason": len(retained_questions),
                "pairs_retained": len(last.retained),
                "questions_excluded": len(self.excluded),
                "pairs_auto_excluded": everything.auto_excluded,
            },
            "excluded": dict(sorted(self.excluded.items())),
            "retained": last.retained,
            "flagged_pairs": everything.decided,
        }


_COUNTERS = ("pairs_visited", "pairs_flagged", "candidates_scored", "queries_without_rare_token")


def make_audit_hooks(audit_config: dict[str, Any], training_keys: Sequence[str], *,
                     reviews_path: Path | None, auto_review: bool, stage_keys: dict[str, set[str]] | None = None,
                     progress: Report = _silent
                     ) -> tuple[Callable[[Sequence[Candidate]], dict[str, str]], Callable[[Sequence[Candidate]], Any]]:
    """The (PoolFilter, SelectionAudit) pair ``curation.build.build_release`` runs.

    ``progress`` hears ``audit pool``, ``audit similarity`` and ``audit rare tokens``.
    """
    settings = parse_settings(audit_config)
    hooks = AuditHooks(settings, TrainingUnion(training_keys),
                       reviews_path=Path(reviews_path) if reviews_path is not None else None,
                       auto_review=auto_review, stage_keys=stage_keys, progress=progress)
    return hooks.pool_filter, hooks.selection_audit


class StandaloneAudit(NamedTuple):
    """``aether audit``: every flagged pair (best first) with its review status, and the counts."""

    pairs: list[dict[str, Any]]
    report: dict[str, Any]


def read_selection(target: Path) -> list[tuple[str | None, str]]:
    """``(id, question)`` rows of a release directory (its eval file) or a JSONL selection file."""
    from aethersearch.errors import DataError
    from aethersearch.jsonl import iter_jsonl
    from aethersearch.release_layout import release_layout

    target = Path(target)
    path = target
    if target.is_dir():
        layout = release_layout(target)
        path = layout.eval if layout.eval.exists() else layout.rollout
    rows = []
    for line, value in iter_jsonl(path):
        if not isinstance(value, dict) or not isinstance(value.get("question"), str):
            raise DataError(path, "expected an object with a string 'question'", line=line, field="question",
                            fix="pass a release directory or a JSONL file of {id, question} rows")
        ident = value.get("id")
        rows.append((str(ident) if ident is not None else None, value["question"]))
    return rows


def recorded_audit(target: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A release's recorded audit settings and pair decisions (``(None, [])`` for a selection file or no audit)."""
    from aethersearch.jsonl import loads
    from aethersearch.release_layout import release_layout

    if not Path(target).is_dir():
        return None, []
    manifest = loads(release_layout(target).manifest.read_bytes())
    audit = manifest.get("audit") if isinstance(manifest, dict) else None
    if not isinstance(audit, dict):
        return None, []
    report = audit.get("report") or {}
    return report.get("settings"), list(report.get("flagged_pairs") or [])


def audit_selection_file(target: Path, registry: Path, *, audit_config: dict[str, Any] | None = None,
                         reviews_path: Path | None = None, progress: Report = _silent) -> StandaloneAudit:
    """Audit a release or selection against a training registry without stopping on unreviewed pairs.

    On a release built with the audit on, its recorded settings are the
    defaults and its recorded decisions count as reviews, so a fully reviewed
    release shows 0 unreviewed pairs; ``audit_config`` overrides the settings.
    ``progress`` hears ``training files`` (read and hash-checked), ``similarity``
    and ``rare tokens``.
    """
    from aethersearch.isolation.training import build_exclusion_sets, load_registry

    recorded_settings, recorded = recorded_audit(target)
    settings = parse_settings({**{k: v for k, v in (recorded_settings or {}).items()
                                  if k not in ("reviews", "review_template")}, **(audit_config or {})})
    registry = Path(registry)
    sets = build_exclusion_sets(load_registry(registry), registry.parent,
                                progress=lambda done, total: progress("training files", done, total))
    union = TrainingUnion(sorted(sets.union))
    rows = read_selection(target)
    result = audit_questions(rows, union, settings, progress)
    decisions = {pair_key(*row["pair"]): ReviewDecision(pair=tuple(row["pair"]), decision=row["decision"],
                                                        reason=row["reason"])
                 for row in recorded if row.get("decision") in ("exclude", "retain") and row.get("reason")}
    decisions.update(load_reviews(reviews_path))
    resolution = resolve_reviews(result.flagged, decisions, auto_review=False)
    decided = {tuple(r["pair"]): r for r in resolution.decided}
    pairs = []
    for pair in result.flagged:
        row = decided.get((pair.selected_key, pair.training_key))
        pairs.append({**pair.as_json(), "decision": row["decision"] if row else "unreviewed",
                      "reason": row["reason"] if row else ""})
    pairs.sort(key=lambda p: (-(p["similarity"] or 0.0) / 100 - (p["rare_token"] or 0.0), p["pair"]))
    report = {
        "selection": str(target), "questions": len(rows), "training_union_size": len(union.keys),
        "settings": settings.model_dump(mode="json"), "methods": result.methods,
        "counts": {"pairs_flagged": len(pairs),
                   "questions_involved": len({p["pair"][0] for p in pairs}),
                   "retained_with_reason": sum(1 for p in pairs if p["decision"] == "retain"),
                   "excluded": sum(1 for p in pairs if p["decision"] == "exclude"),
                   "unreviewed": sum(1 for p in pairs if p["decision"] == "unreviewed")},
    }
    return StandaloneAudit(pairs, report)
