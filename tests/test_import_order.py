"""The house's floor plan (../shared/DESIGN.md, docs/development.md): every room imports only
the rooms it may, no two files import each other round a cycle, and ``import hpt.results``
loads nothing that runs models."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "hpt"

LEAVES = {"hpt", "hpt.types", "hpt.errors", "hpt.plugins"}
# Room -> the rooms it may import (besides itself and the leaves). The order of this table is
# the order of the rooms: each imports only rooms above it; results, reports and the viewer
# read records without anything that runs models.
MAY_IMPORT: dict[str, set[str]] = {
    "backends": set(),
    "prompts": set(),
    "results": set(),
    "tasks": {"backends", "prompts", "results"},
    "structured": {"backends", "prompts", "results", "tasks"},
    "graphs": {"backends", "prompts", "results", "tasks", "structured"},
    "orchestrator": {"backends", "prompts", "results", "tasks", "structured", "graphs"},
    "reports": {"results"},
    "viewer": {"results"},
    "exports": {"results", "reports"},  # hands what reports computed to other tools' formats
    "cli": {"backends", "prompts", "results", "tasks", "structured", "graphs", "orchestrator",
            "reports", "viewer", "exports"},
}  # fmt: skip


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _lazy_names() -> dict[str, str]:
    """``hpt``'s names loaded on first use (``from hpt import evaluate`` imports the
    orchestrator): its ``_LAZY`` table, read without importing it."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_LAZY":
            table: dict[str, str] = ast.literal_eval(node.value)
            return table
    return {}


LAZY = _lazy_names()


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The hpt modules ``name`` imports when it runs (at the top or inside a function; not
    under ``if TYPE_CHECKING``). ``from pkg import sub`` imports the submodule ``sub``, not
    the package's other names."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("hpt"):
                    found.add(owner(alias.name) or alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.startswith("hpt"):
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if source == "hpt" and alias.name in LAZY:
                        found.add(LAZY[alias.name])
                    else:
                        found.add(sub if sub in modules else (owner(source) or source))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _room(module: str) -> str:
    return "leaf" if module in LEAVES else module.split(".")[1]


def test_every_room_imports_only_the_rooms_it_may() -> None:
    upward = []
    for module, targets in _graph().items():
        room = _room(module)
        assert room == "leaf" or room in MAY_IMPORT, f"{module}: a room the plan lacks"
        allowed = {room, "leaf"} | MAY_IMPORT.get(room, set())
        upward += [f"{module} -> {t}" for t in sorted(targets) if _room(t) not in allowed]
    assert not upward, "imports against the order of rooms:\n" + "\n".join(upward)


def test_the_leaves_import_nothing_of_hpt_but_each_other() -> None:
    graph = _graph()
    for leaf in LEAVES - {"hpt"}:
        assert graph[leaf] <= LEAVES, f"{leaf} imports {graph[leaf] - LEAVES}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
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


def test_no_import_cycles_between_files_or_rooms() -> None:
    graph = _graph()
    assert _cycles(graph) == []
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        rooms[_room(module)] |= {_room(t) for t in targets} - {_room(module)}
    assert _cycles(dict(rooms)) == []


def test_hpts_lazy_names_count_as_imports_of_their_modules(tmp_path: Path) -> None:
    assert LAZY["evaluate"] == "hpt.orchestrator.api"
    probe = tmp_path / "__init__.py"  # read as if it were hpt/results/__init__.py
    probe.write_text("from hpt import evaluate\n", encoding="utf-8")
    assert _imports("hpt.results", probe, _modules()) == {"hpt.orchestrator.api"}


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


_LOADED = """
import sys
before = set(sys.modules)
import hpt.results
print("\\n".join(sorted(m for m in sys.modules if m not in before)))
"""


def test_import_hpt_results_loads_nothing_that_runs_models() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout.split()
    ours = [m for m in out if m == "hpt" or m.startswith("hpt.")]
    running = ("backends", "tasks", "graphs", "structured", "orchestrator", "reports", "cli")
    assert not [m for m in ours if _room(m) in running], ours
    # Nor the libraries that talk to models.
    assert not {"aiohttp", "tenacity", "langgraph", "dspy", "openai", "anthropic"} & set(out)
