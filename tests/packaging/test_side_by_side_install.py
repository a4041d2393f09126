"""Our distribution and AetherSearch's install into one environment, in either order.

Why: both projects were named ``aethersearch`` on the package index, so pip took
one for the other and installing theirs removed ours. Ours is now
``aethersearch-eval`` (import name ``aethersearch``, command ``aether``); theirs
keeps ``aethersearch`` and owns the import name ``agentic_rl``, so the two share
no module. CI cannot fetch their repository: their side is a wheel built here
from a recorded copy of their packaging metadata (empty packages, no code).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = json.loads((Path(__file__).parent / "aethersearch_upstream_metadata.json").read_text())


def _their_wheel(out: Path) -> Path:
    """A valid wheel with their distribution name, version, packages and console scripts (no code)."""
    name, version = UPSTREAM["name"], UPSTREAM["version"]
    info = f"{name}-{version}.dist-info"
    files = {f"{package.replace('.', '/')}/__init__.py": "" for package in UPSTREAM["packages"]}
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 f"Requires-Python: {UPSTREAM['requires_python']}\n")
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: aethersearch-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/top_level.txt"] = "".join(f"{top}\n" for top in UPSTREAM["top_level"])
    files[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
        f"{script} = {target}\n" for script, target in UPSTREAM["console_scripts"].items())
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _run(*args: str | Path) -> str:
    # without the caller's PYTHONPATH: the venv must import what was installed into it
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two venvs and a wheel build: minutes on a loaded 2-core machine
def test_both_distributions_install_in_one_venv_in_either_order(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, REPO)
    (ours,) = wheels.glob("aethersearch_eval-*.whl")
    theirs = _their_wheel(wheels)
    for order in ((ours, theirs), (theirs, ours)):
        venv = tmp_path / f"venv-{order[0].name[:18]}"
        _run(sys.executable, "-m", "venv", venv)
        python = venv / "bin" / "python"
        for wheel in order:  # one at a time: the second install must not remove the first
            _run(python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel)
        listed = {row["name"].lower(): row["version"] for row in json.loads(
            _run(python, "-m", "pip", "list", "--format", "json"))}
        assert listed["aethersearch-eval"] == "0.1.0" and listed["aethersearch"] == UPSTREAM["version"]
        found = _run(python, "-c", "import aethersearch, agentic_rl; print(aethersearch.__file__, agentic_rl.__file__)")
        assert str(venv) in found.split()[0] and str(venv) in found.split()[1]
        assert (venv / "bin" / "aether").is_file() and (venv / "bin" / "aethersearch-config").is_file()
