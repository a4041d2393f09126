"""Every command the README and its docs pages show runs as written, so neither can drift from the CLI.

The pages are ``tests/doc_pages.py``'s list: the README, then the docs pages that
took over its sections, read in that order as one text.

* Every fenced ``bash`` block is executed command by command in one working
  directory, in README order, with only *inputs* swapped for small local ones:
  the demo release stands in for ``eval1400`` outside the build block, the demo
  index for ``wiki18_bm25/``, an in-process scripted OpenAI-compatible server for
  the model endpoint, a free port for 8000. ``aether serve`` is started in the
  background and must print its ready line. The ``python`` block is executed too.
* Every ``aether …`` command in the README's prose and table (placeholders such as
  ``DIR`` or ``RUN`` and all) must parse: the command exists, each option exists,
  and the number of positional arguments is right (prose naming a command or an
  option, such as ``aether run`` or ``aether score --strict``, must name real ones).
* The build block reads the real public data (``../shared/data``) and skips with a
  reason when it is absent.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aethersearch.testing.scripted_server import ScriptedServer, search_r1_rule
from tests.doc_pages import fenced_blocks, pages

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AETHER_SHARED_DATA", ROOT.parent / "shared" / "data"))
INLINE = re.compile(r"`(aether [^`]+)`")
#: commands of the build block: they keep the real ``eval1400`` built from the public data
BUILD_COMMANDS = ("eval1400-config", "build", "review", "verify", "replay", "audit")
#: meta commands that are the README's own set-up, not CLI commands (``make demo`` runs `aether eval --out demo_out`)
META = ("make demo", "make test")
CHECKPOINTS = ("base", "sft", "dpo", "rl")


def blocks(language: str) -> list[str]:
    """The fenced blocks in ``language`` of the README and its docs pages, in page order."""
    return fenced_blocks(language)


def all_text() -> str:
    """The README and its docs pages, one after the other."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())


