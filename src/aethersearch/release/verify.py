"""Verify a release: the standalone checks plus pydantic schema validation of every file.

Why two layers: the ``verify_release.py`` shipped inside each release must run
anywhere with only the standard library, so its checks live in
``verify_release_template.py`` (copied verbatim); this module runs exactly those
checks and adds strict schema validation against the package's records
(``Manifest``, ``EvalRow``, ``DiagnosticsRow``), so both verifiers agree and the
package one is stricter.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from aethersearch.errors import DataError
from aethersearch.jsonl import iter_jsonl, loads, validate_row
from aethersearch.records import DiagnosticsRow, EvalRow
from aethersearch.release import verify_release_template as standalone
from aethersearch.release.manifest import MANIFEST_MODELS
from aethersearch.release_layout import ReleaseLayout, release_layout

__all__ = ["CheckResult", "VerifyReport", "verify_release"]


class CheckResult(NamedTuple):
    """One check: OK/FAIL, and the file and row of a failure."""

    name: str
    ok: bool
    file: str | None
    row: int | None
    detail: str

    def line(self) -> str:
        """``OK name`` / ``FAIL name: file row N: detail``."""
        return standalone.Check(self.name, self.ok, self.file, self.row, self.detail).line()


class VerifyReport(NamedTuple):
    """All checks on one release."""

    release_dir: Path
    checks: list[CheckResult]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(check.ok for check in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks."""
        return [check for check in self.checks if not check.ok]


def _manifest_check(manifest_path: Path) -> CheckResult:
    """Validate the manifest against the schema of its ``kind`` (benchmark or hint-free)."""
    name = manifest_path.name
    try:
        raw = loads(manifest_path.read_bytes())
    except ValueError as exc:
        return CheckResult("manifest schema", False, name, None, f"invalid JSON: {exc}")
    kind = raw.get("kind") if isinstance(raw, dict) else None
    model = MANIFEST_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        return CheckResult("manifest schema", False, name, None,
                           f"field 'kind': {kind!r} is not one of {sorted(MANIFEST_MODELS)}")
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        return CheckResult("manifest schema", False, name, None, f"field {field!r}: {first['msg']}")
    return CheckResult("manifest schema", True, None, None, "")


def _schema_checks(layout: ReleaseLayout) -> list[CheckResult]:
    results: list[CheckResult] = []
    if layout.manifest.is_file():
        results.append(_manifest_check(layout.manifest))
    for role, model, check in (("eval", EvalRow, "eval schema"), ("diagnostics", DiagnosticsRow, "diagnostics schema")):
        path = layout.path(role)
        name = path.name
        if not path.is_file():
            continue
        failures = 0
        try:
            for line, value in iter_jsonl(path):
                try:
                    validate_row(path, line, value, model)
                except DataError as exc:
                    failures += 1
                    if failures <= standalone.MAX_REPORTED:
                        results.append(CheckResult(check, False, name, line, exc.message.split(": ", 1)[-1]))
        except DataError as exc:
            failures += 1
            results.append(CheckResult(check, False, name, exc.line, "invalid JSON"))
        if not failures:
            results.append(CheckResult(check, True, None, None, ""))
    return results


def verify_release(release_dir: str | Path) -> VerifyReport:
    """Run every check on a release directory (never raises for a broken release: it reports)."""
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        return VerifyReport(release_dir, [CheckResult("release", False, str(release_dir), None,
                                                      "not a directory")])
    checks = [CheckResult(c.name, c.ok, c.file, c.row, c.detail) for c in standalone.run_checks(release_dir)]
    try:
        layout = release_layout(release_dir)
    except DataError as exc:
        return VerifyReport(release_dir, [*checks, CheckResult("layout", False, str(release_dir), None, exc.message)])
    checks += _schema_checks(layout)
    return VerifyReport(release_dir, checks)
