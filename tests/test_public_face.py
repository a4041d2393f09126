"""The package's public face: every module says what it offers (``__all__``), and no module reaches past it.

Why: users and the other layers import from these modules; a name a module does not
declare is its own business and may change. Read statically (no module is imported,
so optional extras need not be installed):

* every module declares ``__all__``, and each name in it is defined there;
* a module imports from another of the package only names that module declares (or its submodules);
* a module touches no other module's private names (``obj._name`` only where this module defines ``_name``);
* the whole surface is frozen in ``tests/public_surface.json``: a change to it is a deliberate API change.
  After one, rewrite the file with ``AETHER_UPDATE_SURFACE=1 pytest tests/test_public_face.py``.
"""

from __future__ import annotations

import ast
import json
import os
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = ROOT / "aethersearch"
SURFACE = Path(__file__).with_name("public_surface.json")
#: modules copied byte for byte into every release (their sha256 is in its checksums), so never rewritten: what
#: they offer is their public top-level names
VERBATIM = frozenset({"aethersearch.release.verify_release_template"})
#: a named tuple's own methods carry an underscore by design (they are public)
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def _modules() -> dict[str, ast.Module]:
    return {_module_name(path): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(PACKAGE.rglob("*.py"))}


def _declared(tree: ast.Module) -> list[str] | None:
    if tree in _verbatim_trees():
        return sorted(name for name in _top_level_names(tree, imports=False) if not name.startswith("_"))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            assert isinstance(value, (ast.List, ast.Tuple)), "__all__ must be a literal list"
            return [elt.value for elt in value.elts if isinstance(elt, ast.Constant)]
    return None


def _assigned(targets: list[ast.expr]) -> set[str]:
    """Names bound by assignment targets, tuples unpacked (``A, B = ...``)."""
    names: set[str] = set()
    for target in targets:
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            names |= _assigned(list(target.elts))
    return names


def _verbatim_trees() -> list[ast.Module]:
    return [tree for name, tree in _modules().items() if name in VERBATIM]


def _top_level_names(tree: ast.Module, *, imports: bool = True) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node in tree.body:
            names.add(node.name)
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= _assigned(node.targets)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and imports:
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.If, ast.Try)):  # optional imports and TYPE_CHECKING blocks
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names.update((alias.asname or alias.name).split(".")[0] for alias in inner.names)
                elif isinstance(inner, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(inner.name)
                elif isinstance(inner, ast.Assign):
                    names |= _assigned(inner.targets)
    return names


def test_every_module_declares_what_it_offers_and_defines_it() -> None:
    missing = [name for name, tree in _modules().items() if _declared(tree) is None]
    assert not missing, f"modules without __all__: {missing}"
    undefined = {name: missing for name, tree in _modules().items()
                 if (missing := sorted(set(_declared(tree) or []) - _top_level_names(tree)))}
    assert not undefined, f"__all__ names the module does not define: {undefined}"


def test_modules_import_only_what_other_modules_declare() -> None:
    modules = _modules()
    reached: list[str] = []
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module or not node.module.startswith("aethersearch"):
                continue
            source = modules.get(node.module)
            if source is None:
                continue
            offered = set(_declared(source) or [])
            for alias in node.names:
                if alias.name in offered or f"{node.module}.{alias.name}" in modules:
                    continue
                reached.append(f"{name}:{node.lineno} imports {alias.name} from {node.module}")
    assert not reached, "imports of names a module does not declare in __all__:\n" + "\n".join(reached)


def test_no_module_touches_another_modules_private_names() -> None:
    reached: list[str] = []
    for name, tree in _modules().items():
        own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
        own |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
        own |= {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and node.attr not in NAMEDTUPLE_API and node.attr not in own):
                reached.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert not reached, "private names of other modules:\n" + "\n".join(reached)


def test_the_public_surface_is_frozen() -> None:
    surface = {name: sorted(declared) for name, tree in _modules().items()
               if (declared := _declared(tree)) is not None}
    if os.environ.get("AETHER_UPDATE_SURFACE"):
        SURFACE.write_text(json.dumps(surface, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    frozen = json.loads(SURFACE.read_text(encoding="utf-8"))
    added = {m: sorted(set(v) - set(frozen.get(m, []))) for m, v in surface.items()}
    removed = {m: sorted(set(v) - set(surface.get(m, []))) for m, v in frozen.items()}
    added, removed = {m: v for m, v in added.items() if v}, {m: v for m, v in removed.items() if v}
    assert not added and not removed, (
        f"the public surface changed: added {added}, removed {removed}. If deliberate, rewrite "
        f"{SURFACE.name} with AETHER_UPDATE_SURFACE=1 pytest tests/test_public_face.py (and say so in the changelog)")
