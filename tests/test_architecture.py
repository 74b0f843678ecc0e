"""The layers as checked rules (docs/architecture.md, "The layers"): the import contracts hold and
catch a violation, the file-level import graph has no circle, the SDK and the components do not
bring Ray with them, and the engine and the repositories type-check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("flowactors", "repositories", "nifiapi")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold():
    checked = lint_imports(ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 broken" in checked.stdout


def test_an_import_against_the_layers_is_caught(tmp_path):
    """A copy of the tree with one deliberate violation: the SDK importing the engine."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    units = tmp_path / "flowactors" / "sdk" / "units.py"
    units.write_text(units.read_text() + "\nfrom flowactors.engine import controller  # the violation\n")
    checked = lint_imports(tmp_path)
    assert checked.returncode != 0
    assert "BROKEN" in checked.stdout and "flowactors.sdk.units -> flowactors.engine.controller" in checked.stdout


def test_the_engine_and_the_repositories_type_check():
    """mypy at pyproject.toml's strictness (``[tool.mypy]``) finds no error in either package."""
    checked = subprocess.run([sys.executable, "-m", "mypy", "flowactors/engine", "repositories"], cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0 and "Success" in checked.stdout, checked.stdout + checked.stderr


def import_circles() -> list[list[str]]:
    """Every set of modules that import one another round a circle (a strongly connected component
    of the module graph: a package's ``__init__`` is a module; imports under TYPE_CHECKING, which
    never run, are left out, as the contracts leave them out)."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(edges):   # Tarjan's algorithm, iteratively
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(edges[target])))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_module_imports_itself_round_a_circle():
    assert import_circles() == []


def test_the_circle_finder_finds_a_circle(tmp_path, monkeypatch):
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text("def f():\n    from circled import a  # inside a function: still a circle\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("circled",))
    assert import_circles() == [["circled.a", "circled.b"]]


def test_the_sdk_the_components_and_the_command_import_no_ray():
    """Ray comes with the engines: the SDK, the processors and the flowactors command (which
    imports the engines only for the commands that run a flow) do not bring it."""
    code = ("import flowactors.processors, flowactors.sdk.flow, flowactors.sdk.session, flowactors.cli.main, sys; "
            "assert 'ray' not in sys.modules, 'ray was imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


#: the limits docs/architecture.md states: a module a concept fits in this many lines, a function
#: in this many (no exceptions today; one would be listed here with its reason)
MODULE_LINES, FUNCTION_LINES = 800, 80


def test_every_module_and_function_is_within_its_limit():
    import ast

    too_long = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            where = path.relative_to(ROOT)
            if text.count("\n") >= MODULE_LINES:
                too_long.append(f"{where}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > FUNCTION_LINES:
                        too_long.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    assert too_long == []
