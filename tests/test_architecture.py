"""The house's import rules hold: the contracts of `make lint` (layers, a pure engine and pure Spark jobs, each
feature's public surface, no circle among siblings) run here too, and no module of the product imports itself
back through any chain of imports."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import grimp

from replication_admin.engine import dialects

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def test_no_module_of_the_product_imports_itself_back():
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("replication_admin", "jobs", cache_dir=None)
    # A package's __init__ is imported with each of its modules; only module-to-module chains are circles.
    for package in [m for m in graph.modules if graph.find_children(m)]:
        for child in graph.find_children(package):
            if graph.direct_import_exists(importer=child, imported=package):
                graph.remove_import(importer=child, imported=package)
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    assert _circles(graph) == [["a", "b", "c"]]


# Modules that name dialects for reasons of their own, not to know a server: the console's own catalog database
# (REPLADMIN_DB_ENGINE picks SQLite or PostgreSQL for Django) and the demo, which registers its servers by name.
NAMES_DIALECTS_FOR_ITSELF = {
    "replication_admin/settings.py",
    "replication_admin/management/commands/demo_setup.py",
}


def _string_literals(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_a_dialect_is_its_module_and_one_registry_entry():
    """Everything about a server is its Dialect (engine/dialects/<name>.py) and the registry lists it once:
    no other module of the product, Spark job or template holds a dialect's name, so adding a dialect is one
    file and one line of engine/dialects/__init__.py (and its tests)."""
    home = ROOT / "replication_admin" / "engine" / "dialects"
    code = sorted(
        p
        for p in [*(ROOT / "replication_admin").rglob("*.py"), *(ROOT / "jobs").rglob("*.py")]
        if "migrations" not in p.parts and str(p.relative_to(ROOT)) not in NAMES_DIALECTS_FOR_ITSELF
    )
    templates = sorted((ROOT / "templates").rglob("*.html"))
    found = []
    for name, d in dialects.DIALECTS.items():
        module = Path(sys.modules[type(d).__module__].__file__ or "")
        assert module.parent == home, f"{name} is defined in {module}, not in engine/dialects"
        holders = [p for p in code if p != module and name in _string_literals(p)]
        holders += [p for p in templates if re.search(rf"""["']{re.escape(name)}["']""", p.read_text())]
        found += [f"{p.relative_to(ROOT)} names the dialect {name!r}" for p in holders]
    assert not found, "\n".join(found)
    registry = (home / "__init__.py").read_text()
    for d in dialects.DIALECTS.values():
        assert len(re.findall(rf"^\s+{type(d).__name__}\(\),$", registry, re.MULTILINE)) == 1, type(d).__name__
