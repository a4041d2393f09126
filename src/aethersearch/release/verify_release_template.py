#!/usr/bin/env python3
"""Standalone verifier of an aethersearch benchmark release (Python standard library only).

Usage: ``python verify_release.py [RELEASE_DIR]`` (default: this file's directory;
``--help`` for details). Prints ``OK`` or ``FAIL`` per check, naming the file and
row of every problem, and exits 0 only when every check passes.

Every byte is covered. ``checksums.sha256`` lists every file (an unlisted file, a
missing one, or any subdirectory fails); the manifest records the sha256 (and row
count) of every other file; the manifest itself is bound by its canonical bytes
and by the hash of its content that ``independent_validation.json`` records; and
the manifest's figures are recomputed from what they describe: rows per source,
quotas from the plan (``card_quotas``, the one specification of the card's
rule), planned counts and seed from the recorded config, isolation counts from
the exclusion audit, the dataset card's ``configs`` from the release files, and
every table and sentence of figures on the card (``card_figures``, the one
specification the card writer renders).
Checks on rows: valid JSON, exact public schema, ids ``<name>_0001...`` in order,
unique ids and questions, each row's sha256, the canonical data sha256,
provenance, the rollout projection, diagnostics ids, and no question on the
exclusion list.

This file is copied verbatim into every release; the package's own verifier
(``aether verify``) runs these same checks plus schema validation with pydantic.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only (never evaluated: this file runs on Python 3.7 with the stdlib alone)
    from collections.abc import Sequence
    from typing import Any

EVAL_FIELDS = {"id", "question", "answers", "source_dataset", "source_split", "source_id",
               "source_row_number", "source_file"}
ROLLOUT_FIELDS = {"id", "question"}
CHECKSUMS = "checksums.sha256"
LEGACY_MANIFEST = "manifest.json"
MANIFEST_SUFFIX = "_manifest.json"
LEGACY_NAMES = {"eval": "eval.jsonl", "rollout": "rollout_questions.jsonl", "manifest": LEGACY_MANIFEST,
                "exclusion_audit": "exclusion_audit.json", "diagnostics": "diagnostics.jsonl",
                "independent_validation": "independent_validation.json", "verifier": "verify_release.py",
                "checksums": CHECKSUMS, "attribution": "ATTRIBUTION.md", "card": "README.md"}
# Files a hint-free release (construct/) has; a benchmark release has every role of its layout.
HINTFREE_ROLES = ("eval", "rollout", "manifest", "diagnostics", "verifier", "checksums")
BENCHMARK_KIND = "aethersearch-benchmark-release"
# Benchmark releases (benchmark/) and hint-free releases (construct/) share this format.
RELEASE_KINDS = ("aethersearch-benchmark-release", "aethersearch-hintfree-release")
MAX_REPORTED = 20
_WS = re.compile(r"\s+")


class Check:
    """One verification outcome: its name, OK/FAIL, and where the problem is."""

    def __init__(self, name, ok, file=None, row=None, detail=""):
        self.name = name
        self.ok = ok
        self.file = file
        self.row = row
        self.detail = detail

    def line(self):
        """``OK name`` or ``FAIL name: file:row: detail``."""
        if self.ok:
            return f"OK   {self.name}" + (f" ({self.detail})" if self.detail else "")
        where = self.file or ""
        if self.row is not None:
            where += f" row {self.row}"
        return f"FAIL {self.name}: {where}: {self.detail}"

    def as_dict(self):
        """A JSON-able form."""
        return {"name": self.name, "ok": self.ok, "file": self.file, "row": self.row, "detail": self.detail}


def question_key(question):
    """The card's normalised key: NFKC, casefold, collapse whitespace, strip, drop trailing ?/？."""
    text = _WS.sub(" ", unicodedata.normalize("NFKC", question).casefold()).strip()
    return text.rstrip("?\uff1f")


def layout_names(stem: str) -> dict[str, str]:
    """The card's file names for a release named by ``stem`` (mirrors aethersearch.release_layout)."""
    return {"eval": stem + ".jsonl", "rollout": stem + "_rollout_questions.jsonl",
            "manifest": stem + MANIFEST_SUFFIX, "exclusion_audit": stem + "_exclusion_audit.json",
            "diagnostics": stem + "_diagnostics.jsonl", "independent_validation": "independent_validation.json",
            "verifier": "verify_release.py", "checksums": CHECKSUMS, "attribution": "ATTRIBUTION.md",
            "card": "README.md"}


