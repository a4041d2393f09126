#!/usr/bin/env python3
"""Standalone verifier of an aethersearch benchmark release (Python standard library only).

Usage: ``python verify_release.py [RELEASE_DIR]`` (default: this file's directory).
Prints ``OK`` or ``FAIL`` per check, naming the file and row of every problem,
and exits 0 only when every check passes. Checks: checksums (every file listed
in ``checksums.sha256`` matches, and nothing unlisted), manifest, eval rows
(valid JSON, exact public schema, ids ``<name>_0001...`` in order, unique ids and
questions, each row's sha256 as recorded in the manifest), the canonical data
sha256, composition per source, provenance (each row's split and file are its
source's), the rollout projection (exactly ``id`` and
``question`` of each eval row, same order), diagnostics ids, and that no
question is on the manifest's exclusion list.

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

EVAL_FIELDS = {"id", "question", "answers", "source_dataset", "source_split", "source_id",
               "source_row_number", "source_file"}
ROLLOUT_FIELDS = {"id", "question"}
CHECKSUMS = "checksums.sha256"
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


def card_quotas(plan):
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
    quota = {}
    room = {}
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
            self.fail(check, name, None, f"cannot read: {exc.strerror}")
            return None

    # ------------------------------------------------------------------ checks

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
            body = self.read(name, "checksums") if (self.root / name).is_file() else None
            if body is None:
                self.fail("checksums", name, None, f"listed in {CHECKSUMS} but missing")
            elif _sha256(body) != digest:
                self.fail("checksums", name, None, f"sha256 {_sha256(body)} != {digest} in {CHECKSUMS}")
        for path in sorted(self.root.iterdir()):
            if path.is_file() and path.name != CHECKSUMS and path.name not in listed:
                self.fail("checksums", path.name, None, f"file not listed in {CHECKSUMS}")
        self.ok("checksums", f"{len(listed)} files")

    def manifest(self):
        data = self.read("manifest.json", "manifest")
        if data is None:
            return None
        try:
            manifest = json.loads(data)
        except ValueError as exc:
            self.fail("manifest", "manifest.json", None, f"invalid JSON: {exc}")
            return None
        if not isinstance(manifest, dict):
            self.fail("manifest", "manifest.json", None, f"must be a JSON object, got {type(manifest).__name__}")
            return None
        needed = ("name", "question_count", "composition", "data_sha256", "rollout_sha256", "row_sha256",
                  "exclusions", "schema_version")
        missing = [k for k in needed if k not in manifest]
        if missing:
            self.fail("manifest", "manifest.json", None, f"missing fields {missing}")
            return None
        if manifest.get("kind") not in RELEASE_KINDS:
            self.fail("manifest", "manifest.json", None,
                      f"kind {manifest.get('kind')!r} is not one of {', '.join(RELEASE_KINDS)}")
        problem = _manifest_shape(manifest)
        if problem:
            # A tampered or hand-edited manifest must be reported, not crash the checks that read it.
            self.fail("manifest", "manifest.json", None, problem)
            return None
        self.ok("manifest", f"{manifest['name']} schema {manifest['schema_version']}")
        return manifest

    def eval_rows(self, manifest):
        data = self.read("eval.jsonl", "eval rows")
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
                self.fail("eval rows", "eval.jsonl", row, f"invalid JSON: {exc}")
                rows.append(None)
                continue
            rows.append(value)
            if not isinstance(value, dict):
                self.fail("eval rows", "eval.jsonl", row, "not a JSON object")
                continue
            if set(value) != EVAL_FIELDS:
                extra, missing = sorted(set(value) - EVAL_FIELDS), sorted(EVAL_FIELDS - set(value))
                self.fail("eval rows", "eval.jsonl", row, f"schema: extra fields {extra}, missing {missing}")
                continue
            problems = self._row_types(value)
            if problems:
                self.fail("eval rows", "eval.jsonl", row, f"schema: {problems}")
            expected = f"{name}_{row:04d}"
            if value["id"] != expected:
                self.fail("eval rows", "eval.jsonl", row, f"id {value['id']!r}, expected {expected!r} "
                          "(a deleted, inserted or reordered row)")
            if value["id"] in ids:
                self.fail("unique ids", "eval.jsonl", row, f"duplicate id {value['id']!r} (first at row "
                          f"{ids[value['id']]})")
            ids.setdefault(value["id"], row)
            if isinstance(value["question"], str):
                key = question_key(value["question"])
                if key in keys:
                    self.fail("unique questions", "eval.jsonl", row,
                              f"duplicate question (same normalised key as row {keys[key]})")
                keys.setdefault(key, row)
            if row > len(digests):
                self.fail("row digests", "eval.jsonl", row, f"row not in the manifest ({len(digests)} rows recorded)")
            elif _sha256(raw) != digests[row - 1]:
                self.fail("row digests", "eval.jsonl", row,
                          f"row {value.get('id')!r} differs from the manifest's row sha256 (question, answers "
                          "or provenance changed)")
        if len(rows) != manifest["question_count"] or len(rows) != len(digests):
            self.fail("row count", "eval.jsonl", len(rows) + 1 if len(rows) < len(digests) else None,
                      f"{len(rows)} rows, manifest records {manifest['question_count']} "
                      f"({len(digests)} row digests)")
        for check in ("eval rows", "unique ids", "unique questions", "row digests", "row count"):
            self.ok(check, f"{len(rows)} rows")
        if _sha256(data) != manifest["data_sha256"]:
            self.fail("data sha256", "eval.jsonl", None,
                      f"sha256 {_sha256(data)} != manifest data_sha256 {manifest['data_sha256']}")
        self.ok("data sha256", manifest["data_sha256"][:16])
        return rows

    @staticmethod
    def _row_types(value):
        problems = []
        for field in ("id", "question", "source_dataset", "source_split", "source_file"):
            if not isinstance(value[field], str) or not value[field]:
                problems.append(f"{field} must be a non-empty string")
        if value["source_id"] is not None and not isinstance(value["source_id"], str):
            problems.append("source_id must be a string or null")
        number = value["source_row_number"]
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            problems.append("source_row_number must be an integer >= 1")
        answers = value["answers"]
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a for a in answers):
            problems.append("answers must be a non-empty list of non-empty strings")
        return "; ".join(problems)

    def composition(self, manifest, rows):
        counts = {}
        for value in rows:
            if isinstance(value, dict) and isinstance(value.get("source_dataset"), str):
                counts[value["source_dataset"]] = counts.get(value["source_dataset"], 0) + 1
        expected = {c["dataset"]: c["selected"] for c in manifest["composition"]}
        for dataset in sorted(set(expected) | set(counts)):
            if counts.get(dataset, 0) != expected.get(dataset, 0):
                self.fail("composition", "eval.jsonl", None,
                          f"{dataset}: {counts.get(dataset, 0)} rows, manifest records {expected.get(dataset, 0)}")
        self.ok("composition", ", ".join(f"{k} {v}" for k, v in expected.items()))

    def projection(self, manifest, rows):
        data = self.read("rollout_questions.jsonl", "projection")
        if data is None:
            return
        lines = _lines(data)
        for row, raw in lines:
            try:
                value = json.loads(raw)
            except ValueError as exc:
                self.fail("projection", "rollout_questions.jsonl", row, f"invalid JSON: {exc}")
                continue
            if not isinstance(value, dict) or set(value) != ROLLOUT_FIELDS:
                self.fail("projection", "rollout_questions.jsonl", row, "must have exactly the fields id, question")
                continue
            source = rows[row - 1] if row <= len(rows) else None
            if not isinstance(source, dict):
                self.fail("projection", "rollout_questions.jsonl", row, "no matching eval.jsonl row")
            elif value["id"] != source.get("id") or value["question"] != source.get("question"):
                self.fail("projection", "rollout_questions.jsonl", row,
                          f"differs from eval.jsonl row {row} (id/question must equal the eval row's)")
        if len(lines) != len(rows):
            self.fail("projection", "rollout_questions.jsonl", None,
                      f"{len(lines)} rows, eval.jsonl has {len(rows)}")
        if _sha256(data) != manifest["rollout_sha256"]:
            self.fail("projection", "rollout_questions.jsonl", None, "sha256 differs from manifest rollout_sha256")
        self.ok("projection", "rollout = eval minus gold")

    def diagnostics(self, rows):
        data = self.read("diagnostics.jsonl", "diagnostics")
        if data is None:
            return
        lines = _lines(data)
        for row, raw in lines:
            try:
                value = json.loads(raw)
            except ValueError as exc:
                self.fail("diagnostics", "diagnostics.jsonl", row, f"invalid JSON: {exc}")
                continue
            source = rows[row - 1] if row <= len(rows) else None
            if not isinstance(value, dict) or not isinstance(source, dict) or value.get("id") != source.get("id"):
                self.fail("diagnostics", "diagnostics.jsonl", row, "id does not match eval.jsonl at the same row")
        if len(lines) != len(rows):
            self.fail("diagnostics", "diagnostics.jsonl", None, f"{len(lines)} rows, eval.jsonl has {len(rows)}")
        self.ok("diagnostics", f"{len(lines)} rows")

    def provenance(self, manifest, rows):
        sources = {s["dataset"]: s for s in manifest.get("sources", [])}
        for row, value in enumerate(rows, start=1):
            if not isinstance(value, dict) or not isinstance(value.get("source_dataset"), str):
                continue
            source = sources.get(value["source_dataset"])
            if source is None:
                self.fail("provenance", "eval.jsonl", row, f"source_dataset {value['source_dataset']!r} is not a "
                          "source in the manifest")
            elif (value.get("source_split"), value.get("source_file")) != (source.get("split"),
                                                                             source.get("source_file")):
                self.fail("provenance", "eval.jsonl", row, f"source_split/source_file {value.get('source_split')!r}/"
                          f"{value.get('source_file')!r} differ from the manifest's {source.get('split')!r}/"
                          f"{source.get('source_file')!r}")
        self.ok("provenance", f"{len(sources)} sources")

    def exclusions(self, manifest, rows):
        keys = {e["key"] for e in manifest["exclusions"] if e.get("key")}
        keys |= {r["key"] for r in manifest.get("pool_filter_removals", [])}
        ids = {(e.get("dataset"), e.get("source_id")) for e in manifest["exclusions"] if not e.get("key")}
        for row, value in enumerate(rows, start=1):
            if not isinstance(value, dict) or not isinstance(value.get("question"), str):
                continue
            if question_key(value["question"]) in keys or (value.get("source_dataset"), value.get("source_id")) in ids:
                self.fail("exclusions", "eval.jsonl", row, "question is on the manifest's exclusion list "
                          "(or was removed by the pool filter)")
        self.ok("exclusions", f"{len(manifest['exclusions'])} excluded")

    def run(self):
        self.checksums()
        manifest = self.manifest()
        if manifest is not None:
            rows = self.eval_rows(manifest)
            if rows is not None:
                self.composition(manifest, rows)
                self.projection(manifest, rows)
                self.diagnostics(rows)
                self.provenance(manifest, rows)
                self.exclusions(manifest, rows)
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
    """Print each check and exit 0 (all OK) or 1."""
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent
    results = run_checks(root)
    for check in results:
        print(check.line())
    failed = [c for c in results if not c.ok]
    print(f"{'FAIL' if failed else 'OK'}: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
