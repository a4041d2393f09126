"""Every byte of a release is covered: random tampers, each followed by regenerating checksums.sha256.

The tamperer in these tests is the one the issue describes: they edit any file
(or add one, or a directory) and then regenerate ``checksums.sha256`` so that
``sha256sum -c`` passes. Both verifiers must still fail: ``aether verify``
(``verify_release``) and the standard-library ``verify_release.py`` shipped in
the release (a pristine copy is used, so the tamperer cannot edit the judge).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aethersearch.release.verify import verify_release
from aethersearch.release_layout import release_layout

from .conftest_helpers import build_demo

TAMPERS = 320


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tamper")
    _, result = build_demo(root)
    return result.release_dir


def load_verifier(path: Path) -> ModuleType:
    """A release's own ``verify_release.py`` imported as a module (the standalone judge)."""
    spec = importlib.util.spec_from_file_location("pristine_verify_release", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def regenerate_checksums(release: Path) -> None:
    """What a careless or malicious editor does after an edit: make ``sha256sum -c`` pass again."""
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in sorted(release.iterdir())
             if p.is_file() and p.name != "checksums.sha256"]
    (release / "checksums.sha256").write_text("".join(lines), encoding="utf-8")


def _json_edit(data: bytes, rng: random.Random) -> bytes | None:
    """Change one scalar inside a JSON document and re-serialise it canonically (figures, seed, counts)."""
    value = json.loads(data)
    paths: list[tuple[list[object], object]] = []

    def walk(node: object, path: list[object]) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, [*path, key])
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, [*path, index])
        else:
            paths.append((path, node))

    walk(value, [])
    if not paths:
        return None
    path, old = rng.choice(paths)
    if isinstance(old, bool) or old is None:
        new: object = 1
    elif isinstance(old, int):
        new = old + rng.choice([-1, 1, 7])
    elif isinstance(old, str):
        new = old + "x" if not old else old[:-1] + ("x" if old[-1] != "x" else "y")
    else:
        new = 0
    target = value
    for key in path[:-1]:
        target = target[key]  # type: ignore[index]
    target[path[-1]] = new  # type: ignore[index]
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def tamper(release: Path, rng: random.Random) -> str:
    """Apply one random edit to the release; return a description of it."""
    files = sorted(p for p in release.iterdir() if p.name != "checksums.sha256")
    kind = rng.choice(["byte", "byte", "insert", "delete", "line", "json", "json", "stray_file", "stray_dir",
                       "card_path"])
    if kind == "stray_file":
        (release / rng.choice(["notes.txt", "eval.jsonl", ".DS_Store", "extra.json"])).write_bytes(b"hello\n")
        return kind
    if kind == "stray_dir":
        sub = release / rng.choice(["extra", "cache", ".git"])
        sub.mkdir()
        if rng.random() < 0.5:
            (sub / "x.json").write_text("{}")
        return kind
    if kind == "card_path":
        card = release / "README.md"
        text = card.read_text(encoding="utf-8")
        layout = release_layout(release)
        card.write_text(text.replace(f"path: {layout.eval.name}", f"path: {layout.rollout.name}"), encoding="utf-8")
        return kind
    path = rng.choice(files)
    data = bytearray(path.read_bytes())
    if kind == "json" and path.suffix == ".json":
        edited = _json_edit(bytes(data), rng)
        if edited is not None and edited != bytes(data):
            path.write_bytes(edited)
            return f"json {path.name}"
        kind = "byte"
    if kind == "line" and data.count(b"\n") > 1:
        lines = bytes(data).split(b"\n")
        i, j = rng.randrange(len(lines) - 1), rng.randrange(len(lines) - 1)
        if lines[i] != lines[j]:
            lines[i], lines[j] = lines[j], lines[i]
            path.write_bytes(b"\n".join(lines))
            return f"swap lines {path.name}"
        kind = "delete"
    position = rng.randrange(len(data))
    if kind == "insert":
        data.insert(position, rng.choice(b" x0\n{"))
    elif kind == "delete":
        del data[position]
    else:
        old = data[position]
        data[position] = rng.choice([b for b in b"0123456789abcdef xyz{}\"," if b != old])
    path.write_bytes(bytes(data))
    return f"{kind} {path.name}@{position}"


