"""Where each file of a release directory is: the one accessor every reader uses.

Why one place: the card publishes its files under the release's own name
(``eval_1400.jsonl``, ``eval_1400_rollout_questions.jsonl``,
``eval_1400_manifest.json``, ...), and the builder, the verifiers, the runner,
the scorer and the diagnostics all open them. A name spelled in six modules
drifts; a name looked up here does not. The manifest records its layout (role ->
file name), so a reader needs only the directory.

Why at the bottom layer: ``rollout/`` must find the rollout questions without
importing anything that reads gold (``tests/test_architecture.py``). This
module reads only ``*_manifest.json``'s ``layout``/``file_stem`` fields with the
standard library and never opens the eval file.

Older and hint-free releases (``construct/``) use fixed names (``eval.jsonl``,
``manifest.json``, ...): a directory holding ``manifest.json`` without a
``layout`` is read with those ``LEGACY_NAMES``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from aethersearch.errors import DataError

__all__ = ["LEGACY_NAMES", "MANIFEST_SUFFIX", "ROLES", "ReleaseLayout", "layout_names", "release_layout"]

ROLES = ("eval", "rollout", "manifest", "exclusion_audit", "diagnostics", "independent_validation",
         "verifier", "checksums", "attribution", "card")
MANIFEST_SUFFIX = "_manifest.json"

LEGACY_NAMES = {"eval": "eval.jsonl", "rollout": "rollout_questions.jsonl", "manifest": "manifest.json",
                "exclusion_audit": "exclusion_audit.json", "diagnostics": "diagnostics.jsonl",
                "independent_validation": "independent_validation.json", "verifier": "verify_release.py",
                "checksums": "checksums.sha256", "attribution": "ATTRIBUTION.md", "card": "README.md"}


def layout_names(stem: str) -> dict[str, str]:
    """The card's file names for a release whose files are named by ``stem`` (e.g. ``eval_1400``)."""
    return {"eval": f"{stem}.jsonl", "rollout": f"{stem}_rollout_questions.jsonl",
            "manifest": f"{stem}{MANIFEST_SUFFIX}", "exclusion_audit": f"{stem}_exclusion_audit.json",
            "diagnostics": f"{stem}_diagnostics.jsonl", "independent_validation": "independent_validation.json",
            "verifier": "verify_release.py", "checksums": "checksums.sha256", "attribution": "ATTRIBUTION.md",
            "card": "README.md"}


class ReleaseLayout(NamedTuple):
    """A release directory and the file name of each role in it."""

    root: Path
    names: dict[str, str]

    def path(self, role: str) -> Path:
        """The path of ``role``'s file (see ``ROLES``)."""
        if role not in self.names:
            raise KeyError(f"unknown release file role {role!r}; roles: {', '.join(ROLES)}")
        return self.root / self.names[role]

    @property
    def eval(self) -> Path:
        """The gold file (questions + answers + provenance)."""
        return self.path("eval")

    @property
    def rollout(self) -> Path:
        """The rollout projection (``id``, ``question``): all an agent may see."""
        return self.path("rollout")

    @property
    def manifest(self) -> Path:
        """The release manifest."""
        return self.path("manifest")

    @property
    def diagnostics(self) -> Path:
        """Per-question diagnostics (supporting facts, masks)."""
        return self.path("diagnostics")

    @property
    def checksums(self) -> Path:
        """``checksums.sha256``."""
        return self.path("checksums")


def _manifest_path(root: Path) -> Path:
    if (root / LEGACY_NAMES["manifest"]).is_file():
        return root / LEGACY_NAMES["manifest"]
    found = sorted(p for p in root.glob(f"*{MANIFEST_SUFFIX}") if p.is_file()) if root.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise DataError(root, f"no release manifest (*{MANIFEST_SUFFIX} or manifest.json) in this directory",
                        fix="point at a release directory written by `aether build` (or rebuild it)")
    raise DataError(root, f"{len(found)} release manifests: {', '.join(p.name for p in found)}",
                    fix="a release directory holds exactly one release; rebuild it into an empty directory")


def release_layout(release_dir: str | Path) -> ReleaseLayout:
    """The layout of the release in ``release_dir``, read from its manifest (legacy names as fallback)."""
    root = Path(release_dir)
    manifest = _manifest_path(root)
    try:
        data = json.loads(manifest.read_bytes())
    except (OSError, ValueError) as exc:
        raise DataError(manifest, f"cannot read the release manifest: {exc}",
                        fix="restore the release or rebuild it (`aether build`)") from None
    layout = data.get("layout") if isinstance(data, dict) else None
    if layout is None:
        return ReleaseLayout(root, dict(LEGACY_NAMES))
    stem = data.get("file_stem")
    if not isinstance(stem, str) or layout != layout_names(stem) or manifest.name != layout["manifest"]:
        raise DataError(manifest, f"field 'layout' does not name the files by the release's file_stem {stem!r}",
                        field="layout", fix="the manifest was edited; restore the release or rebuild it")
    return ReleaseLayout(root, dict(layout))
