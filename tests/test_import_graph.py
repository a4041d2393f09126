"""The import graph of ``src/aethersearch`` has no circles, and no top-level package outgrows the rest.

Why: a circle means two modules can only be read (and changed) together, and
Python hides it by importing one side lazily inside a function. So this test
reads every file with ``ast`` (nothing is imported) and builds two graphs of
module -> module edges:

* **module-level** imports (statements outside any function, including those
  under ``if TYPE_CHECKING:``), which run when a module is loaded;
* **all** imports, adding the lazy ones written inside functions.

Both must have 0 circles. A module is a file (``aethersearch.corpus.store``); a
package's ``__init__.py`` is the package itself. ``from aethersearch.x import y``
is an edge to ``aethersearch.x.y`` when that is a module, else to
``aethersearch.x``. A failure names every circle, one module path per line.

It also measures how the source lines are shared: no top-level package (a
folder under ``src/aethersearch``) may hold more than :data:`MAX_SHARE` of the
``.py`` lines, so no stage grows into a room a newcomer cannot read.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aethersearch"
#: The largest share of ``src/aethersearch``'s ``.py`` lines one top-level package may hold.
MAX_SHARE = 0.15


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _imports(tree: ast.Module, modules: set[str], *, lazy: bool) -> set[str]:
    """Modules of ``aethersearch`` this file imports: at module level, or (``lazy``) also inside functions."""
    found: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import | ast.ImportFrom) and (lazy or not inside):
                if isinstance(child, ast.Import):
                    found.update(alias.name for alias in child.names)
                elif child.module:
                    for alias in child.names:
                        sub = f"{child.module}.{alias.name}"
                        found.add(sub if sub in modules else child.module)
            visit(child, inside)

    visit(tree, False)
    return found


def import_graph(*, lazy: bool) -> dict[str, set[str]]:
    """``module -> modules it imports`` over ``src/aethersearch`` (edges to other aethersearch modules only)."""
    trees = {_module_name(path): ast.parse(path.read_text(encoding="utf-8")) for path in PACKAGE.rglob("*.py")}
    modules = set(trees)
    return {name: {target for target in _imports(tree, modules, lazy=lazy) if target in modules and target != name}
            for name, tree in trees.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(found: list[list[str]], graph: dict[str, set[str]]) -> str:
    lines = []
    for component in found:
        members = set(component)
        lines.append("circle: " + " <-> ".join(component))
        lines.extend(f"    {a} imports {b}" for a in component for b in sorted(graph[a] & members))
    return "\n".join(lines)


def test_no_circles_among_module_level_imports() -> None:
    graph = import_graph(lazy=False)
    found = circles(graph)
    assert not found, "module-level imports form circles:\n" + _describe(found, graph)


def test_no_circles_even_counting_imports_inside_functions() -> None:
    graph = import_graph(lazy=True)
    found = circles(graph)
    assert not found, "imports (lazy ones included) form circles:\n" + _describe(found, graph)


def test_the_circle_finder_names_a_circle() -> None:
    """The detector itself: a three-module loop is found and named; a chain is not a circle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert "circle: a <-> b <-> c" in _describe(circles(graph), graph)
    assert circles({"a": {"b"}, "b": set()}) == []


def line_shares() -> dict[str, float]:
    """Share of ``src/aethersearch``'s ``.py`` lines under each top-level package (flat modules excluded)."""
    lines: dict[str, int] = {}
    total = 0
    for path in PACKAGE.rglob("*.py"):
        count = len(path.read_text(encoding="utf-8").splitlines())
        total += count
        top = path.relative_to(PACKAGE).parts
        if len(top) > 1:
            lines[top[0]] = lines.get(top[0], 0) + count
    return {name: count / total for name, count in sorted(lines.items())}


def test_no_top_level_package_holds_more_than_its_share_of_the_lines() -> None:
    shares = line_shares()
    assert len(shares) > 5, "the line counter no longer sees the packages"
    too_big = {name: f"{share:.1%}" for name, share in shares.items() if share > MAX_SHARE}
    assert not too_big, (f"top-level packages over {MAX_SHARE:.0%} of src/aethersearch's lines: {too_big}; "
                         "split them at their seams")
