"""No import circle among the project's modules, runtime or type-only.

A circle of imports means no module of it can be read, tested or changed on its own: each needs
the others first. Python tolerates many of them at runtime (an import inside a function, an
``if TYPE_CHECKING:`` block), which is why they grow unnoticed; this test reads the source
instead of importing it, so it sees every ``import`` and ``from ... import`` statement wherever it
stands — module level, inside a function, under ``TYPE_CHECKING`` — absolute or relative.

An edge goes from a module to the project module it names: ``from a.b import c`` names ``a.b.c``
when that is a module, else ``a.b`` (the package's ``__init__``). The parent packages Python runs
on the way (``a``, ``a.b`` for ``import a.b.c``) are not edges: a package whose ``__init__``
gathers its submodules is its interface, not a circle — but a submodule that imports a name
*from* its package's ``__init__`` while that ``__init__`` imports it is one, and is caught.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The packages checked, one test each; a circle through several of them fails each one's test.
PACKAGES = ("sidecar", "spark_consumer", "bench", "timesync_wire")
#: Project packages an edge may lead into (the graph spans them all).
PROJECT = (*PACKAGES, "testkit")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PROJECT
        for path in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def imported_modules(path: Path, name: str, modules: Mapping[str, Path]) -> set[str]:
    """The project modules the import statements of ``path`` (module ``name``) name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:  # relative: up level - 1 packages from this module's package
                parts = package.split(".")
                source = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [node.module])])
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else source)
    return {target for target in found if target in modules and target != name}


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    return {name: imported_modules(path, name, modules) for name, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def one_circle(graph: Mapping[str, set[str]], component: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, to name in a failure."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{component} is not a circle")  # pragma: no cover - Tarjan's guarantee


def described(graph: Mapping[str, set[str]], component: list[str]) -> str:
    """``a → b → a``, and every module of the circle when there are more."""
    path = " → ".join(one_circle(graph, component))
    return path if len(component) == 2 else f"{path}  (a circle of {len(component)}: {', '.join(component)})"


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(project_modules())


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package: str, graph: dict[str, set[str]]) -> None:
    circles = [
        described(graph, component)
        for component in cycles(graph)
        if any(m == package or m.startswith(f"{package}.") for m in component)
    ]
    assert not circles, f"import circles through {package}:\n" + "\n".join(circles)


def test_the_wire_layer_imports_neither_half_nor_an_event_loop() -> None:
    """``timesync_wire`` lies below the sidecar and the Spark jobs (issue 33): it names neither,
    nor what would tie it to one transport (asyncio, aiohttp) or to Spark."""
    forbidden = {"sidecar", "spark_consumer", "asyncio", "aiohttp", "pyspark"}
    found = {}
    for path in sorted((ROOT / "timesync_wire").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names.append(node.module or "")
            for name in names:
                if name.split(".")[0] in forbidden:
                    found[f"{path.relative_to(ROOT)}:{node.lineno}"] = name
    assert not found, f"timesync_wire must not import these: {found}"


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    """The reader sees what Python would run: absolute and relative, ``TYPE_CHECKING`` and inside
    functions, ``from pkg import submodule`` as the submodule, a name as its package."""
    package = tmp_path / "pkg"
    package.mkdir()
    files = {
        "__init__.py": "from pkg.a import A\n",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nA = 1\n",
        "b.py": "def f():\n    from pkg import c\n    import pkg.d\nB = 2\n",
        "c.py": "from . import A\n",
        "d.py": "",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    modules = {"pkg": package / "__init__.py"}
    modules.update({f"pkg.{name[:-3]}": package / name for name in files if name != "__init__.py"})
    found = {name: imported_modules(path, name, modules) for name, path in modules.items()}
    assert found == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.c", "pkg.d"},
        "pkg.c": {"pkg"},
        "pkg.d": set(),
    }
    assert [described(found, c) for c in cycles(found)] == [
        "pkg → pkg.a → pkg.b → pkg.c → pkg  (a circle of 4: pkg, pkg.a, pkg.b, pkg.c)"
    ]
