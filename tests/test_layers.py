"""The house's one-way imports: each package imports only packages below it, and no module
imports itself back through others (a circle, even within one package, at run time)."""

import ast
from collections import defaultdict
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).parent.parent / "optiq"

#: Lower number = lower in the house; a package may import only packages of a lower rank
#: (and the foundation modules of rank 0).
RANK = {
    "errors": 0, "utils": 0, "mpi": 0,
    "topology": 1, "workloads": 2, "paths": 3, "lp": 4, "heuristics": 4, "collectives": 4, "plan": 5, "planner": 6,
    "sim": 7, "metrics": 8, "runtime": 8, "experiments": 8, "testbed": 9, "integrations": 9, "cli": 10, "models": 10, "__main__": 11,
}


def package_imports() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for f in ROOT.rglob("*.py"):
        rel = f.relative_to(ROOT.parent).with_suffix("").parts
        if rel[-1] == "__init__":
            rel = rel[:-1]
        if len(rel) < 2 or rel[-1] == "__main__" and len(rel) > 2:
            continue  # optiq/__init__.py gathers the public API; python -m entry points sit on top
        unit, pkg = rel[1], list(rel if f.name == "__init__.py" else rel[:-1])
        for node in ast.walk(ast.parse(f.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = pkg[:len(pkg) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                parts = t.split(".")
                if parts[0] == "optiq" and len(parts) > 1 and parts[1] != unit and parts[1] != "__version__":
                    edges[unit].add(parts[1])
    return edges


def test_every_package_has_a_place_in_the_house():
    units = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert units <= set(RANK), f"place {sorted(units - set(RANK))} in RANK"


def test_no_import_runs_back_up_the_house():
    upward = sorted(f"{a} -> {b}" for a, targets in package_imports().items() for b in targets
                    if RANK[b] >= RANK[a] and not (RANK[a] == RANK[b] == 0))
    assert not upward, upward


def _runtime_imports(tree: ast.AST):
    """Every import a module runs (in functions too), leaving out ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            else:
                stack.append(child)


def module_imports() -> nx.DiGraph:
    """optiq's modules (a package is its ``__init__``) and, for each, the modules it imports at run time."""
    graph = nx.DiGraph()
    for f in ROOT.rglob("*.py"):
        parts = list(f.relative_to(ROOT.parent).with_suffix("").parts)
        module, package = (parts[:-1] if parts[-1] == "__init__" else parts), parts[:-1]
        graph.add_node(".".join(module))
        for node in _runtime_imports(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = base + (node.module.split(".") if node.module else [])
                named = [target + [a.name] for a in node.names]
                targets = [n if _is_module(n) else target for n in named]
            else:
                targets = [a.name.split(".") for a in node.names]
            graph.add_edges_from((".".join(module), ".".join(t)) for t in targets if t[0] == "optiq")
    return graph


def _is_module(parts: list[str]) -> bool:
    path = ROOT.parent.joinpath(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_no_module_imports_itself_back():
    graph = module_imports()
    assert graph.has_edge("optiq.paths.chains", "optiq.paths.pathset")  # the graph sees relative imports
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, f"import circles (which module comes first?): {circles}"


def test_the_circle_test_sees_a_circle():
    """A run-time import back from tables to compute is a circle; one for type checking only is not."""
    graph = module_imports()
    graph.add_edge("optiq.metrics.tables", "optiq.metrics.compute")
    assert any(len(c) > 1 for c in nx.strongly_connected_components(graph))
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\ndef f():\n    from .b import y\n"
    assert [n.module for n in _runtime_imports(ast.parse(source))] == ["typing", "b"]


def test_importing_optiq_and_the_executor_loads_neither_scipy_nor_numba():
    # every MPI rank of a replay imports the executor: scipy (about half its import time) and
    # numba are loaded by the work that needs them, not by the import
    import subprocess
    import sys

    code = ("import sys, optiq, optiq.runtime.__main__; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'numba', 'pyomo'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