def canonical_json(value: object) -> bytes:
    """Compact canonical JSON bytes (sorted keys, UTF-8): what content hashes are taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def pretty_json(value: object) -> bytes:
    """The exact bytes of a release's JSON files: sorted keys, two-space indent, UTF-8, final newline."""
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def manifest_core_sha256(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest without its ``files`` map: what independent_validation.json binds."""
    return hashlib.sha256(canonical_json(dict((k, v) for k, v in manifest.items() if k != "files"))).hexdigest()


def find_manifest(root: str | Path) -> str | None:
    """The manifest's file name in ``root`` (``manifest.json``, or exactly one ``*_manifest.json``)."""
    root = Path(root)
    if (root / LEGACY_MANIFEST).is_file():
        return LEGACY_MANIFEST
    found = sorted(p.name for p in root.glob("*" + MANIFEST_SUFFIX) if p.is_file()) if root.is_dir() else []
    return found[0] if len(found) == 1 else None


def card_quotas(plan: Sequence[tuple[str, int, int | None]]) -> tuple[dict[str, int], int]:
    """THE quota rule (the one specification; the builder and the replay call this function).

    ``plan`` is a sequence of ``(dataset, planned, cap)`` in the fixed source
    order (``cap`` may be None). A source whose cap is below its planned count
    supplies its cap and receives nothing; its shortfall is dealt out one
    question at a time, round-robin over the other sources in plan order,
    skipping a source once its cap is reached. Dealt this way the receivers'
    extras stay within one of each other, and a remainder goes to the earliest
    sources (the card: 75 Bamboogle questions -> 12 each to six sources, the 3
    left to NQ, TriviaQA, PopQA). Returns ``(quotas, unplaced)``: a dict in plan
    order and the number of questions no cap had room for (0 for a feasible plan).
    Implemented round by round, so it is fast for any count.
    """
    quota: dict[str, int] = {}
    room: dict[str, int | None] = {}
    shortfall = 0
    for dataset, planned, cap in plan:
        if cap is not None and cap < planned:
            quota[dataset] = cap
            room[dataset] = 0
            shortfall += planned - cap
        else:
            quota[dataset] = planned
            room[dataset] = None if cap is None else cap - planned
    free = [dataset for dataset, _, _ in plan if room[dataset] != 0]
    while shortfall > 0 and free:
        share, remainder = divmod(shortfall, len(free))
        # A source with room below the share fills up during the deal: give it its room, deal the rest.
        full = [d for d in free if room[d] is not None and room[d] < share]
        if full:
            for d in full:
                quota[d] += room[d]
                shortfall -= room[d]
                room[d] = 0
        elif share:
            for d in free:  # `share` complete rounds
                quota[d] += share
                room[d] = None if room[d] is None else room[d] - share
            shortfall = remainder
        else:  # the last, partial round goes to the earliest sources with room
            for d in free[:remainder]:
                quota[d] += 1
            shortfall = 0
        free = [d for d in free if room[d] != 0]
    return quota, shortfall



# ------------------------------------------------------------------ the dataset card's figures
# THE card's computed figures (the one specification): the package's card writer renders these
# tables and sentences, and the verifier below recomputes them from the release's files and
# compares them with the card, so a hand-edited figure fails. Headings are the Eval-1400 card's.
GLANCE = "Release at a glance"
COMPOSITION = "Source composition"
CURATION = "Curation and integrity"
CHECKSUMS_SECTION = "Checksums and versioning"
HUB_SPLIT = "validation"
CARD_STAGES = ("SFT", "DPO", "RL")
VALIDATION_ROWS_CHECK = "rows_match_originals"


def _n(value):
    return "{:,}".format(value) if _is_int(value) else str(value)


def _ordered_stages(manifest):
    """Training stages present or in the reference card, in the card's order (SFT, DPO, RL), then others sorted."""
    reference = ((manifest.get("config") or {}).get("reference_card") or {}).get("stages") or []
    present = set(((manifest.get("isolation") or {}).get("final_exact_overlap_by_stage") or {}))
    named = set(reference) | present
    return [s for s in CARD_STAGES if s in named] + sorted(named - set(CARD_STAGES)), reference


def _final_duplicates(rows):
    """(internal, cross-source) duplicate rows among the final rows, by the normalised key."""
    first = {}
    internal = cross = 0
    for value in rows:
        if not isinstance(value, dict) or not isinstance(value.get("question"), str):
            continue
        key = question_key(value["question"])
        if key in first:
            internal, cross = (internal + 1, cross) if first[key] == value.get("source_dataset") else (internal, cross + 1)
        else:
            first[key] = value.get("source_dataset")
    return internal, cross


def _audit_accounting(manifest, rows):
    """What the near-duplicate audit decided, split by whether the selected question stayed in the release."""
    report = (manifest.get("audit") or {}).get("report") or {}
    pairs = report.get("flagged_pairs") or []
    pool = (report.get("settings") or {}).get("pool") or {}
    final = set(question_key(v["question"]) for v in rows if isinstance(v, dict) and isinstance(v.get("question"), str))
    kept = [p for p in pairs if isinstance(p, dict) and (p.get("pair") or [None])[0] in final]
    gone = [p for p in pairs if isinstance(p, dict) and (p.get("pair") or [None])[0] not in final]

    def high(p):  # at or above the pool's automatic-exclusion thresholds, or not retained by a decision
        sim, rare = p.get("similarity") or 0, p.get("rare_token") or 0
        above = pool.get("enabled") and (sim >= pool.get("similarity_threshold", 101) or
                                         rare >= pool.get("rare_token_threshold", 2))
        return bool(above) or p.get("decision") != "retain"

    return {"pairs": len(pairs), "audited": (report.get("counts") or {}).get("questions_audited", 0),
            "excluding": sum(1 for p in gone if p.get("decision") == "exclude"),
            "with_excluded": sum(1 for p in gone if p.get("decision") != "exclude"),
            "excluded_questions": len(set(p["pair"][0] for p in gone)),
            "final_pairs": len(kept), "final_questions": len(set(p["pair"][0] for p in kept)),
            "final_undecided": sum(1 for p in kept if p.get("decision") != "retain"),
            "final_by_policy": sum(1 for p in kept if p.get("decided_by") == POLICY),
            "high_confidence": len(set(p["pair"][0] for p in kept if high(p)))}


#: ``decided_by`` of a pair a person decided (``aether review``); the policy records its own name
PERSON = "review"
POLICY = "auto-review policy"


def _rule(reason):
    """The policy rule a decision cites: its reason after ``auto-review policy: ``, up to the details."""
    text = reason[len(POLICY) + 2:] if reason.startswith(POLICY + ": ") else reason
    return text.split(" (")[0].split(";")[0].strip() or "no reason recorded"


def _who_decided(pairs):
    """One sentence: how many flagged pairs a person decided and how many the automatic policy, by rule."""
    by_person = [p for p in pairs if p.get("decided_by", PERSON) == PERSON and p.get("decision") in ("retain", "exclude")]
    by_policy = [p for p in pairs if p.get("decided_by") == POLICY]
    other = [p for p in pairs if p not in by_person and p not in by_policy]
    parts = ["a person's review decided {} ({} retained, {} excluded)".format(
        _n(len(by_person)), _n(sum(1 for p in by_person if p["decision"] == "retain")),
        _n(sum(1 for p in by_person if p["decision"] == "exclude")))]
    if by_policy:
        rules = {}
        for p in by_policy:
            key = (p.get("decision"), _rule(str(p.get("reason") or "")))
            rules[key] = rules.get(key, 0) + 1
        parts.append("the automatic {} decided {}: {}".format(POLICY, _n(len(by_policy)), ", ".join(
            "{} {} as '{}'".format("retained" if decision == "retain" else "excluded", _n(n), rule)
            for (decision, rule), n in sorted(rules.items(), key=lambda item: (item[0][0] != "retain", -item[1],
                                                                                 item[0][1])))))
    if other:
        parts.append("{} carry no recorded decision".format(_n(len(other))))
    return "Who decided the {} flagged pairs: {}.".format(_n(len(pairs)), "; ".join(parts))


def _verified_rows(validation):
    """Rows the independent replay matched to their original source rows (None: no validation report)."""
    if not isinstance(validation, dict) or validation.get("ok") is not True:
        return None
    for check in validation.get("checks") or []:
        if isinstance(check, dict) and check.get("name") == VALIDATION_ROWS_CHECK and check.get("status") == "OK":
            return (check.get("counts") or {}).get("verified")
    return None


def card_figures(manifest, rows, validation):
    """Every computed table and sentence of the dataset card, as ``{"tables": {...}, "sentences": [...]}``.

    ``tables`` maps a section heading to ``(header, rows)``, each row a tuple of cell strings; the
    card shows the first table under that heading with exactly these cells. ``rows`` are the eval
    rows as parsed JSON; ``validation`` is ``independent_validation.json`` parsed (or None). Where
    the build differs from the reference card its config names (the Eval-1400 card), the row says
    so in its own cell.
    """
    config = manifest.get("config") or {}
    reference = config.get("reference_card") or {}
    ref_name = reference.get("name", "the reference card")
    iso = manifest.get("isolation") or {}
    training = manifest.get("training") or {}
    rows = [v for v in rows if isinstance(v, dict)]
    questions = [v["question"] for v in rows if isinstance(v.get("question"), str)]
    stages, ref_stages = _ordered_stages(manifest)
    overlap = iso.get("final_exact_overlap_by_stage") or {}
    missing = [s for s in ref_stages if s not in overlap]
    internal, cross = _final_duplicates(rows)
    audit = _audit_accounting(manifest, rows) if manifest.get("audit") is not None else None
    verified = _verified_rows(validation)
    with_aliases = sum(1 for v in rows if isinstance(v.get("answers"), list) and v["answers"]
                       and all(isinstance(a, str) and a.strip() for a in v["answers"]))
    counts = {}
    for v in rows:
        counts[v.get("source_dataset")] = counts.get(v.get("source_dataset"), 0) + 1

    def versus(value, ref_value):
        return _n(value) if ref_value is None or ref_value == value else "{} ({}: {})".format(
            _n(value), ref_name, _n(ref_value))

    stage_note = "" if not missing else " (no {} training stage is registered here; the {} registers {})".format(
        " / ".join(missing), ref_name, " / ".join(ref_stages))
    glance = [
        ("Evaluation questions", versus(len(rows), reference.get("questions"))),
        ("Source datasets", _n(len(manifest.get("sources") or []))),
        ("Unique raw / normalized questions", "{} / {}".format(
            _n(len(set(questions))), _n(len(set(question_key(q) for q in questions))))),
        ("Hub split", HUB_SPLIT),
        ("Sampling seed", str(manifest.get("seed"))),
        ("Training-question exclusion union", "{} unique normalized questions".format(
            _n(training.get("union_size", 0)))),
        ("Exact {} question overlap".format(" / ".join(stages)),
         " / ".join(_n(overlap[s]) if s in overlap else "not registered" for s in stages) + stage_note),
        ("Internal / cross-dataset duplicates", "{} / {}".format(internal, cross)),
        ("Records with non-empty gold aliases", _n(with_aliases)),
        ("Records with verified provenance", "not verified (no passing independent validation)"
         if verified is None else _n(verified)),
        ("Known high-confidence training near-duplicates after audit", "not audited (no audit section)"
         if audit is None else _n(audit["high_confidence"])),
        ("Release revision", str(manifest.get("revision"))),
    ]
    quotas = reference.get("quotas") or {}
    composition = [(s.get("dataset"), versus(counts.get(s.get("dataset"), 0), quotas.get(s.get("dataset"))),
                    str(s.get("split")), s.get("variant") or "format {}".format(s.get("format")))
                   for s in config.get("sources") or [] if isinstance(s, dict)]
    composition.append(("Total", versus(len(rows), reference.get("questions")), "", ""))
    files = [f for f in training.get("files") or [] if isinstance(f, dict)]
    by_stage = [(s, _n(sum(f.get("rows", 0) for f in files if f.get("stage") == s)),
                 _n((training.get("unique_keys_by_stage") or {}).get(s, 0)), _n(overlap[s]))
                for s in stages if s in overlap]
    canonical = dict((s, sum(f.get("rows", 0) for f in files if f.get("stage") == s and f.get("role") == "canonical"))
                     for s, *_ in by_stage)
    sentences = [
        "Stage exclusion sets overlap with one another; their union contains {} questions. The counts include "
        "{} historical training file(s) alongside the canonical releases: {}.".format(
            _n(training.get("union_size", 0)), sum(1 for f in files if f.get("role") == "historical"),
            ", ".join("{} {} rows".format(_n(n), s) for s, n in canonical.items()) or "no stage"),
        "Across the {} official candidate rows, isolation removed {} exact training overlaps, {} automatic "
        "near-duplicates (punctuation and template equivalents), and {} duplicates ({} internal, {} cross-source); "
        "the audit's pool filter removed {} candidates before sampling. Review removed {} additional "
        "near-duplicate candidates.".format(
            _n(iso.get("input_rows", 0)), _n(iso.get("exact_overlaps_removed", 0)),
            _n(iso.get("template_equivalents_removed", 0)), _n(iso.get("duplicates_removed", 0)),
            _n(iso.get("internal_duplicates_removed", 0)), _n(iso.get("cross_source_duplicates_removed", 0)),
            _n(iso.get("pool_filter_removed", 0)), _n(iso.get("audit_excluded", 0) +
                                                        iso.get("reviewed_exclusions_removed", 0)))]
    if audit is None:
        sentences.append("No near-duplicate audit was run for this release (its config has no audit section).")
    else:
        sentences.append(
            "The audit flagged {pairs} pairs (a pair is one selected question and one training question) over "
            "{audited} audited questions: {excluding} pairs led to excluding {excluded_questions} questions, "
            "{with_excluded} more pairs involved those excluded questions, and the final {n}-question scan "
            "flagged {final_pairs} pairs involving {final_questions} questions, {resolved}. {remaining}".format(
                n=_n(len(rows)), resolved=("all resolved with explicit reasons for retaining distinct factual "
                "questions" if not audit["final_by_policy"] else "all retained by recorded decisions ({} of them "
                "by the automatic {})".format(_n(audit["final_by_policy"]), POLICY))
                if not audit["final_undecided"] else "{} of them not retained by a recorded decision"
                .format(audit["final_undecided"]),
                remaining="No known high-confidence training near-duplicate remained." if not audit["high_confidence"]
                else "{} questions with a high-confidence training near-duplicate remained.".format(
                    audit["high_confidence"]),
                **dict((k, _n(v)) for k, v in audit.items())))
        sentences.append(_who_decided([p for p in ((manifest.get("audit") or {}).get("report") or {})
                                       .get("flagged_pairs") or [] if isinstance(p, dict)]))
    return {"tables": {
        GLANCE: (("Item", "Value"), glance),
        COMPOSITION: (("Source dataset", "Questions", "Official source split", "Release variant"), composition),
        CURATION: (("Training stage", "Audited input rows", "Unique normalized exclusion questions",
                    "Final exact overlap"), by_stage),
        CHECKSUMS_SECTION: (("Canonical data SHA-256",), [(manifest.get("data_sha256"),)]),
    }, "sentences": sentences}


def markdown_table(header, rows):
    """A pipe table, one row a line (the form ``card_tables`` reads back; no cell may hold a ``|``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def card_tables(text):
    """Each ``## heading`` of a card mapped to the rows (tuples of cells) of the first table under it."""
    tables = {}
    heading = None
    for line in text.split("\n"):
        if line.startswith("## "):
            heading = line[3:].strip()
        elif heading is not None and line.startswith("|"):
            cells = tuple(c.strip() for c in line.strip()[1:-1].split("|"))
            if not all(c and set(c) <= set("-:") for c in cells):
                tables.setdefault(heading, []).append(cells)
        elif heading in tables:
            heading = None  # the first table under a heading ended
    return dict((h, (rows[0], rows[1:])) for h, rows in tables.items() if rows)

def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _list_of(value, kind, keys=()):
    """True when ``value`` is a list of ``kind`` (and, for dicts, each has ``keys``)."""
    return isinstance(value, list) and all(
        isinstance(item, kind) and all(key in item for key in keys) for item in value)


def _manifest_shape(manifest):
    """The first manifest field the checks rely on that has the wrong type, as a message ('' if none)."""
    rules = (
        ("name", isinstance(manifest["name"], str), "a string"),
        ("question_count", _is_int(manifest["question_count"]), "an integer"),
        ("composition", _list_of(manifest["composition"], dict, ("dataset", "selected")),
         "a list of objects with 'dataset' and 'selected'"),
        ("data_sha256", isinstance(manifest["data_sha256"], str), "a string"),
        ("rollout_sha256", isinstance(manifest["rollout_sha256"], str), "a string"),
        ("row_sha256", _list_of(manifest["row_sha256"], str), "a list of strings"),
        ("exclusions", _list_of(manifest["exclusions"], dict), "a list of objects"),
        ("sources", _list_of(manifest.get("sources", []), dict, ("dataset",)),
         "a list of objects with 'dataset'"),
        ("pool_filter_removals", _list_of(manifest.get("pool_filter_removals", []), dict, ("key",)),
         "a list of objects with 'key'"),
    )
    for field, ok, expected in rules:
        if not ok:
            return f"field {field!r} must be {expected}"
    return ""


def _lines(data):
    """Data lines (without newlines) with their one-based row numbers."""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return list(enumerate(parts, start=1))


class _Checks:
    def __init__(self, root):
        self.root = Path(root)
        self.results = []
        self.names = dict(LEGACY_NAMES)
        self.kind = None

    def fail(self, name, file, row, detail):
        failures = sum(1 for c in self.results if c.name == name and not c.ok)
        if failures < MAX_REPORTED:
            self.results.append(Check(name, False, file, row, detail))
        elif failures == MAX_REPORTED:
            self.results.append(Check(name, False, file, None, "more failures not shown"))

    def ok(self, name, detail=""):
        if not any(c.name == name and not c.ok for c in self.results):
            self.results.append(Check(name, True, None, None, detail))

    def read(self, name, check):
        path = self.root / name
        try:
            return path.read_bytes()
        except OSError as exc:
            self.fail(check, name, None, "cannot read: {}".format(exc.strerror))
            return None

    def canonical_object(self, name, check, why=""):
        """The JSON object in ``name``, which must be written canonically (as ``pretty_json`` writes it, so
        an edit after the build shows); None once a failure of ``check`` is recorded."""
        data = self.read(name, check)
        if data is None:
            return None
        try:
            value = json.loads(data)
        except ValueError as exc:
            self.fail(check, name, None, "invalid JSON: {}".format(exc))
            return None
        if not isinstance(value, dict) or data != pretty_json(value):
            self.fail(check, name, None, "not a canonical JSON object" + why)
            return None
        return value

    def name(self, role):
        return self.names[role]

    def expected_files(self):
        """The file names this release must consist of (every role of a benchmark release)."""
        roles = self.names if self.kind == BENCHMARK_KIND else HINTFREE_ROLES
        return set(self.names[role] for role in roles)

    # ------------------------------------------------------------------ checks

    def layout(self):
        """Find the manifest and read the file layout it records."""
        name = find_manifest(self.root)
        if name is None:
            self.fail("layout", str(self.root), None, "no release manifest (*{} or {}), or more than one".format(
                MANIFEST_SUFFIX, LEGACY_MANIFEST))
            return False
        if name != LEGACY_MANIFEST:  # provisional, so a broken manifest still gets every other check
            self.names = layout_names(name[:-len(MANIFEST_SUFFIX)])
            self.kind = BENCHMARK_KIND
        try:
            manifest = json.loads((self.root / name).read_bytes())
        except (OSError, ValueError) as exc:
            self.fail("layout", name, None, "cannot read the manifest: {}".format(exc))
            return True
        if not isinstance(manifest, dict):
            self.fail("layout", name, None, "the manifest is not a JSON object")
            return True
        self.kind = manifest.get("kind")
        layout = manifest.get("layout")
        if layout is None and name == LEGACY_MANIFEST:
            if self.kind == BENCHMARK_KIND:
                self.fail("layout", name, None, "a benchmark release manifest must record its 'layout'")
            self.ok("layout", "legacy file names")
            return True
        stem = manifest.get("file_stem")
        if not isinstance(stem, str) or layout != layout_names(stem) or layout.get("manifest") != name:
            self.fail("layout", name, None, "field 'layout' must name every file by 'file_stem' {!r}: {}".format(
                stem, json.dumps(layout_names(stem) if isinstance(stem, str) else None)))
            return True
        self.names = dict(layout)
        self.ok("layout", "files named by {!r}".format(stem))
        return True

    def checksums(self):
        data = self.read(CHECKSUMS, "checksums")
        if data is None:
            return
        listed = set()
        for row, raw in _lines(data):
            match = re.fullmatch(rb"([0-9a-f]{64}) [ *](.+)", raw)
            if not match:
                self.fail("checksums", CHECKSUMS, row, "not a 'sha256  name' line")
                continue
            digest, name = match.group(1).decode(), match.group(2).decode("utf-8", "replace")
            listed.add(name)
            if "/" in name or "\\" in name or name in (".", ".."):
                self.fail("checksums", CHECKSUMS, row, "{!r} is not a file of this directory".format(name))
                continue
            body = self.read(name, "checksums") if (self.root / name).is_file() else None
            if body is None:
                self.fail("checksums", name, None, "listed in {} but missing".format(CHECKSUMS))
            elif _sha256(body) != digest:
                self.fail("checksums", name, None, "sha256 {} != {} in {}".format(_sha256(body), digest, CHECKSUMS))
        for path in sorted(self.root.iterdir()):
            if path.is_symlink() or not path.is_file():
                self.fail("checksums", path.name, None, "unexpected {} in the release (a release holds only its "
                          "files)".format("directory" if path.is_dir() else "entry"))
            elif path.name != CHECKSUMS and path.name not in listed:
                self.fail("checksums", path.name, None, "file not listed in {}".format(CHECKSUMS))
        self.ok("checksums", "{} files".format(len(listed)))

    def inventory(self):
        """The release consists of exactly its layout's files: nothing missing, nothing unknown."""
        expected = self.expected_files()
        present = set(p.name for p in self.root.iterdir() if p.is_file() and not p.is_symlink())
        for name in sorted(expected - present):
            self.fail("files", name, None, "missing from the release")
        for name in sorted(present - expected):
            self.fail("files", name, None, "unknown file (not one of the release's files: {})".format(
                ", ".join(sorted(expected))))
        self.ok("files", "{} expected files".format(len(expected)))

    def manifest(self):
        name = self.name("manifest")
        data = self.read(name, "manifest")
        if data is None:
            return None
        try:
            manifest = json.loads(data)
        except ValueError as exc:
            self.fail("manifest", name, None, "invalid JSON: {}".format(exc))
            return None
        if not isinstance(manifest, dict):
            self.fail("manifest", name, None, "must be a JSON object, got {}".format(type(manifest).__name__))
            return None
        needed = ("name", "question_count", "composition", "data_sha256", "rollout_sha256", "row_sha256",
                  "exclusions", "schema_version")
        missing = [k for k in needed if k not in manifest]
        if missing:
            self.fail("manifest", name, None, "missing fields {}".format(missing))
            return None
        if manifest.get("kind") not in RELEASE_KINDS:
            self.fail("manifest", name, None,
                      "kind {!r} is not one of {}".format(manifest.get("kind"), ", ".join(RELEASE_KINDS)))
        problem = _manifest_shape(manifest)
        if problem:
            # A tampered or hand-edited manifest must be reported, not crash the checks that read it.
            self.fail("manifest", name, None, problem)
            return None
        if manifest.get("kind") == BENCHMARK_KIND and data != pretty_json(manifest):
            self.fail("manifest", name, None, "not in canonical form (sorted keys, two-space indent): the file "
                      "was edited after the build")
        self.ok("manifest", "{} schema {}".format(manifest["name"], manifest["schema_version"]))
        return manifest

    def eval_rows(self, manifest):
        eval_name = self.name("eval")
        data = self.read(eval_name, "eval rows")
        if data is None:
            return None
        name = manifest["name"]
        digests = manifest["row_sha256"]
        rows = []
        ids = {}
        keys = {}
        for row, raw in _lines(data):
            try:
                value = json.loads(raw)
            except ValueError as exc:
                self.fail("eval rows", eval_name, row, "invalid JSON: {}".format(exc))
                rows.append(None)
                continue
            rows.append(value)
            if not isinstance(value, dict):
                self.fail("eval rows", eval_name, row, "not a JSON object")
                continue
            if set(value) != EVAL_FIELDS:
                extra, missing = sorted(set(value) - EVAL_FIELDS), sorted(EVAL_FIELDS - set(value))
                self.fail("eval rows", eval_name, row, "schema: extra fields {}, missing {}".format(extra, missing))
                continue
            problems = self._row_types(value)
            if problems:
                self.fail("eval rows", eval_name, row, "schema: {}".format(problems))
            expected = "{}_{:04d}".format(name, row)
            if value["id"] != expected:
                self.fail("eval rows", eval_name, row, "id {!r}, expected {!r} (a deleted, inserted or reordered "
                          "row)".format(value["id"], expected))
            if value["id"] in ids:
                self.fail("unique ids", eval_name, row, "duplicate id {!r} (first at row {})".format(
                    value["id"], ids[value["id"]]))
            ids.setdefault(value["id"], row)
            if isinstance(value["question"], str):
                key = question_key(value["question"])
                if key in keys:
                    self.fail("unique questions", eval_name, row,
                              "duplicate question (same normalised key as row {})".format(keys[key]))
                keys.setdefault(key, row)
            if row > len(digests):
                self.fail("row digests", eval_name, row, "row not in the manifest ({} rows recorded)".format(
                    len(digests)))
            elif _sha256(raw) != digests[row - 1]:
                self.fail("row digests", eval_name, row,
                          "row {!r} differs from the manifest's row sha256 (question, answers or provenance "
                          "changed)".format(value.get("id")))
        if len(rows) != manifest["question_count"] or len(rows) != len(digests):
            self.fail("row count", eval_name, len(rows) + 1 if len(rows) < len(digests) else None,
                      "{} rows, manifest records {} ({} row digests)".format(
                          len(rows), manifest["question_count"], len(digests)))
        for check in ("eval rows", "unique ids", "unique questions", "row digests", "row count"):
            self.ok(check, "{} rows".format(len(rows)))
        if _sha256(data) != manifest["data_sha256"]:
            self.fail("data sha256", eval_name, None,
                      "sha256 {} != manifest data_sha256 {}".format(_sha256(data), manifest["data_sha256"]))
        self.ok("data sha256", manifest["data_sha256"][:16])
        return rows

    @staticmethod
    def _row_types(value):
        problems = []
        for field in ("id", "question", "source_dataset", "source_split", "source_file"):
            if not isinstance(value[field], str) or not value[field]:
                problems.append("{} must be a non-empty string".format(field))
        if value["source_id"] is not None and not isinstance(value["source_id"], str):
            problems.append("source_id must be a string or null")
        number = value["source_row_number"]
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            problems.append("source_row_number must be an integer >= 1")
        answers = value["answers"]
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a for a in answers):
            problems.append("answers must be a non-empty list of non-empty strings")
        return "; ".join(problems)

    def file_hashes(self, manifest):
        """Every file other than the manifest and checksums has the sha256 (and rows) the manifest records."""
        files = manifest.get("files")
        mname = self.name("manifest")
        if not isinstance(files, dict):
            self.fail("file hashes", mname, None, "field 'files' must be an object")
            return
        if self.kind == BENCHMARK_KIND:
            expected = self.expected_files() - set([self.name("manifest"), CHECKSUMS])
            for name in sorted(expected - set(files)):
                self.fail("file hashes", mname, None, "no sha256 recorded for {}".format(name))
            for name in sorted(set(files) - expected):
                self.fail("file hashes", mname, None, "records {}, which is not a file of this release".format(name))
        for name, record in sorted(files.items()):
            digest = record.get("sha256") if isinstance(record, dict) else record
            if not isinstance(digest, str) or "/" in name or name in (".", ".."):
                self.fail("file hashes", mname, None, "files[{!r}] is not a sha256 record".format(name))
                continue
            path = self.root / name
            data = path.read_bytes() if path.is_file() else None
            if data is None:
                self.fail("file hashes", name, None, "recorded in the manifest but missing")
            elif _sha256(data) != digest:
                self.fail("file hashes", name, None, "sha256 {} != {} recorded in {}".format(
                    _sha256(data), digest, mname))
            elif isinstance(record, dict) and record.get("rows") != data.count(b"\n"):
                self.fail("file hashes", name, None, "{} lines, manifest records {}".format(
                    data.count(b"\n"), record.get("rows")))
        self.ok("file hashes", "{} files bound to the manifest".format(len(files)))

    def validation(self, manifest):
        """independent_validation.json passed and validated exactly this manifest and data."""
        name = self.name("independent_validation")
        report = self.canonical_object(name, "independent validation")
        if report is None:
            return
        checks = report.get("checks")
        if report.get("ok") is not True or not isinstance(checks, list) or not checks or not all(
                isinstance(c, dict) and c.get("status") == "OK" for c in checks):
            self.fail("independent validation", name, None, "the independent replay did not pass every check")
        for field, want in (("release", manifest["name"]), ("data_sha256", manifest["data_sha256"]),
                            ("manifest_core_sha256", manifest_core_sha256(manifest))):
            if report.get(field) != want:
                self.fail("independent validation", name, None, "{} {!r} != {!r} of this release's manifest "
                          "(the manifest or the report was edited)".format(field, report.get(field), want))
        self.ok("independent validation", "{} replay checks OK".format(len(checks or [])))

    def card(self, manifest):
        """The dataset card's configs load the eval file as the validation split, with the right size."""
        name = self.name("card")
        data = self.read(name, "card configs")
        if data is None:
            return
        text = data.decode("utf-8", "replace")
        parts = text.split("\n---\n", 1)
        if not text.startswith("---\n") or len(parts) != 2:
            self.fail("card configs", name, None, "no YAML front matter")
            return
        front = parts[0][4:]
        paths = re.findall(r"^\s*-?\s*path:\s*(.*?)\s*$", front, flags=re.MULTILINE)
        splits = re.findall(r"^\s*-?\s*split:\s*(.*?)\s*$", front, flags=re.MULTILINE)
        examples = re.findall(r"^\s*num_examples:\s*(.*?)\s*$", front, flags=re.MULTILINE)
        if paths != [self.name("eval")] or splits != ["validation"]:
            self.fail("card configs", name, None, "configs must load exactly {} as split 'validation', found "
                      "paths {} splits {}".format(self.name("eval"), paths, splits))
        if examples != [str(manifest["question_count"])]:
            self.fail("card configs", name, None, "num_examples {} != question_count {}".format(
                examples, manifest["question_count"]))
        self.ok("card configs", "{} -> validation".format(self.name("eval")))

    def card_figures(self, manifest, rows):
        """Every computed table and sentence of the card equals what the release's files give now."""
        name = self.name("card")
        data = self.read(name, "card figures")
        if data is None:
            return
        text = data.decode("utf-8", "replace")
        raw = self.read(self.name("independent_validation"), "card figures")
        try:
            validation = json.loads(raw) if raw is not None else None
        except ValueError:
            validation = None
        expected = card_figures(manifest, rows, validation)
        found = card_tables(text)
        for heading, (header, want) in expected["tables"].items():
            if heading not in found:
                self.fail("card figures", name, None, "no table under the heading '## {}'".format(heading))
                continue
            got_header, got = found[heading]
            if tuple(got_header) != tuple(header):
                self.fail("card figures", name, None, "'{}': columns {} != {}".format(heading, list(got_header),
                                                                                      list(header)))
            got_by_label = dict((row[0], row) for row in got)
            for row in want:
                found_row = got_by_label.get(row[0])
                if found_row is None:
                    self.fail("card figures", name, None, "'{}' row '{}' is missing (the release's files give "
                              "{})".format(heading, row[0], " | ".join(row)))
                elif tuple(found_row) != tuple(row):
                    self.fail("card figures", name, None, "'{}' row '{}': the card says {}, the release's files "
                              "give {}".format(heading, row[0], " | ".join(found_row), " | ".join(row)))
            labels = [row[0] for row in want]
            for row in got:
                if row[0] not in labels:
                    self.fail("card figures", name, None, "'{}' row '{}' is not a figure of this release".format(
                        heading, row[0]))
            if [row[0] for row in got if row[0] in labels] != labels:
                self.fail("card figures", name, None, "'{}' rows are not in the order {}".format(heading, labels))
        for sentence in expected["sentences"]:
            if " ".join(sentence.split()) not in " ".join(text.split()):
                self.fail("card figures", name, None, "missing or edited sentence: {!r}".format(sentence))
        self.ok("card figures", "{} tables and {} sentences recomputed".format(
            len(expected["tables"]), len(expected["sentences"])))

    def figures(self, manifest, rows):
        """Seed, planned counts, caps, quotas and isolation counts recomputed and compared."""
        name = self.name("manifest")
        config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
        sources = manifest.get("sources", [])
        by_config = dict((s.get("dataset"), s) for s in config.get("sources", []) if isinstance(s, dict))
        if manifest.get("seed") != config.get("seed") or manifest.get("name") != config.get("name"):
            self.fail("figures", name, None, "seed/name {!r}/{!r} differ from the recorded config's {!r}/{!r}".format(
                manifest.get("seed"), manifest.get("name"), config.get("seed"), config.get("name")))
        plan = []
        for source in sources:
            entry = by_config.get(source.get("dataset"))
            if entry is None:
                self.fail("figures", name, None, "source {!r} is not in the recorded config".format(
                    source.get("dataset")))
                continue
            planned = entry.get("planned")
            planned = config.get("planned_per_source") if planned is None else planned
            if (source.get("planned"), source.get("cap")) != (planned, entry.get("cap")):
                self.fail("figures", name, None, "{}: planned/cap {}/{} differ from the config's {}/{}".format(
                    source["dataset"], source.get("planned"), source.get("cap"), planned, entry.get("cap")))
            plan.append((source["dataset"], source.get("planned"), source.get("cap")))
        if [s.get("dataset") for s in sources] != [s.get("dataset") for s in config.get("sources", [])]:
            self.fail("figures", name, None, "sources differ from the recorded config's sources")
        try:
            quotas, unplaced = card_quotas(plan)
        except TypeError:
            quotas, unplaced = {}, -1
        counts = {}
        for value in rows:
            if isinstance(value, dict) and isinstance(value.get("source_dataset"), str):
                counts[value["source_dataset"]] = counts.get(value["source_dataset"], 0) + 1
        composition = dict((c.get("dataset"), c) for c in manifest["composition"])
        for source in sources:
            d = source["dataset"]
            want = {"planned": source.get("planned"), "cap": source.get("cap"), "quota": quotas.get(d),
                    "selected": counts.get(d, 0), "split": source.get("split")}
            for record, label in ((source, "sources"), (composition.get(d, {}), "composition")):
                got = dict((k, record.get(k)) for k in want)
                if got != want:
                    self.fail("figures", name, None, "{} {}: {} != recomputed {}".format(label, d, got, want))
            if counts.get(d, 0) != quotas.get(d):
                self.fail("figures", self.name("eval"), None, "{}: {} rows, its quota is {}".format(
                    d, counts.get(d, 0), quotas.get(d)))
        if unplaced or set(composition) != set(s["dataset"] for s in sources):
            self.fail("figures", name, None, "composition does not match the plan")
        if manifest["question_count"] != sum(quotas.values()):
            self.fail("figures", name, None, "question_count {} != sum of quotas {}".format(
                manifest["question_count"], sum(quotas.values())))
        self._isolation(manifest)
        self.ok("figures", "seed {}, quotas {}".format(manifest.get("seed"), "/".join(
            str(q) for q in quotas.values())))

    def _isolation(self, manifest):
        name = self.name("exclusion_audit")
        audit = self.canonical_object(name, "figures", " (edited after the build)")
        if audit is None:
            return
        iso = manifest.get("isolation") or {}
        removed = audit.get("removed") or []
        kinds = {}
        by_stage = {}
        internal = 0
        for r in removed:
            kinds[r.get("kind")] = kinds.get(r.get("kind"), 0) + 1
            if r.get("kind") == "training_overlap":
                for stage in r.get("stages") or []:
                    by_stage[stage] = by_stage.get(stage, 0) + 1
            if r.get("kind") == "duplicate" and (r.get("duplicate_of") or {}).get("dataset") == r.get("dataset"):
                internal += 1
        sources = manifest.get("sources", [])
        training = manifest.get("training") or {}
        listed = manifest.get("exclusions", [])
        recomputed = {
            "input_rows": sum(s.get("candidates", 0) for s in sources),
            "exact_overlaps_removed": kinds.get("training_overlap", 0),
            "exact_overlaps_by_stage": dict((s, by_stage.get(s, 0)) for s in (iso.get("exact_overlaps_by_stage")
                                                                            or {})),
            "template_equivalents_removed": kinds.get("training_equivalent", 0),
            "reviewed_exclusions_removed": kinds.get("reviewed_exclusion", 0),
            "internal_duplicates_removed": internal,
            "cross_source_duplicates_removed": kinds.get("duplicate", 0) - internal,
            "duplicates_removed": kinds.get("duplicate", 0),
            "eligible": sum(s.get("candidates", 0) for s in sources) - len(removed),
            "pool_filter_removed": len(manifest.get("pool_filter_removals", [])),
            "audit_excluded": sum(1 for e in listed if e.get("origin") == "selection audit"),
            "unique_exclusion_keys_by_stage": training.get("unique_keys_by_stage"),
            "exclusion_union_size": training.get("union_size"),
        }
        if sum(by_stage.values()) < kinds.get("training_overlap", 0):
            self.fail("figures", name, None, "a training overlap without a stage")
        for key, want in sorted(recomputed.items()):
            if iso.get(key) != want:
                self.fail("figures", self.name("manifest"), None, "isolation {} is {!r}, recomputed {!r} from {}".format(
                    key, iso.get(key), want, name))
        if any(v != 0 for v in (iso.get("final_exact_overlap_by_stage") or {}).values()):
            self.fail("figures", self.name("manifest"), None, "final exact overlap with training is not 0")
        eligible = sum(s.get("eligible", 0) for s in sources)
        if eligible != recomputed["eligible"] - recomputed["pool_filter_removed"]:
            self.fail("figures", self.name("manifest"), None, "sources' eligible counts {} != {} recomputed".format(
                eligible, recomputed["eligible"] - recomputed["pool_filter_removed"]))
        for key, want in (("isolation", iso), ("exclusions", listed),
                          ("pool_filter_removals", manifest.get("pool_filter_removals", [])),
                          ("audit", manifest.get("audit"))):
            if audit.get(key) != want:
                self.fail("figures", name, None, "{} differs from the manifest's".format(key))

    def composition(self, manifest, rows):
        counts = {}
        for value in rows:
            if isinstance(value, dict) and isinstance(value.get("source_dataset"), str):
                counts[value["source_dataset"]] = counts.get(value["source_dataset"], 0) + 1
        expected = dict((c["dataset"], c["selected"]) for c in manifest["composition"])
        for dataset in sorted(set(expected) | set(counts)):
            if counts.get(dataset, 0) != expected.get(dataset, 0):
                self.fail("composition", self.name("eval"), None, "{}: {} rows, manifest records {}".format(
                    dataset, counts.get(dataset, 0), expected.get(dataset, 0)))
        self.ok("composition", ", ".join("{} {}".format(k, v) for k, v in expected.items()))

    def projection(self, manifest, rows):
        rname, ename = self.name("rollout"), self.name("eval")
        data = self.read(rname, "projection")
        if data is None:
            return
        lines = _lines(data)
        for row, raw in lines:
            try:
                value = json.loads(raw)
            except ValueError as exc:
                self.fail("projection", rname, row, "invalid JSON: {}".format(exc))
                continue
            if not isinstance(value, dict) or set(value) != ROLLOUT_FIELDS:
                self.fail("projection", rname, row, "must have exactly the fields id, question")
                continue
            source = rows[row - 1] if row <= len(rows) else None
            if not isinstance(source, dict):
                self.fail("projection", rname, row, "no matching {} row".format(ename))
            elif value["id"] != source.get("id") or value["question"] != source.get("question"):
                self.fail("projection", rname, row,
                          "differs from {} row {} (id/question must equal the eval row's)".format(ename, row))
        if len(lines) != len(rows):
            self.fail("projection", rname, None, "{} rows, {} has {}".format(len(lines), ename, len(rows)))
        if _sha256(data) != manifest["rollout_sha256"]:
            self.fail("projection", rname, None, "sha256 differs from manifest rollout_sha256")
        self.ok("projection", "rollout = eval minus gold")

    def diagnostics(self, rows):
        dname = self.name("diagnostics")
        data = self.read(dname, "diagnostics")
        if data is None:
            return
        lines = _lines(data)
        for row, raw in lines:
            try:
                value = json.loads(raw)
            except ValueError as exc:
                self.fail("diagnostics", dname, row, "invalid JSON: {}".format(exc))
                continue
            source = rows[row - 1] if row <= len(rows) else None
            if not isinstance(value, dict) or not isinstance(source, dict) or value.get("id") != source.get("id"):
                self.fail("diagnostics", dname, row, "id does not match {} at the same row".format(self.name("eval")))
        if len(lines) != len(rows):
            self.fail("diagnostics", dname, None, "{} rows, {} has {}".format(len(lines), self.name("eval"), len(rows)))
        self.ok("diagnostics", "{} rows".format(len(lines)))

    def provenance(self, manifest, rows):
        sources = dict((s["dataset"], s) for s in manifest.get("sources", []))
        ename = self.name("eval")
        for row, value in enumerate(rows, start=1):
            if not isinstance(value, dict) or not isinstance(value.get("source_dataset"), str):
                continue
            source = sources.get(value["source_dataset"])
            if source is None:
                self.fail("provenance", ename, row, "source_dataset {!r} is not a source in the manifest".format(
                    value["source_dataset"]))
            elif (value.get("source_split"), value.get("source_file")) != (source.get("split"),
                                                                             source.get("source_file")):
                self.fail("provenance", ename, row, "source_split/source_file {!r}/{!r} differ from the manifest's "
                          "{!r}/{!r}".format(value.get("source_split"), value.get("source_file"),
                                             source.get("split"), source.get("source_file")))
        self.ok("provenance", "{} sources".format(len(sources)))

    def exclusions(self, manifest, rows):
        keys = set(e["key"] for e in manifest["exclusions"] if e.get("key"))
        keys |= set(r["key"] for r in manifest.get("pool_filter_removals", []))
        ids = set((e.get("dataset"), e.get("source_id")) for e in manifest["exclusions"] if not e.get("key"))
        for row, value in enumerate(rows, start=1):
            if not isinstance(value, dict) or not isinstance(value.get("question"), str):
                continue
            if question_key(value["question"]) in keys or (value.get("source_dataset"), value.get("source_id")) in ids:
                self.fail("exclusions", self.name("eval"), row, "question is on the manifest's exclusion list "
                          "(or was removed by the pool filter)")
        self.ok("exclusions", "{} excluded".format(len(manifest["exclusions"])))

    def run(self):
        if not self.layout():
            return self.results
        self.checksums()
        self.inventory()
        manifest = self.manifest()
        if manifest is not None:
            self.file_hashes(manifest)
            rows = self.eval_rows(manifest)
            if rows is not None:
                self.composition(manifest, rows)
                self.projection(manifest, rows)
                self.diagnostics(rows)
                self.provenance(manifest, rows)
                self.exclusions(manifest, rows)
                if self.kind == BENCHMARK_KIND:
                    self.figures(manifest, rows)
            if self.kind == BENCHMARK_KIND:
                self.validation(manifest)
                self.card(manifest)
                if rows is not None:
                    self.card_figures(manifest, rows)
        return self.results


