"""The package's layers: imports point down only, and no module imports itself in a cycle.

Every ``import`` inside ``src/sftrace`` counts, at module level, inside functions and
under ``TYPE_CHECKING`` alike: a function-level import that hides a cycle is still one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sftrace

PACKAGE_ROOT = Path(sftrace.__file__).parent

# Lowest first. A module may import modules of its own layer and of the layers below.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("sftrace._errors", "sftrace._version", "sftrace._internal"),
    ("sftrace._model",),
    ("sftrace._bundle",),
    ("sftrace._export",),
    ("sftrace._record",),
    ("sftrace._replay",),
    ("sftrace._regress",),
    ("sftrace._view",),
    ("sftrace.integrations",),
    ("sftrace._cli",),
    ("sftrace.testing", "sftrace.pytest_plugin", "sftrace.__main__", "sftrace"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _layer(module: str) -> int:
    best = -1
    best_len = -1
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = rank, len(prefix)
    if best < 0:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    is_package = MODULES[importer].name == "__init__.py"
    base = importer.split(".")
    if not is_package:
        base.pop()
    for _ in range(node.level - 1):
        base.pop()
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> set[str]:
    """The sftrace modules ``module`` imports anywhere in its source."""
    found: set[str] = set()
    tree = ast.parse(MODULES[module].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            names = []
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                names.append(candidate if candidate in MODULES else target)
        else:
            continue
        for name in names:
            if name == "sftrace" or name.startswith("sftrace."):
                while name not in MODULES and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name != module:
                    found.add(name)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    """A module imports nothing from a layer above its own."""
    upward = sorted(dep for dep in GRAPH[module] if _layer(dep) > _layer(module))
    assert not upward, f"{module} (layer {_layer(module)}) imports upward: {upward}"


def test_no_import_cycles() -> None:
    """No chain of imports, at any level of the source, leads back to where it started."""
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(GRAPH[module]):
            # a package's __init__ importing its own submodules is not a cycle
            if dep.startswith(module + "."):
                continue
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_private_names_across_modules() -> None:
    """No module imports another module's private (underscored) names."""
    offenders: list[str] = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _resolve(module, node)
            if not target.startswith("sftrace"):
                continue
            for alias in node.names:
                name = alias.name
                if f"{target}.{name}" in MODULES:
                    continue  # a private module, imported as a module
                if name.startswith("_") and not name.startswith("__"):
                    offenders.append(f"{module}: from {target} import {name}")
    assert not offenders, "\n".join(offenders)


def test_every_module_is_in_a_layer() -> None:
    """A new subpackage must say where it sits before it can be imported."""
    for module in MODULES:
        _layer(module)
