"""Import boundaries: imports point down the layer table, and the rollout side never reaches gold.

Gold answers are read only by the curation stages (``sources``, ``isolation``,
``selection``, ``audit``, ``release``, ``curation``: building/verifying releases),
``construct`` (writing releases), ``scoring`` and what reads scores. ``agents`` and ``rollout`` must
not import any of them, directly or transitively, so an agent can never see gold.

A plain ``import`` is not the only edge: a string registry
(``{"x": "aethersearch.scoring.metrics:em"}``) loads its target lazily, so every
string constant that names an ``aethersearch`` module counts as an import here.
And every agent class must live in ``agents/``, where this boundary is enforced.

Test doubles (``aethersearch.testing``, e.g. the scripted LLM server) ship in the
package for the tests, the benchmarks and users' tests, but no product module may
import them, and no product module may import the repository's ``tests`` package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aethersearch"

# Lower index = lower layer. A module may import its own layer or lower ones.
LAYERS: list[set[str]] = [
    {"errors", "records", "jsonl", "text", "abstention", "stated_confidence", "registry", "environment", "release_layout", "config_files",
     "__init__", "__version__"},
    {"corpus"},
    # the curation stages, in the card's order; the release's verifier template is the card's rule book, read by
    # isolation, selection and the replay, so ``release`` sits below the stages before it
    {"sources"},
    {"release"},
    {"isolation"},
    {"selection"},
    {"audit"},
    {"curation"},
    {"search"},
    {"sandbox", "construct"},
    {"agents"},
    {"rollout"},
    {"scoring"},
    {"compare", "report", "interop", "diagnostics"},
    {"pipeline", "demo", "cli", "commands", "api", "sandbox_eval", "mcp_bridge"},
    # test doubles: above everything, so they may drive any product module; nothing in the product imports them
    {"testing"},
]
GOLD_READERS = {"sources", "isolation", "selection", "audit", "release", "curation", "construct", "scoring",
                "diagnostics", "compare", "report", "interop"}
ROLLOUT_SIDE = {"agents", "rollout"}


def _area(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "__init__"


def _layer(area: str) -> int:
    for index, names in enumerate(LAYERS):
        if area in names:
            return index
    raise AssertionError(f"area {area!r} is missing from the layer table in {__file__}")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] if len(parts) > 1 else parts
    return ".".join(parts)


#: A string constant that names a module (optionally ``:attribute``), as lazy registries do.
MODULE_STRING = re.compile(r"aethersearch(?:\.[a-z_][a-z0-9_]*)+(?::[A-Za-z_]\w*)?")


def _imports_of_source(source: str, where: str) -> set[str]:
    """Absolute ``aethersearch`` imports of some source, plus modules named by string constants."""
    tree = ast.parse(source)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.fullmatch(node.value):
            found.add(node.value.split(":")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{where}: use absolute imports (line {node.lineno})"
            if node.module == "aethersearch":
                found.update(f"aethersearch.{alias.name}" for alias in node.names)
            elif node.module:
                found.add(node.module)
    return {name for name in found if name.startswith("aethersearch.")}


def _imports(path: Path) -> set[str]:
    """Absolute ``aethersearch`` imports of a file (relative imports are refused)."""
    return _imports_of_source(path.read_text(encoding="utf-8"), str(path))


def _graph() -> dict[str, set[str]]:
    return {_module_name(path): _imports(path) for path in PACKAGE.rglob("*.py")}


def test_imports_point_down_the_layer_table() -> None:
    violations = []
    for module, imported in _graph().items():
        if module == "aethersearch":
            continue
        mine = _layer(_area(module))
        for target in imported:
            if _layer(_area(target)) > mine:
                violations.append(f"{module} imports {target}")
    assert not violations, "imports must point down the layer table:\n" + "\n".join(sorted(violations))


def test_rollout_side_never_reaches_gold_readers() -> None:
    graph = _graph()

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            current = stack.pop()
            for target in graph.get(current, set()):
                candidates = [m for m in graph if m == target or m.startswith(target + ".")]
                for candidate in candidates or [target]:
                    if candidate not in seen:
                        seen.add(candidate)
                        stack.append(candidate)
        return seen

    leaks = []
    for module in graph:
        if _area(module) in ROLLOUT_SIDE:
            bad = {m for m in reach(module) if m.count(".") and _area(m) in GOLD_READERS}
            if bad:
                leaks.append(f"{module} reaches {sorted(bad)}")
    assert not leaks, "the rollout side must not import gold readers:\n" + "\n".join(leaks)


def test_string_registries_count_as_imports() -> None:
    """The detector itself: a registry entry naming a gold reader is an edge to it."""
    source = 'AGENTS = {"cheat": "aethersearch.scoring.join:GoldAgent"}\nDOC = "see aethersearch.scoring for details"\n'
    assert _imports_of_source(source, "<test>") == {"aethersearch.scoring.join"}


def _agent_classes() -> dict[str, str]:
    """Every class deriving (transitively, by name) from ``Agent``: class name -> defining module."""
    bases: dict[str, tuple[str, set[str]]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                         if isinstance(b, ast.Name | ast.Attribute)}
                bases[node.name] = (_module_name(path), names)
    agents: dict[str, str] = {}
    frontier = {"Agent"}
    while frontier:
        found = {name for name, (_, parents) in bases.items() if parents & frontier and name not in agents}
        agents.update({name: bases[name][0] for name in found})
        frontier = found
    return agents


def test_agent_classes_live_in_agents() -> None:
    """An agent defined elsewhere (e.g. next to the scorer) would escape the gold boundary above."""
    agents = _agent_classes()
    assert "SearchR1Agent" in agents, "the agent-class finder no longer sees the built-in agents"
    outside = sorted(f"{module}:{name}" for name, module in agents.items() if _area(module) != "agents")
    assert not outside, "agent classes must be defined under aethersearch/agents/:\n" + "\n".join(outside)


def test_agent_registry_points_into_agents() -> None:
    from aethersearch.agents.base import AGENTS

    stray = {name: target for name, target in AGENTS.items() if not target.startswith("aethersearch.agents.")}
    assert not stray, f"AGENTS entries must name classes under aethersearch.agents: {stray}"


#: The package of shipped test doubles; only tests, benchmarks and the doubles themselves import it.
TEST_DOUBLES = "aethersearch.testing"


def _names_tests_package(path: Path) -> list[str]:
    """Imports of the repository's ``tests`` package in a product file (``import tests...``, ``from tests...``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found.extend(name for name in names if name == "tests" or name.startswith("tests."))
    return found


