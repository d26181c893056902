"""The package's shape: no import cycle, nothing imports upward, every module in a layer, each module-level
constant defined once, no private name imported from another module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import prb_utils

PACKAGE = Path(prb_utils.__file__).parent

# The flow, lowest first: a module may import only from its own layer or a lower one.
LAYERS = [
    {"prb_utils.errors", "prb_utils.schema", "prb_utils.resources", "prb_utils.distributed", "prb_utils.formatting",
     "prb_utils.bm25"},
    {"prb_utils.data"},
    {"prb_utils.profile", "prb_utils.probes", "prb_utils.parrot"},
    {"prb_utils.models", "prb_utils.retrieval"},
    {"prb_utils.store"},
    {"prb_utils.scoring", "prb_utils.plan"},
    {"prb_utils.analysis", "prb_utils.export", "prb_utils.submission"},
    {"prb_utils.downstream"},
    {"prb_utils.notebook", "prb_utils.board"},
    {"prb_utils.cli", "prb_utils.__main__", "prb_utils"},
]


def _module_name(path: Path) -> str:
    parts = ["prb_utils", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


def _layer(module: str) -> int:
    for depth in range(module.count(".") + 1, 0, -1):
        prefix = ".".join(module.split(".")[:depth])
        for index, layer in enumerate(LAYERS):
            if prefix in layer:
                return index
    raise AssertionError(f"{module} is in no layer of tests/test_layout.py")


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("prb_utils"):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names
                             if (PACKAGE / Path(*node.module.split(".")[1:], f"{a.name}.py")).is_file())
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("prb_utils."))
        graph[name] = found - {name}
    return graph


def test_nothing_imports_upward():
    upward = [
        f"{module} imports {target}"
        for module, targets in _imports().items()
        if module != "prb_utils"  # the public face re-exports from every layer (lazily)
        for target in targets
        if target != "prb_utils" and _layer(target) > _layer(module)
    ]
    assert upward == []


def test_no_import_cycle():
    graph = {m: {t for t in ts if t in _imports_cache()} for m, ts in _imports_cache().items()}
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state and module != "prb_utils":
            visit(module, [module])
    assert cycles == []


_CACHE: dict[str, set[str]] = {}


def _imports_cache() -> dict[str, set[str]]:
    if not _CACHE:
        _CACHE.update(_imports())
    return _CACHE


def test_one_hash_helper():
    calls = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if re.search(r"hashlib\.sha256\(", p.read_text(encoding="utf-8"))]
    assert calls == ["schema.py"]


# ------------------------------------------------------------------------------------ one home per name


def layer_of(module: str) -> int | None:
    """The layer of ``module``: its own entry or its package's; the bare package name is only its own."""
    parts = module.split(".")
    for depth in range(len(parts), 1 if module != "prb_utils" else 0, -1):
        prefix = ".".join(parts[:depth])
        for index, layer in enumerate(LAYERS):
            if prefix in layer:
                return index
    return None


def modules_in_no_layer(root: Path, package: str = "prb_utils") -> list[str]:
    return sorted(m for m in (_name_under(root, p, package) for p in root.rglob("*.py")) if layer_of(m) is None)


def _name_under(root: Path, path: Path, package: str) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


def repeated_constants(root: Path, package: str = "prb_utils") -> dict[str, list[str]]:
    """Module-level UPPER_CASE names bound in more than one module: a helper or constant with two homes."""
    where: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                    where.setdefault(target.id, []).append(_name_under(root, path, package))
    return {name: modules for name, modules in where.items() if len(modules) > 1}


def private_imports(root: Path, package: str = "prb_utils") -> list[str]:
    """``from <another prb module> import _name``: a private helper used where it is not at home."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _name_under(root, path, package)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package \
                    and node.module != module:
                found += [f"{module} imports {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not (a.name.startswith("__") and a.name.endswith("__"))]
    return found


def test_every_module_is_in_a_layer():
    assert modules_in_no_layer(PACKAGE) == []


def test_no_module_level_constant_has_two_homes():
    assert repeated_constants(PACKAGE) == {}


def test_no_private_name_is_imported_from_another_module():
    assert private_imports(PACKAGE) == []


def test_the_checks_catch_a_planted_copy_a_stray_module_and_a_private_import(tmp_path):
    package = tmp_path / "prb_utils"
    (package / "analysis").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "schema.py").write_text("OUTCOMES = ('correct',)\n\ndef _helper():\n    return 1\n")
    (package / "analysis" / "__init__.py").write_text("")
    (package / "analysis" / "copy.py").write_text("from prb_utils.schema import _helper\n\nOUTCOMES = ('x',)\n")
    (package / "stray.py").write_text("X = 1\n")
    assert repeated_constants(package) == {"OUTCOMES": ["prb_utils.analysis.copy", "prb_utils.schema"]}
    assert private_imports(package) == ["prb_utils.analysis.copy imports prb_utils.schema._helper"]
    assert modules_in_no_layer(package) == ["prb_utils.stray"]


# ------------------------------------------------------------------------------------ function length

#: The longest a function of the library may be, in lines (decorators excluded, docstring included).
MAX_FUNCTION_LINES = 100


def long_functions(root: Path, package: str = "prb_utils", limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``module.function (N lines)`` for every function or method under ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{_name_under(root, path, package)}.{node.name} ({lines} lines)")
    return found


def test_long_functions_are_found(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def short():\n    return 1\n\n\nclass C:\n    def long(self):\n{body}\n")
    assert long_functions(tmp_path) == [f"prb_utils.long.long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_no_function_over_100_lines():
    """A function longer than a screenful is split into named steps."""
    assert long_functions(PACKAGE) == []
