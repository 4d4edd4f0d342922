"""The package's shape: layers that import only downwards, no private names across modules, short functions.

kvviz/ is layered: base (value checks, units, messages, the hub) < calc (the memory model and the
calculator's arithmetic) < engine (loading, the generation loop, metrics, hosting policy) < ui (the web
app) < bench (benchmarks, which drive everything). The command-line modules at the top may import any
layer. These tests read the source with ast, so they see every import, lazy ones inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import REPO

LAYERS = ["base", "calc", "engine", "serving", "ui", "bench"]
PACKAGE = REPO / "kvviz"
MAX_FUNCTION_LINES = 60
# Gradio tab builders lay out a tab's components and wire their events in one place: they run long by nature.
LONG_ALLOWED = {f"kvviz/ui/tabs/{tab}.py" for tab in ("calculator", "generation", "compare", "lifecycle", "history",
                                                             "serving", "batch", "lesson")}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _layer(module: str) -> int | None:
    """The layer index of a dotted kvviz module name; None for the top-level modules (cli, train_tiny, ...)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 2 and parts[1] in LAYERS else None


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
def test_every_layer_is_a_folder_with_modules(layer):
    """The layout README describes exists: each layer is a package holding modules."""
    folder = PACKAGE / layer
    assert (folder / "__init__.py").is_file(), f"kvviz/{layer} is not a package"
    assert len([p for p in folder.glob("*.py") if p.name != "__init__.py"]) >= 1