def commands(block: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments and blank lines dropped."""
    joined = block.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(shlex.join(words))
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _click_command(words: list[str]) -> tuple[Any, list[str], str]:
    import typer

    from aethersearch.cli import app

    command: Any = typer.main.get_command(app)
    name = "aether"
    rest = list(words)
    while hasattr(command, "commands") and rest and rest[0] in command.commands:
        name = rest[0]
        command = command.commands[rest.pop(0)]
    return command, rest, name


def test_every_readme_command_parses() -> None:
    text = all_text()
    found = INLINE.findall(text) + [c for lang in ("bash",) for b in blocks(lang) for c in commands(b)
                                    if c.startswith("aether ")]
    assert len(found) > 30
    problems = []
    for raw in found:
        words = shlex.split(raw.replace("[", "").replace("]", ""))[1:]
        command, rest, name = _click_command(words)
        if hasattr(command, "commands"):
            problems.append(f"{raw}: {rest[:1] or 'nothing'} is not a subcommand of `{name}`")
            continue
        if raw in INLINE.findall(text) and all(word.startswith("-") for word in rest):
            # prose naming a command or an option (`aether run`, `aether score --strict`): they must exist
            known = {opt for param in command.params for opt in getattr(param, "opts", [])}
            problems.extend(f"{raw}: no option {word} on `{name}`" for word in rest if word not in known)
            continue
        try:
            command.make_context(name, rest)
        except Exception as exc:  # noqa: BLE001 -- click's usage errors, reported all at once
            problems.append(f"{raw}: {exc}")
    assert not problems, "README commands that do not parse:\n" + "\n".join(problems)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A working directory with the demo outputs, a scripted model server and a free search port."""
    root = tmp_path_factory.mktemp("readme")
    env = {**os.environ, "AETHER_SHARED_DATA": str(SHARED)}
    rule = search_r1_rule(lambda question: "Tinli Pratavli", searches=1)
    with ScriptedServer(rule) as llm:
        yield {"root": root, "env": env, "llm": llm.url, "search_port": _free_port(), "view_port": _free_port(),
               "background": []}


def _aether(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> None:
    result = subprocess.run([sys.executable, "-m", "aethersearch.cli", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=timeout, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"`aether {shlex.join(args)}` failed ({result.returncode}):\n{output[-3000:]}"
    assert "Traceback" not in output, output[-3000:]


def _substitute(command: str, work: dict[str, Any]) -> str:
    port = work["search_port"]
    words = shlex.split(command)
    if words[1] not in BUILD_COMMANDS:
        command = re.sub(r"(?<![\w/])eval1400/?(?![\w/])", "demo_out/release", command)
    return (command.replace("wiki18_bm25/", "demo_out/index").replace("--port 8000", f"--port {port}")
            .replace("--port 7575", f"--port {work['view_port']}")
            .replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}")
            .replace("http://127.0.0.1:8001/v1", work["llm"]).replace("../shared/data", str(SHARED)))


def _serve(args: list[str], work: dict[str, Any]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", *args], cwd=work["root"], env=work["env"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    work["background"].append(proc)
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    line = proc.stdout.readline()
    while "serving" not in line:
        assert proc.poll() is None and time.monotonic() < deadline, f"`aether {shlex.join(args)}` never got ready"
        line = proc.stdout.readline()


def _verl_generations(work: dict[str, Any], target: Path) -> None:
    """What verl's trainer would write under ``trainer.validation_data_dir`` (see tests/interop)."""
    from tests.interop.test_verl_roundtrip import _verl_validation

    written, _, _ = _verl_validation(work["root"] / "val.parquet", target.parent, step=int(target.stem))
    assert written == target


def _run_block(block: str, work: dict[str, Any]) -> int:
    ran = 0
    for command in commands(block):
        if command in META:
            continue
        command = _substitute(command, work)
        words = shlex.split(command)
        assert words[0] == "aether", f"README block runs something other than aether: {command}"
        args = words[1:]
        if args[0] in ("serve", "view"):  # servers: started in the background, stopped at the end
            _serve(args, work)
        elif args[0] == "import" and args[1] == "verl":
            _verl_generations(work, work["root"] / args[2])
            _aether(args, work["root"], work["env"])
        elif "runs/sft" in command and args[0] in ("run", "score"):
            for name in CHECKPOINTS:  # the README shows one checkpoint; compare and report need all four
                _aether(shlex.split(command.replace("sft", name))[1:], work["root"], work["env"])
        else:
            _aether(args, work["root"], work["env"])
        ran += 1
    return ran


def _viewer_serves_the_demo_run(port: int) -> None:
    """The README's `aether view` answers with the demo sandbox run's 60 questions and opens a trace."""
    import httpx

    from tests.serving import wait_for_json

    page = wait_for_json(f"http://127.0.0.1:{port}/api/questions")
    assert page["total"] == 60 and page["ids"]
    trace = httpx.get(f"http://127.0.0.1:{port}/q/{page['ids'][0]}", timeout=10)
    assert trace.status_code == 200 and 'id="chain"' in trace.text


def _is_build_block(block: str) -> bool:
    return "eval1400-config" in block


@pytest.mark.slow
@pytest.mark.timeout(1200)  # every README and guide block end to end: minutes when the cores are shared
def test_readme_bash_blocks_run(work: dict[str, Any]) -> None:
    try:
        ran = 0
        for block in blocks("bash"):
            if not _is_build_block(block):
                ran += _run_block(block, work)
        assert ran >= 10
        for name in ("demo_out/report.html", "cmp.json", "report.html", "val.parquet", "runs/step-120/scores.json"):
            assert (work["root"] / name).is_file(), name
        _viewer_serves_the_demo_run(work["view_port"])
        for block in blocks("python"):
            code = _substitute(block, work).replace('"demo_out/release"', repr(str(work["root"] / "demo_out/release")))
            namespace: dict[str, Any] = {}
            exec(compile(code, "README.md and docs/", "exec"), namespace)  # noqa: S102 -- the README's own example
            assert namespace["metrics"], "the README's evaluate() example returned no metrics"
    finally:
        for proc in work["background"]:
            proc.terminate()
            proc.wait(timeout=20)


def test_readme_build_block_is_run_verbatim_by_the_release_test() -> None:
    """The build block (its first build stops for review by design) runs verbatim on the real data in
    tests/benchmark/test_readme_release.py, which also asserts the card's figures; here it must parse."""
    (build,) = [b for b in blocks("bash") if _is_build_block(b)]
    assert [shlex.split(c)[1] for c in commands(build)] == ["eval1400-config", "build", "review", "build", "verify",
                                                          "replay", "audit"]


def test_every_command_page_is_in_the_docs_site() -> None:
    """A page listed in tests/doc_pages.py but left out of mkdocs.yml's nav would be tested yet never published."""
    import yaml

    def nav_files(node: Any) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [f for value in node.values() for f in nav_files(value)]
        return [f for item in node for f in nav_files(item)] if isinstance(node, list) else []

    nav = set(nav_files(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))
    missing = [str(page.relative_to(ROOT)) for page in pages()[1:] if str(page.relative_to(ROOT / "docs")) not in nav]
    assert not missing, f"command pages missing from mkdocs.yml's nav: {missing}"
