"""Review decisions for flagged near-duplicate pairs.

Why: similarity cannot tell a reworded training question from a distinct
question that shares a template ("Who directed X?" vs "Who directed Y?"). A
person decides, once, and the decision is a file under version control:

    [{"pair": ["<selected question, key or id>", "<training question>"],
      "decision": "exclude" | "retain", "reason": "<why>"}, ...]

Both sides of a pair are matched by ``question_key``, so a reviewer may paste the
published question text. A flagged pair without a decision stops the build
with ``ReviewRequired``, after writing a ready-to-edit template holding every
existing decision plus the pending pairs (``"decision": "TODO"``); the
``--auto-review`` policy (``audit_policy``: conservative, documented) instead
decides every unreviewed pair and records each call with its reason and
``decided_by: auto-review policy``. ``retain`` requires a reason: it goes into the
exclusion audit. ``apply_review_file`` merges a filled-in template into the
review file (``aether review``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from aethersearch import jsonl
from aethersearch.audit.policy import POLICY_NAME, auto_decide
from aethersearch.errors import DataError, ReviewRequired
from aethersearch.release.verify_release_template import PERSON
from aethersearch.text import question_key

__all__ = ["AUTO_REVIEW_REASON", "FlaggedPair", "PairKey", "Resolution", "ReviewDecision", "TODO",
    "apply_review_file", "load_reviews", "pair_key", "require_reviews", "resolve_reviews", "write_review_template"]

AUTO_REVIEW_REASON = "auto-review policy: unreviewed flagged pair excluded"
TODO = "TODO: exclude or retain"


class ReviewDecision(BaseModel):
    """One reviewed pair."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pair: tuple[str, str]
    decision: Literal["exclude", "retain"]
    reason: str = Field(min_length=1)
    decided_by: str = Field(default=PERSON, description="'review' (a person) or the policy that decided "
                            "(`aether review --auto` records 'auto-review policy'); published with the pair")

    @field_validator("reason")
    @classmethod
    def _reason_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("reason must say why (it is published in exclusion_audit.json)")
        return value


class FlaggedPair(NamedTuple):
    """A selected question and a training question that the audit found too similar."""

    selected_key: str
    training_key: str
    selected_id: str | None
    selected_question: str
    similarity: float | None  # character score (0..100), None if only the token pass flagged it
    rare_token: float | None  # rare-token overlap (0..1), None if only similarity flagged it

    def as_json(self) -> dict[str, Any]:
        """The pair as written to reports and templates."""
        return {
            "pair": [self.selected_key, self.training_key],
            "selected_id": self.selected_id,
            "selected_question": self.selected_question,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "rare_token": None if self.rare_token is None else round(self.rare_token, 4),
        }


PairKey = tuple[str, str]


def pair_key(selected: str, training: str) -> PairKey:
    """The normalised identity of a pair."""
    return question_key(selected), question_key(training)


def load_reviews(path: Path | None) -> dict[PairKey, ReviewDecision]:
    """Parse a review file; a malformed entry is a DataError naming its index and field."""
    if path is None or not Path(path).exists():
        return {}
    path = Path(path)
    try:
        data = jsonl.loads(path.read_bytes())
    except Exception as exc:  # orjson.JSONDecodeError or OSError
        raise DataError(path, f"cannot parse review decisions: {exc}",
                        fix="the file must be a JSON list of {pair, decision, reason}") from None
    if not isinstance(data, list):
        raise DataError(path, f"expected a JSON list of decisions, got {type(data).__name__}",
                        fix="wrap the decisions in [ ... ]")
    decisions: dict[PairKey, ReviewDecision] = {}
    for number, entry in enumerate(data, start=1):
        try:
            decision = ReviewDecision.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or None
            raise DataError(path, f"review decision #{number}: {first['msg']}", line=number,
                            field=field,
                            fix='each entry needs "pair": [selected, training], "decision": '
                                '"exclude" or "retain", and a non-empty "reason"') from None
        key = pair_key(*decision.pair)
        previous = decisions.get(key)
        if previous is not None and previous.decision != decision.decision:
            raise DataError(path, f"review decision #{number} contradicts an earlier one for pair "
                            f"{list(key)!r}", line=number, field="decision",
                            fix="keep one decision per pair")
        decisions[key] = decision
    return decisions


class Resolution(NamedTuple):
    """What the reviews make of a set of flagged pairs."""

    exclude: dict[str, str]  # selected key -> reason
    retained: list[dict[str, Any]]  # retained pairs with their reasons
    decided: list[dict[str, Any]]  # every flagged pair with its decision and reason
    auto_excluded: int
    unreviewed: list[FlaggedPair]


def _lookup(decisions: Mapping[PairKey, ReviewDecision], pair: FlaggedPair) -> ReviewDecision | None:
    found = decisions.get((pair.selected_key, pair.training_key))
    if found is None and pair.selected_id is not None:
        found = decisions.get((question_key(pair.selected_id), pair.training_key))
    return found