def run_checks(release_dir):
    """Every check on ``release_dir``; returns a list of Check (a broken release is reported, never raised)."""
    checks = _Checks(release_dir)
    try:
        return checks.run()
    except Exception as exc:  # a shape no check anticipated: still a FAIL line, not a traceback
        checks.results.append(Check("verifier", False, None, None,
                                    f"stopped by {type(exc).__name__}: {exc} (a release file is malformed)"))
        return checks.results


def main(argv=None):
    """Print each check and exit 0 (all OK) or 1 (a check failed) or 2 (bad usage)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="verify_release.py",
        description="Verify an aethersearch benchmark release with the Python standard library only: "
                    "checksums, every file's sha256 bound into the manifest, the manifest's figures "
                    "recomputed from the rows, the dataset card's configs, and the independent validation. "
                    "Prints OK or FAIL per check (naming the file and row) and exits 0 only if all pass.",
        epilog="Exit status: 0 every check passed, 1 a check failed, 2 usage error. "
               "Also: sha256sum -c checksums.sha256")
    parser.add_argument("release_dir", nargs="?", default=None,
                        help="the release directory (default: the directory holding this file)")
    parser.add_argument("--json", action="store_true", help="print the checks as one JSON list instead")
    args = parser.parse_args(argv)
    root = Path(args.release_dir) if args.release_dir else Path(__file__).resolve().parent
    if not root.is_dir():
        print("FAIL release: {}: not a directory".format(root))
        return 1
    results = run_checks(root)
    failed = [c for c in results if not c.ok]
    if args.json:
        print(json.dumps([c.as_dict() for c in results], indent=2))
        return 1 if failed else 0
    for check in results:
        print(check.line())
    print("{}: {} passed, {} failed".format("FAIL" if failed else "OK", len(results) - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
