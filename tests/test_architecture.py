"""Import boundaries: imports point down the layer table, and the rollout side never reaches gold.

Gold answers are read only by ``benchmark`` (building/verifying releases),
``construct`` (writing releases) and ``scoring``. ``agents`` and ``rollout`` must
not import any of them, directly or transitively, so an agent can never see gold.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aethersearch"

# Lower index = lower layer. A module may import its own layer or lower ones.
LAYERS: list[set[str]] = [
    {"errors", "records", "jsonl", "text", "abstention", "registry", "environment", "__init__", "__version__"},
    {"benchmark", "corpus"},
    {"search"},
    {"sandbox", "construct"},
    {"agents"},
    {"rollout"},
    {"scoring"},
    {"compare", "report"},
    {"pipeline", "diagnose", "cli", "commands", "api"},
]
GOLD_READERS = {"benchmark", "construct", "scoring", "compare", "report"}
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


def _imports(path: Path) -> set[str]:
    """Absolute ``aethersearch`` imports of a file (relative imports are refused)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: use absolute imports (line {node.lineno})"
            if node.module == "aethersearch":
                found.update(f"aethersearch.{alias.name}" for alias in node.names)
            elif node.module:
                found.add(node.module)
    return {name for name in found if name.startswith("aethersearch.")}


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
