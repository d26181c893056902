"""The package's shape: no import cycle, nothing imports upward, each shared constant defined once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import prb_utils

PACKAGE = Path(prb_utils.__file__).parent

# The flow, lowest first: a module may import only from its own layer or a lower one.
LAYERS = [
    {"prb_utils.errors", "prb_utils.schema", "prb_utils.resources"},
    {"prb_utils.data"},
    {"prb_utils.profile"},
    {"prb_utils.models"},
    {"prb_utils.store"},
    {"prb_utils.scoring"},
    {"prb_utils.analysis"},
    {"prb_utils.downstream"},
    {"prb_utils.notebook"},
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


def test_shared_constants_are_defined_once():
    names = ("RESULT_COLUMNS", "OUTCOMES", "KINDS", "BASELINES", "FILTERS", "DEFAULT_ZOO", "STOPWORDS")
    where: dict[str, list[str]] = {n: [] for n in names}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id in where:
                    where[target.id].append(_module_name(path))
    assert {n: len(m) for n, m in where.items() if len(m) > 1} == {}


def test_one_hash_helper():
    calls = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if re.search(r"hashlib\.sha256\(", p.read_text(encoding="utf-8"))]
    assert calls == ["schema.py"]