def test_product_never_imports_test_doubles() -> None:
    """``aethersearch.testing`` is for tests: a product path that imported it could talk to a scripted server."""
    graph = _graph()
    assert any(m.startswith(TEST_DOUBLES + ".") for m in graph), "the test doubles package moved: update TEST_DOUBLES"
    offenders = sorted(f"{module} imports {target}" for module, imported in graph.items()
                       if _area(module) != "testing"
                       for target in imported if target == TEST_DOUBLES or target.startswith(TEST_DOUBLES + "."))
    assert not offenders, "product modules must not import the test doubles:\n" + "\n".join(offenders)


def test_product_never_imports_the_tests_package() -> None:
    offenders = sorted(f"{path.relative_to(PACKAGE)}: {name}" for path in PACKAGE.rglob("*.py")
                       for name in _names_tests_package(path))
    assert not offenders, "product modules must not import tests/:\n" + "\n".join(offenders)


def test_the_double_detector_sees_an_import_and_a_registry_string() -> None:
    """The detector itself: a plain import and a lazy registry string both count as importing a double."""
    source = ('from aethersearch.testing.scripted_server import ScriptedServer\n'
              'LLMS = {"fake": "aethersearch.testing.scripted_server:ScriptedServer"}\n')
    assert _imports_of_source(source, "<test>") == {"aethersearch.testing.scripted_server"}
