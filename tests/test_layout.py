"""The package's shape: layers that import only downwards, no private names across modules, short functions.

kvviz/ is layered: i18n (the catalogues of both languages, and the keyed text errors carry) < base (value
checks, units, errors with their keys, the hub) < calc (the memory model and the calculator's arithmetic) <
engine (loading, the generation loop, metrics, hosting policy) < serving (measuring a serving engine from
outside) < sim (predicting one: the simulated scheduler, its figures by serving's statistics) < lesson (the
lesson's answers) < ui (the web app) < bench (benchmarks, which drive everything). Every package and module
directly under kvviz/ is a layer or one of the entry points at the top (the command lines), which may import any
layer and which no layer imports. No module imports itself back through others (no import cycle). These tests
read the source with ast, so they see every import, lazy ones inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import REPO

# Lowest first: a layer imports only the layers before it. A layer is a package under kvviz/ or, for lesson, one
# module directly under it.
LAYERS = ["i18n", "base", "calc", "engine", "serving", "sim", "lesson", "ui", "bench"]
ENTRY_POINTS = ["__init__", "__main__", "cli", "train_tiny"]  # kvviz's own package file and its command lines
PACKAGE = REPO / "kvviz"
MAX_FUNCTION_LINES = 60
# Gradio tab builders lay out a tab's components and wire their events in one place: they run long by nature.
LONG_ALLOWED = {f"kvviz/ui/{feature}/{tab}.py" for feature, tab in (
    ("calculator", "tab"), ("generation", "tab"), ("generation", "lifecycle_tab"), ("generation", "history_tab"),
    ("compare", "tab"), ("serving", "tab"), ("plan", "tab"), ("batch", "tab"), ("lesson", "tab"))}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _layer(module: str) -> int | None:
    """The layer index of a dotted kvviz module name; None for the entry points (cli, train_tiny, ...)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def _kvviz_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every `from kvviz... import` and `import kvviz...` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kvviz":
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "kvviz"]
    return found


def test_layers_import_only_downwards():
    """No module imports a layer above its own (base < calc < engine < ui < bench)."""
    wrong = []
    for path in _modules():
        own = _layer(_dotted(path))
        if own is None:
            continue
        for line, module, names in _kvviz_imports(path):
            targets = [module] if module != "kvviz" else [f"kvviz.{n}" for n in names]
            for target in targets:
                other = _layer(target)
                if other is not None and other > own:
                    wrong.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not wrong, "a lower layer imports a higher one:\n" + "\n".join(wrong)


def test_no_module_imports_another_modules_private_name():
    """`from kvviz.x import _name` reaches into another module's internals: make it public or move it."""
    private = [f"{path.relative_to(REPO)}:{line} imports {module}.{name}"
               for path in [*_modules(), *sorted((REPO / "tests").rglob("*.py")), REPO / "app.py"]
               for line, module, names in _kvviz_imports(path) for name in names
               if name.startswith("_")]
    assert not private, "\n".join(private)


def test_functions_are_short_outside_the_tab_builders():
    """Every function in kvviz/ fits in MAX_FUNCTION_LINES lines, but the Gradio tab builders."""
    long = []
    for path in _modules():
        rel = str(path.relative_to(REPO))
        if rel in LONG_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{rel}:{node.lineno} {node.name} has {lines} lines")
    assert not long, "\n".join(long)


@pytest.mark.parametrize("layer", LAYERS)
def test_every_layer_exists(layer):
    """The layout README describes exists: each layer is a package holding modules, or one module."""
    folder = PACKAGE / layer
    if (PACKAGE / f"{layer}.py").is_file():
        assert not folder.exists(), f"kvviz/{layer} is both a module and a folder"
        return
    assert (folder / "__init__.py").is_file(), f"kvviz/{layer} is not a package"
    assert len([p for p in folder.glob("*.py") if p.name != "__init__.py"]) >= 1


def test_every_package_and_module_under_kvviz_has_a_place():
    """Each package and module directly under kvviz/ is a layer or an entry point, so the layer rule covers it."""
    placed = set(LAYERS) | set(ENTRY_POINTS)
    children = [p for p in PACKAGE.iterdir() if p.suffix == ".py" or (p.is_dir() and any(p.rglob("*.py")))]
    unplaced = sorted(p.relative_to(REPO).as_posix() for p in children if p.stem not in placed)
    assert not unplaced, f"not in test_layout's LAYERS or ENTRY_POINTS (put each where it belongs): {unplaced}"
    namespace = sorted(p.relative_to(REPO).as_posix() for p in children if p.is_dir()
                       and not (p / "__init__.py").is_file())
    assert not namespace, f"folders of modules without an __init__.py: {namespace}"


def test_no_layer_imports_an_entry_point():
    """The command lines sit on top of everything: a layer that imported one would reach every layer through it."""
    entry = {f"kvviz.{name}" for name in ENTRY_POINTS if name != "__init__"}
    wrong = [f"{path.relative_to(REPO)}:{line} imports {target}"
             for path in _modules() if _layer(_dotted(path)) is not None
             for line, module, names in _kvviz_imports(path)
             for target in ([module] if module != "kvviz" else [f"kvviz.{n}" for n in names]) if target in entry]
    assert not wrong, "\n".join(wrong)


def _module_names() -> set[str]:
    """Every kvviz module's dotted name; a package is named by its folder (kvviz.calc, not kvviz.calc.__init__)."""
    return {_dotted(path).removesuffix(".__init__") for path in _modules()}


def _import_graph() -> dict[str, set[str]]:
    """Each kvviz module to the kvviz modules it imports: `from a.b import c` imports module a.b.c when that is a
    module, else a.b (the package, for a name its __init__ defines)."""
    known = _module_names()
    graph: dict[str, set[str]] = {}
    for path in _modules():
        edges = set()
        for _, module, names in _kvviz_imports(path):
            edges |= {f"{module}.{n}" if f"{module}.{n}" in known else module for n in names} or {module}
        graph[_dotted(path).removesuffix(".__init__")] = edges & known
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    """The finder itself: a → b → c → a is one cycle, d → a is none, and a self-contained pair is found apart."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e", "f"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_inside_kvviz():
    """No two kvviz modules import each other, directly or through others, lazy imports inside functions included:
    a cycle means neither module can be read, tested or moved without the other."""
    graph = _import_graph()
    assert len(graph) >= 100 and sum(map(len, graph.values())) >= 200, "the graph must hold kvviz's real imports"
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