def test_every_random_tamper_with_regenerated_checksums_fails_both_verifiers(pristine: Path, tmp_path: Path) -> None:
    judge_path = tmp_path / "judge" / "verify_release.py"
    judge_path.parent.mkdir()
    shutil.copy(pristine / "verify_release.py", judge_path)
    judge = load_verifier(judge_path)
    assert verify_release(pristine).ok and all(c.ok for c in judge.run_checks(pristine))
    rng = random.Random(20261202)
    missed = []
    kinds: dict[str, int] = {}
    for attempt in range(TAMPERS):
        work = tmp_path / f"t{attempt}"
        shutil.copytree(pristine, work)
        what = tamper(work, rng)
        regenerate_checksums(work)
        kinds[what.split()[0]] = kinds.get(what.split()[0], 0) + 1
        package_ok = verify_release(work).ok
        standalone_ok = all(c.ok for c in judge.run_checks(work))
        if attempt % 40 == 0:  # the shipped script as a user runs it: exit status 1
            proc = subprocess.run([sys.executable, str(judge_path), str(work)], capture_output=True, text=True,
                                  check=False)
            assert proc.returncode == 1, (what, proc.stdout[-2000:])
        if package_ok or standalone_ok:
            missed.append(f"{what}: aether verify {'OK' if package_ok else 'FAIL'}, "
                          f"verify_release.py {'OK' if standalone_ok else 'FAIL'}")
        shutil.rmtree(work)
    assert not missed, f"{len(missed)} of {TAMPERS} tampers undetected:\n" + "\n".join(missed[:20])
    assert sum(kinds.values()) == TAMPERS >= 300
    assert {"byte", "json", "stray_file", "stray_dir", "card_path"} <= set(kinds), kinds


def _failures(release: Path, judge: ModuleType) -> tuple[list[str], list[str]]:
    return ([c.line() for c in verify_release(release).failures],
            [c.line() for c in judge.run_checks(release) if not c.ok])


@pytest.mark.parametrize("edit", ["seed", "quota", "planned", "isolation", "card_path", "diagnostics", "subdir"])
def test_named_tampers_from_the_issue_are_reported_by_name(pristine: Path, tmp_path: Path, edit: str) -> None:
    judge = load_verifier(pristine / "verify_release.py")
    work = tmp_path / "rel"
    shutil.copytree(pristine, work)
    layout = release_layout(work)
    manifest = json.loads(layout.manifest.read_bytes())
    if edit == "seed":
        manifest["seed"] = 43
        manifest["config"]["seed"] = 43
    elif edit == "quota":
        manifest["composition"][0]["quota"] += 1
        manifest["sources"][0]["quota"] += 1
    elif edit == "planned":
        manifest["sources"][1]["planned"] += 5
        manifest["composition"][1]["planned"] += 5
    elif edit == "isolation":
        manifest["isolation"]["exact_overlaps_removed"] += 1
    if edit in {"seed", "quota", "planned", "isolation"}:
        layout.manifest.write_text(json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
    elif edit == "card_path":
        card = work / "README.md"
        card.write_text(card.read_text().replace(f"path: {layout.eval.name}", f"path: {layout.rollout.name}"))
    elif edit == "diagnostics":
        with layout.diagnostics.open("ab") as handle:
            handle.write(b"\n")
    else:
        (work / "extra").mkdir()
    regenerate_checksums(work)
    package, standalone = _failures(work, judge)
    assert package and standalone
    expected = {"seed": "independent validation", "quota": "figures", "planned": "figures",
                "isolation": "figures", "card_path": "card configs", "diagnostics": "file hashes",
                "subdir": "unexpected directory"}[edit]
    assert any(expected in line for line in standalone), standalone
    assert any(expected in line for line in package), package
