"""The card says who decided each class of flagged near-duplicate pair: a person, or the automatic
policy and the rule it applied, with counts; both verifiers recompute that sentence from the release."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aethersearch.audit.policy import POLICY_NAME
from aethersearch.release.verify import verify_release
from aethersearch.release_layout import release_layout
from aethersearch.selection.sampling import AuditDecision

from .conftest_helpers import build_demo
from .test_card import _edit_card_carefully
from .test_tamper import load_verifier


def _pairs(selected: list[str]) -> list[dict[str, Any]]:
    """Four flagged pairs on selected questions: one a person retained, three the policy decided."""
    return [
        {"pair": [selected[0], "training one"], "decision": "retain", "reason": "a different film",
         "decided_by": "review", "similarity": 88.0, "rare_token": None},
        {"pair": [selected[1], "training two"], "decision": "retain", "similarity": 90.0, "rare_token": None,
         "reason": f"{POLICY_NAME}: different years/numbers (1979 vs 1975)", "decided_by": POLICY_NAME},
        {"pair": [selected[2], "training three"], "decision": "retain", "similarity": 86.0, "rare_token": None,
         "reason": f"{POLICY_NAME}: different years/numbers (2001 vs 2002)", "decided_by": POLICY_NAME},
        {"pair": [selected[3], "training four"], "decision": "retain", "similarity": 85.0, "rare_token": None,
         "reason": f"{POLICY_NAME}: changed entity (paris vs rome)", "decided_by": POLICY_NAME},
    ]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def audit(selection: Any) -> AuditDecision:
        pairs = _pairs([candidate.key for candidate in selection[:4]])
        return AuditDecision({}, [p for p in pairs if p["decision"] == "retain"],
                             {"flagged_pairs": pairs, "counts": {"questions_audited": len(selection)}})

    _, result = build_demo(tmp_path_factory.mktemp("deciders"), selection_audit=audit)
    return result.release_dir


def test_the_card_names_who_decided_each_class_of_pair(release: Path) -> None:
    card = " ".join(release_layout(release).path("card").read_text(encoding="utf-8").split())
    assert ("Who decided the 4 flagged pairs: a person's review decided 1 (1 retained, 0 excluded); the automatic "
            "auto-review policy decided 3: retained 2 as 'different years/numbers', retained 1 as 'changed entity'."
            ) in card
    # the policy's calls are not "explicit reasons": the audit sentence says who retained them
    assert "all retained by recorded decisions (3 of them by the automatic auto-review policy)" in card
    assert "explicit reasons" not in card


def test_an_edited_decider_sentence_fails_both_verifiers(release: Path, tmp_path: Path) -> None:
    edited = _edit_card_carefully(release, tmp_path, "a person's review decided 1", "a person's review decided 4")
    failed = [c for c in verify_release(edited).checks if not c.ok]
    assert [c.name for c in failed] == ["card figures"] and "Who decided" in failed[0].detail
    standalone = load_verifier(release / "verify_release.py")
    assert any(line.startswith("FAIL card figures") and "Who decided" in line
               for line in (c.line() for c in standalone.run_checks(edited) if not c.ok))


def test_a_release_a_person_reviewed_keeps_the_published_wording(release: Path) -> None:
    from aethersearch.release.verify_release_template import _who_decided

    reviewed = [{**p, "decided_by": "review", "reason": "distinct"} for p in _pairs(["a", "b", "c", "d"])]
    assert _who_decided(reviewed) == ("Who decided the 4 flagged pairs: a person's review decided 4 "
                                      "(4 retained, 0 excluded).")
