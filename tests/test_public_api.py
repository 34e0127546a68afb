"""The public surface: sorted, complete, consistent, and light to import.

As in httpx's ``test_exported_members``: ``__all__`` is the sorted list of the public
names, and every place that declares a public name (``__all__``, the lazy table, the
``TYPE_CHECKING`` imports that type checkers read, the module's attributes) agrees.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

import sftrace

SUBMODULES = [
    "sftrace.testing",
    "sftrace.integrations",
    "sftrace.integrations.openai",
    "sftrace.integrations.anthropic",
    "sftrace.integrations.langchain",
]


def type_checking_imports(module: types.ModuleType) -> dict[str, str]:
    """Name -> module (relative to ``sftrace.``) of the ``if TYPE_CHECKING:`` imports."""
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in ast.walk(node):
                if isinstance(statement, ast.ImportFrom) and statement.module is not None:
                    for alias in statement.names:
                        imported[alias.asname or alias.name] = statement.module.removeprefix(
                            "sftrace."
                        )
    return imported


def public_definitions(module: types.ModuleType) -> list[str]:
    """Top-level functions and classes a module defines without a leading underscore."""
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return sorted(
        node.name for node in tree.body if isinstance(node, kinds) and not node.name.startswith("_")
    )


def test_all_is_sorted_and_declared_in_the_lazy_table() -> None:
    """__all__ is sorted and names exactly the lazy table's names and __version__."""
    assert sftrace.__all__ == sorted(sftrace.__all__)
    assert len(set(sftrace.__all__)) == len(sftrace.__all__)
    assert set(sftrace.__all__) == {*sftrace._LAZY, "__version__"}


def test_type_checkers_see_the_names_from_the_modules_runtime_loads() -> None:
    """The TYPE_CHECKING imports name the same public names and modules as the lazy table."""
    assert type_checking_imports(sftrace) == sftrace._LAZY


def test_every_lazy_name_loads_the_object_of_its_module() -> None:
    """``sftrace.X`` is the very object its private module defines (checked in a fresh
    interpreter: in-process pytester runs drop and re-import sftrace's modules)."""
    code = (
        "import importlib, sftrace\n"
        "bad = [n for n, m in sftrace._LAZY.items()\n"
        "       if getattr(sftrace, n)\n"
        "       is not getattr(importlib.import_module('sftrace.' + m), n)]\n"
        "print(bad)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_module_attributes_and_dir_are_exactly_the_public_names() -> None:
    """Once every name is loaded, the module holds no other public attribute, and dir()
    lists exactly __all__ (plus dunders): a name missing from __all__ shows up here."""
    for name in sftrace.__all__:
        getattr(sftrace, name)
    loaded = {
        name
        for name, value in vars(sftrace).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert loaded == set(sftrace.__all__) - {"__version__"}
    listed = [name for name in dir(sftrace) if not name.startswith("__")]
    assert listed == sorted(loaded)
    assert "__version__" in dir(sftrace)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        sftrace.not_a_name  # noqa: B018


@pytest.mark.parametrize("module_name", SUBMODULES)
def test_public_modules_export_exactly_what_they_define(module_name: str) -> None:
    """sftrace.testing and every integration: a sorted __all__ naming exactly the public
    functions and classes the module defines (imported helpers stay unexported)."""
    module = importlib.import_module(module_name)
    exported = module.__all__
    assert exported == sorted(exported)
    assert exported == public_definitions(module)
    for name in exported:
        assert getattr(module, name).__module__ == module_name


def test_every_public_error_derives_from_sftrace_error() -> None:
    """Users can catch any error of the library with SftraceError."""
    errors = [
        getattr(sftrace, name)
        for name in sftrace.__all__
        if name.endswith("Error") and isinstance(getattr(sftrace, name), type)
    ]
    assert len(errors) >= 9
    assert all(issubclass(error, sftrace.SftraceError) for error in errors)


def test_import_is_light() -> None:
    """Importing sftrace loads neither the CLI toolkit nor any LLM SDK (nor RE2, loaded
    by the first redaction)."""
    code = (
        "import sys, sftrace\n"
        "heavy = {'click', 'rich', 'openai', 'anthropic', 'langchain_core', 'httpx', 'grpc',"
        " 're2'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_fork_and_afork_are_public_twins() -> None:
    """sftrace.fork / sftrace.afork (and ForkPointError, a ConfigError) are public, and
    the async twin takes exactly the sync one's parameters."""
    import inspect

    assert {"fork", "afork", "ForkPointError"} <= set(sftrace.__all__)
    assert issubclass(sftrace.ForkPointError, sftrace.ConfigError)
    assert inspect.iscoroutinefunction(sftrace.afork)
    sync, twin = inspect.signature(sftrace.fork), inspect.signature(sftrace.afork)
    assert list(sync.parameters) == list(twin.parameters)
    assert [p.default for p in sync.parameters.values()] == [
        p.default for p in twin.parameters.values()
    ]


def test_minimize_and_aminimize_are_public_twins() -> None:
    """sftrace.minimize / sftrace.aminimize and their result types are public, and the
    async twin takes exactly the sync one's parameters."""
    import inspect

    assert {"minimize", "aminimize", "MinimizeResult", "MinimizeProgress"} <= set(sftrace.__all__)
    assert inspect.iscoroutinefunction(sftrace.aminimize)
    sync, twin = inspect.signature(sftrace.minimize), inspect.signature(sftrace.aminimize)
    assert list(sync.parameters) == list(twin.parameters)
    assert [p.default for p in sync.parameters.values()] == [
        p.default for p in twin.parameters.values()
    ]


@pytest.mark.parametrize(
    ("module_name", "checker", "twins"),
    [
        ("sftrace._replay.fork", "_prepare", ("fork", "afork")),
        ("sftrace._regress.minimize", "_steps", ("minimize", "aminimize")),
    ],
)
def test_every_parameter_of_the_twins_reaches_their_checks(
    module_name: str, checker: str, twins: tuple[str, str]
) -> None:
    """fork/afork and minimize/aminimize pass each parameter by name to the function that
    checks them, which takes exactly their parameters (no defaults of its own to drift):
    mypy checks every name, and a parameter added to the twins cannot go unchecked."""
    import inspect

    checked = inspect.signature(getattr(importlib.import_module(module_name), checker))
    for twin in twins:
        given = inspect.signature(getattr(sftrace, twin)).parameters
        assert [(p.name, p.kind) for p in given.values()] == [
            (p.name, p.kind) for p in checked.parameters.values()
        ]
    assert all(p.default is inspect.Parameter.empty for p in checked.parameters.values())
