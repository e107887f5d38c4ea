"""The import structure of the package (issue 16): no module imports, directly or through
others, a module that imports it back, and none imports a module on a higher floor (FLOORS).
Imports inside functions count: a deferred import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import planner

ROOT = Path(planner.__file__).parent


def _module_name(path: Path) -> str:
    parts = ("planner", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the planner modules it imports (the package's __init__ re-exports aside)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t not in ("planner", name)}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    graph = import_graph()
    solve = "planner.solver.solve"
    assert solve in graph and "planner.solver.explain" in graph[solve]
    assert circles(graph) == []


# The floors of the package, lowest first: a module imports only modules on its own floor or
# below (issue 16). The layer folders are floors (catalog/, models/, solver/, outputs/,
# validation/); within the catalog layer the schemas and the parameter counts sit lower (the
# catalog's loader and hfconfig use them). An entry names a module or a folder relative to
# planner; the longest entry that a module's name starts with gives its floor. Every planner
# module has a floor; a new top-level module must be given one here.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("errors", "inputs")),
    ("schemas", ("catalog.specs", "catalog.request", "catalog.request_checks", "catalog.role_gpus",
                 "catalog.domains", "catalog.plan_request")),
    ("counts", ("catalog.params",)),
    ("catalog", ("catalog",)),
    ("models", ("models",)),
    ("solver", ("solver",)),
    ("outputs", ("outputs",)),
    # clients of the library: they call api.check / solve.plan as a user does
    ("clients", ("validation", "fixes", "api", "cli_options", "cli_config", "cli_files", "cli")),
)


def floor_of(module: str) -> int:
    """The floor index of a planner module (the package's own __init__ is the top)."""
    if module == "planner":
        return len(FLOORS)
    path = module.split(".", 1)[1]
    best = None
    for i, (_, names) in enumerate(FLOORS):
        for name in names:
            if (path == name or path.startswith(name + ".")) and \
                    (best is None or len(name) > len(best[1])):
                best = (i, name)
    if best is None:
        raise AssertionError(f"{module} has no floor in FLOORS: give it one")
    return best[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """'a (floor) imports b (floor)' for every import of a module on a higher floor."""
    found = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if floor_of(target) > floor_of(module):
                found.append(f"{module} ({FLOORS[floor_of(module)][0]}) imports {target} "
                             f"({FLOORS[floor_of(target)][0]})")
    return found


def test_upward_finder_names_the_offending_import():
    memory, space, specs = "planner.models.memory", "planner.solver.space", "planner.catalog.specs"
    graph = {memory: {space, specs}, space: set(), specs: set()}
    assert upward_imports(graph) == [f"{memory} (models) imports {space} (solver)"]
    assert upward_imports({space: {memory}, memory: set()}) == []


def test_every_module_has_a_floor_named_once():
    names = [n for _, floor in FLOORS for n in floor]
    assert len(names) == len(set(names))
    for module in import_graph():
        floor_of(module)  # raises for a module without a floor


def test_no_import_runs_upward():
    assert upward_imports(import_graph()) == []


# Functions may run to MAX_FUNCTION_LINES lines (def to last line; issue 16's bar). The longer
# ones of today, with their lengths: none may grow, and each leaves this list once it is split.
MAX_FUNCTION_LINES = 60
LONG_FUNCTIONS = {
}
# Modules may run to MAX_MODULE_LINES lines (issue 16's bar); the longer ones of today likewise.
MAX_MODULE_LINES = 500
LONG_MODULES = {
}


def module_lengths() -> dict[str, int]:
    """'planner.module' -> its lines."""
    return {_module_name(p): len(p.read_text(encoding="utf-8").splitlines())
            for p in ROOT.rglob("*.py")}


def test_module_length_is_capped():
    lengths = module_lengths()
    too_long = sorted(f"{name}: {n} lines (limit {LONG_MODULES.get(name, MAX_MODULE_LINES)})"
                      for name, n in lengths.items()
                      if n > LONG_MODULES.get(name, MAX_MODULE_LINES))
    assert not too_long, "split these modules: " + "; ".join(too_long)
    shorter = sorted(n for n in LONG_MODULES if lengths.get(n, 0) <= MAX_MODULE_LINES)
    assert not shorter, f"within the limit now, remove from LONG_MODULES: {shorter}"


def function_lengths() -> dict[str, int]:
    """'module.function' (methods as module.Class.method) -> its lines, def to last line."""
    out: dict[str, int] = {}
    for path in ROOT.rglob("*.py"):
        module = _module_name(path)

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    name = f"{prefix}.{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        out[name] = child.end_lineno - child.lineno + 1
                    visit(child, name)

        visit(ast.parse(path.read_text(encoding="utf-8")), module)
    return out


def test_function_length_is_capped():
    lengths = function_lengths()
    assert lengths["planner.errors.did_you_mean"] > 1  # the walk sees module functions
    too_long = {f"{name}: {n} lines (limit {LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)})"
                for name, n in lengths.items()
                if n > LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)}
    assert not too_long, "split these functions: " + "; ".join(sorted(too_long))
    shorter = {name for name, n in LONG_FUNCTIONS.items()
               if lengths.get(name, 0) <= MAX_FUNCTION_LINES}
    assert not shorter, f"within the limit now, remove from LONG_FUNCTIONS: {sorted(shorter)}"


def public_definitions() -> list[tuple[str, ast.AST, bool]]:
    """(name, node, is_method) for every public module-level function and class in planner/ and
    every public method or property of a public class."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and \
                    not node.name.startswith("_"):
                out.append((f"{module}.{node.name}", node, False))
                if isinstance(node, ast.ClassDef):
                    out += [(f"{module}.{node.name}.{m.name}", m, True) for m in node.body
                            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
                            and not m.name.startswith("_")]
    return out


def positional_count(node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> int:
    """Parameters a caller may pass by position (a method's self/cls aside)."""
    n = len(node.args.posonlyargs) + len(node.args.args)
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    return n - 1 if is_method and not static else n


def test_public_definitions_have_docstrings():
    found = public_definitions()
    names = {name for name, _, _ in found}
    assert "planner.errors.did_you_mean" in names and "planner.solver.result.Plan" in names
    missing = sorted(name for name, node, _ in found if ast.get_docstring(node) is None)
    assert not missing, "document these: " + ", ".join(missing)


def test_positional_count_skips_self_only():
    tree = ast.parse("class A:\n    def f(self, a, b, c, *, d): ...\n"
                     "    @staticmethod\n    def g(a, b, c, d): ...\ndef h(a, b, c, d=1): ...")
    cls, h = tree.body
    f, g = cls.body
    assert [positional_count(f, True), positional_count(g, True), positional_count(h, False)] \
        == [3, 4, 4]


def test_public_functions_are_keyword_only_past_three():
    too_many = sorted(f"{name} ({positional_count(node, method)})"
                      for name, node, method in public_definitions()
                      if not isinstance(node, ast.ClassDef) and positional_count(node, method) > 3)
    assert not too_many, "make the parameters past the third keyword-only: " + ", ".join(too_many)
