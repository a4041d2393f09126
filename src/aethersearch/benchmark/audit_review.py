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
``--auto-review`` policy instead excludes every unreviewed pair and records
that it did so. ``retain`` requires a reason: it goes into ``exclusion_audit.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from aethersearch import jsonl
from aethersearch.errors import DataError, ReviewRequired
from aethersearch.text import question_key

AUTO_REVIEW_REASON = "auto-review policy: unreviewed flagged pair excluded"


class ReviewDecision(BaseModel):
    """One reviewed pair."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pair: tuple[str, str]
    decision: Literal["exclude", "retain"]
    reason: str = Field(min_length=1)

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
            verdict, reason, by = "exclude", AUTO_REVIEW_REASON, "auto-review"
            auto += 1
        else:
            verdict, reason, by = decision.decision, decision.reason, "review"
        decided.append({**pair.as_json(), "decision": verdict, "reason": reason, "decided_by": by})
        if verdict == "exclude" and pair.selected_key not in exclude:
            exclude[pair.selected_key] = (f"near-duplicate of training question "
                                          f"{pair.training_key!r}: {reason}")
    retained = [row for row in decided
                if row["decision"] == "retain" and row["pair"][0] not in exclude]
    return Resolution(exclude, retained, decided, auto, unreviewed)


def write_review_template(path: Path, pending: Sequence[FlaggedPair],
                          existing: Mapping[PairKey, ReviewDecision]) -> None:
    """Write every existing decision plus a TODO entry per pending pair (atomically)."""
    rows: list[dict[str, Any]] = [d.model_dump(mode="json") for d in existing.values()]
    for pair in pending:
        rows.append({
            "pair": [pair.selected_key, pair.training_key],
            "decision": "TODO: exclude or retain",
            "reason": "",
            "scores": {"similarity": pair.as_json()["similarity"],
                       "rare_token": pair.as_json()["rare_token"]},
        })
    jsonl.atomic_write_json(path, rows)


def require_reviews(resolution: Resolution, *, template: Path,
                    existing: Mapping[PairKey, ReviewDecision], reviews_path: Path | None) -> None:
    """Raise ReviewRequired listing the unreviewed pairs, after writing the template."""
    if not resolution.unreviewed:
        return
    write_review_template(template, resolution.unreviewed, existing)
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
        fix=(f"set each TODO to exclude or retain with a reason, save it as {target}, and rebuild; "
             "or rebuild with --auto-review to exclude every unreviewed pair"),
    )
