"""The package's import graph, read from the source with `ast`: imports at the top of a module and inside functions
count, imports under `if TYPE_CHECKING:` do not (they never run).

The stages sit in layers: the IR (uop/, dtype.py, helpers.py) at the bottom; the Tensor front end builds one graph
whatever the device; the scheduler cuts it into kernels without knowing how a device renders or runs them; codegen
lowers a kernel for a renderer, which prints it, and the runtime runs it; the engine drives them all. An import
against these layers, or a cycle through codegen and the runtime, fails here with the file and line that makes it.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "zeptograd"

Graph = dict[str, dict[str, int]]  # module -> {imported module: line of the first such import}

FRONT_END = ("zeptograd.tensor", "zeptograd.mixin", "zeptograd.gradient", "zeptograd.nn")
IR = ("zeptograd.uop", "zeptograd.dtype", "zeptograd.helpers")
# (importers, what they may not import, why)
LAYERS = [
    (FRONT_END, ("zeptograd.runtime", "zeptograd.renderer", "zeptograd.codegen"), "the front end is device-blind"),
    (("zeptograd.codegen",), ("zeptograd.runtime", "zeptograd.engine"), "codegen compiles, it does not run"),
    (("zeptograd.renderer",), ("zeptograd.runtime", "zeptograd.engine"), "a renderer prints, it does not run"),
    (
        ("zeptograd.schedule",),
        ("zeptograd.renderer", "zeptograd.runtime", "zeptograd.engine"),
        "the engine hands the scheduler its devices' facts",
    ),
    (
        IR,
        tuple(f"zeptograd.{part}" for part in ("codegen", "renderer", "runtime", "engine", "schedule", "tensor")),
        "the IR is the bottom layer",
    ),
]


def _module_names(package: Path) -> dict[str, Path]:
    """Every module of `package` by its dotted name (a package by its own name, not `.__init__`)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of `tree` that can run: everywhere but the body of an `if TYPE_CHECKING:`."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def import_graph(package: Path = PACKAGE) -> Graph:
    """Which modules of `package` each of its modules imports, at the top or in a function."""
    modules = _module_names(package)
    graph: Graph = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: dict[str, int] = {}
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            else:
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                # `from a import b`: the module a.b where there is one, else a
                found = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
            for target in found:
                while target and target not in modules:  # `import a.b.f` where f is no module: a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    targets.setdefault(target, node.lineno)
        graph[name] = targets
    return graph


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def layer_violations(graph: Graph, package: Path = PACKAGE) -> list[str]:
    """Each import that goes against LAYERS, as `file:line imports module (why)`."""
    modules = _module_names(package)
    found = []
    for importers, forbidden, why in LAYERS:
        for name, targets in graph.items():
            if _within(name, importers):
                rel = modules[name].relative_to(package.parent).as_posix()
                found += [f"{rel}:{line} imports {t} ({why})" for t, line in targets.items() if _within(t, forbidden)]
    return sorted(found)


def strongly_connected(graph: Graph) -> list[set[str]]:
    """The strongly connected components of `graph` with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def _path(graph: Graph, start: str, goal: str, within: set[str]) -> list[str]:
    """A shortest import chain from `start` to `goal` through modules of `within` (breadth first)."""
    came: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for nxt in graph[node]:
            if nxt in within and nxt not in came:
                came[nxt] = node
                queue.append(nxt)
    chain = [goal]
    while (prev := came[chain[-1]]) is not None:
        chain.append(prev)
    return chain[::-1]


def cycles_through(graph: Graph, first: str, second: str) -> list[str]:
    """Each import cycle that passes through a module of package `first` and one of package `second`, as a chain
    `a -> b -> ... -> a`."""
    found = []
    for component in strongly_connected(graph):
        firsts = sorted(m for m in component if _within(m, (first,)))
        seconds = sorted(m for m in component if _within(m, (second,)))
        if firsts and seconds:
            chain = _path(graph, firsts[0], seconds[0], component) + _path(graph, seconds[0], firsts[0], component)[1:]
            found.append(" -> ".join(chain))
    return found


def test_no_import_cycle_through_codegen_and_the_runtime() -> None:
    """The runtime compiles with codegen; codegen never comes back to the runtime, not even through other modules."""
    cycles = cycles_through(import_graph(), "zeptograd.codegen", "zeptograd.runtime")
    assert not cycles, "\n".join(cycles)


def test_each_stage_imports_only_the_layers_below_it() -> None:
    violations = layer_violations(import_graph())
    assert not violations, "\n".join(violations)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A small package `zeptograd` laid out as the real one, with a cycle and layer breaks planted in it."""
    files = {
        "__init__.py": "",
        "tensor.py": "def f():\n    from zeptograd.codegen import compile_it\n",
        "codegen/__init__.py": "from .search import beam\ncompile_it = 1\n",
        "codegen/search.py": "def beam():\n    import zeptograd.runtime.device\n",
        "runtime/__init__.py": "",
        "runtime/device.py": "from zeptograd import codegen\n",
        "schedule/__init__.py": "",
        "schedule/layout.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zeptograd.renderer import Renderer\n"
            "else:\n    from zeptograd.renderer import cstyle\n"
        ),
        "renderer/__init__.py": "",
        "renderer/cstyle.py": "",
    }
    for name, text in files.items():
        path = tmp_path / "zeptograd" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "zeptograd"


def test_the_checks_see_function_level_relative_and_runtime_imports(planted: Path) -> None:
    """The graph reads the planted imports (a function's, a relative one, the `else` of TYPE_CHECKING) and no others,
    and the checks report exactly the planted cycle and breaks."""
    graph = import_graph(planted)
    assert graph["zeptograd.codegen"] == {"zeptograd.codegen.search": 1}
    assert graph["zeptograd.codegen.search"] == {"zeptograd.runtime.device": 2}
    assert graph["zeptograd.schedule.layout"] == {"zeptograd.renderer.cstyle": 5}
    assert cycles_through(graph, "zeptograd.codegen", "zeptograd.runtime") == [
        "zeptograd.codegen -> zeptograd.codegen.search -> zeptograd.runtime.device -> zeptograd.codegen"
    ]
    assert layer_violations(graph, planted) == [
        "zeptograd/codegen/search.py:2 imports zeptograd.runtime.device (codegen compiles, it does not run)",
        "zeptograd/schedule/layout.py:5 imports zeptograd.renderer.cstyle "
        "(the engine hands the scheduler its devices' facts)",
        "zeptograd/tensor.py:2 imports zeptograd.codegen (the front end is device-blind)",
    ]