def resolve_reviews(flagged: Iterable[FlaggedPair], decisions: Mapping[PairKey, ReviewDecision],
                    *, auto_review: bool) -> Resolution:
    """Apply decisions: a question is excluded if any of its pairs is excluded, else retained."""
    exclude: dict[str, str] = {}
    decided: list[dict[str, Any]] = []
    unreviewed: list[FlaggedPair] = []
    auto = 0
    pairs = sorted(flagged, key=lambda p: (p.selected_key, p.training_key))
    for pair in pairs:
        decision = _lookup(decisions, pair)
        if decision is None:
            if not auto_review:
                unreviewed.append(pair)
                continue
            verdict, reason = auto_decide(pair.selected_question, pair.training_key)
            by = POLICY_NAME
            auto += verdict == "exclude"
        else:
            verdict, reason, by = decision.decision, decision.reason, decision.decided_by
            auto += by == POLICY_NAME and verdict == "exclude"
        decided.append({**pair.as_json(), "decision": verdict, "reason": reason, "decided_by": by})
        if verdict == "exclude" and pair.selected_key not in exclude:
            exclude[pair.selected_key] = (f"near-duplicate of training question "
                                          f"{pair.training_key!r}: {reason}")
    retained = [row for row in decided
                if row["decision"] == "retain" and row["pair"][0] not in exclude]
    return Resolution(exclude, retained, decided, auto, unreviewed)


def write_review_template(path: Path, pending: Sequence[FlaggedPair],
                          existing: Mapping[PairKey, ReviewDecision],
                          details: Mapping[str, Mapping[str, Any]] | None = None,
                          stages: Callable[[str], list[str]] | None = None) -> None:
    """Write every existing decision plus a TODO entry per pending pair (atomically).

    Each TODO holds what a reviewer needs: both questions, the selected row's id,
    source, row number and answers (``details`` by selected key), the training
    question's stages, both scores, the words the two share and the words that
    differ, and the policy's suggestion. Only ``decision`` and ``reason`` are read back.
    """
    rows: list[dict[str, Any]] = [d.model_dump(mode="json") for d in existing.values()]
    for pair in pending:
        mine, theirs = set(pair.selected_key.split()), set(pair.training_key.split())
        suggestion = auto_decide(pair.selected_question, pair.training_key)
        rows.append({
            "pair": [pair.selected_key, pair.training_key],
            "decision": TODO,
            "reason": "",
            "selected": {"question": pair.selected_question, "id": pair.selected_id,
                         **dict((details or {}).get(pair.selected_key, {}))},
            "training": {"question": pair.training_key,
                         "stages": stages(pair.training_key) if stages is not None else None},
            "scores": {"similarity": pair.as_json()["similarity"], "rare_token": pair.as_json()["rare_token"]},
            "shared_tokens": sorted(mine & theirs),
            "differing_tokens": {"selected": sorted(mine - theirs), "training": sorted(theirs - mine)},
            "policy_suggestion": {"decision": suggestion.decision, "reason": suggestion.reason},
        })
    jsonl.atomic_write_json(path, rows)


def apply_review_file(template: Path, reviews: Path, *, auto: bool = False) -> tuple[int, int, int]:
    """Merge the decided entries of a filled-in template into ``reviews``; returns (decided, auto, todo).

    A ``TODO`` entry stays pending unless ``auto`` applies the documented policy to it.
    The merged file is validated exactly as the build reads it (contradictions fail).
    """
    try:
        entries = jsonl.loads(Path(template).read_bytes())
    except (OSError, ValueError) as exc:
        raise DataError(template, f"cannot read the review template: {exc}",
                        fix="pass the *.todo.json file the build wrote") from None
    if not isinstance(entries, list):
        raise DataError(template, "expected a JSON list of review entries", fix="pass the *.todo.json file")
    merged = [d.model_dump(mode="json") for d in load_reviews(reviews).values()]
    decided = automatic = todo = 0
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("pair"), list):
            raise DataError(template, f"entry #{number} has no 'pair'", line=number, field="pair",
                            fix="keep the template's entries as written; edit only decision and reason")
        decision, reason = entry.get("decision"), entry.get("reason") or ""
        if decision not in ("exclude", "retain"):
            if not auto:
                todo += 1
                continue
            selected = (entry.get("selected") or {}).get("question") or entry["pair"][0]
            decision, reason = auto_decide(str(selected), str(entry["pair"][1]))
            by = POLICY_NAME
            automatic += 1
        else:
            by = str(entry.get("decided_by") or "review")
            decided += 1
        merged.append({"pair": entry["pair"], "decision": decision, "reason": reason, "decided_by": by})
    unique = {tuple(pair_key(*row["pair"])): row for row in merged}
    jsonl.atomic_write_json(reviews, list(unique.values()))
    load_reviews(reviews)  # validates every entry (a retain without a reason names its number)
    return decided, automatic, todo


def require_reviews(resolution: Resolution, *, template: Path,
                    existing: Mapping[PairKey, ReviewDecision], reviews_path: Path | None,
                    details: Mapping[str, Mapping[str, Any]] | None = None,
                    stages: Callable[[str], list[str]] | None = None) -> None:
    """Raise ReviewRequired listing the unreviewed pairs, after writing the template."""
    if not resolution.unreviewed:
        return
    write_review_template(template, resolution.unreviewed, existing, details, stages)
    shown = "\n".join(f"  - {p.selected_key!r}  ~  {p.training_key!r}  "
                      f"(similarity {p.as_json()['similarity']}, rare-token {p.as_json()['rare_token']})"
                      for p in resolution.unreviewed[:20])
    more = len(resolution.unreviewed) - 20
    if more > 0:
        shown += f"\n  ... and {more} more"
    target = (str(reviews_path) if reviews_path is not None
              else "a review file named by the build config's audit.reviews field")
    raise ReviewRequired(
        f"{len(resolution.unreviewed)} flagged near-duplicate pair(s) have no review decision:\n{shown}\n"
        f"  a template with every pending pair was written to {template}",
        fix=(f"set each TODO to exclude or retain with a reason and run `aether review {template} --out "
             f"{target}` (add --auto to let the documented policy decide the rest), then rebuild; or rebuild "
             "with --auto-review (the same policy decides every unreviewed pair, recorded in the release)"),
    )
