"""Honest packaging: what hpt/ imports is declared, and the lock agrees with the declarations.

No installs: reads pyproject.toml, hpt's source (ast), packaging/constraints.txt and this
environment's installed distributions (to map a module to the distribution providing it)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LOCK = REPO / "packaging" / "constraints.txt"
# Extras that hpt/ may import from, lazily (inside a function, or by name through importlib).
RUNTIME_EXTRAS = (
    "local",
    "dspy",
    "sentence-transformers",
    "prices",
    "ray",
    "inspect",
    "wandb",
    "mlflow",
)
# Extras the lock covers (`pip install -c packaging/constraints.txt -e
# '.[local,dev,dspy,ray,inspect,wandb,mlflow,docs]'`;
# prices' litellm comes with dspy, so its pin must be the lock's).
LOCKED_EXTRAS = ("local", "dev", "dspy", "prices", "ray", "inspect", "wandb", "mlflow", "docs")


def requirements(extra: str | None = None) -> list[Requirement]:
    deps = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    return [Requirement(d) for d in deps]


def declared(*extras: str | None) -> set[str]:
    return {canonicalize_name(r.name) for e in extras for r in requirements(e)}


def third_party_imports() -> dict[str, dict[str, bool]]:
    """``{top-level module: {"file:line": imported at module level}}`` for hpt/'s imports,
    including ``importlib.import_module("x")`` / ``importlib.util.find_spec("x")`` literals."""
    found: dict[str, dict[str, bool]] = {}

    def add(module: str, where: str, top: bool) -> None:
        name = module.split(".")[0]
        # A module beside the file, as a script run by path imports it (the sandbox's own).
        sibling = (path.parent / f"{name}.py").is_file()
        if (
            name not in ("hpt", "__future__")
            and name not in sys.stdlib_module_names
            and not sibling
        ):
            found.setdefault(name, {})[where] = top

    for path in sorted((REPO / "hpt").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(REPO)
        nested: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                nested.update(id(n) for n in ast.walk(node) if n is not node)
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            top = id(node) not in nested and str(rel) not in EXTRA_MODULES
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, where, top)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                add(node.module, where, top)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("import_module", "find_spec")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                add(node.args[0].value, where, False)
    return found


# hpt's modules that only an extra's users load, by name through importlib (hpt.exports'
# FORMATS): their top-level imports are that extra's, as lazy as an import in a function.
EXTRA_MODULES = {
    "hpt/exports/inspect_log.py": "hpt.exports.inspect_log",
    "hpt/exports/wandb_run.py": "hpt.exports.wandb_run",
    "hpt/exports/mlflow_run.py": "hpt.exports.mlflow_run",
}


def test_modules_of_an_extra_are_loaded_only_by_name() -> None:
    from hpt.exports import FORMATS

    assert set(EXTRA_MODULES.values()) <= {f.module for f in FORMATS.values()}
    for path in sorted((REPO / "hpt").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            loaded = set(names) & set(EXTRA_MODULES.values())
            assert not loaded, f"{path.relative_to(REPO)} imports {loaded}: load it by name"


def test_every_third_party_import_is_declared() -> None:
    providers = importlib.metadata.packages_distributions()
    core, lazy_ok = declared(None), declared(None, *RUNTIME_EXTRAS)
    imports = third_party_imports()
    assert {"openai", "anthropic", "httpx2", "aiohttp", "langgraph"} <= imports.keys()
    problems = []
    for module, places in sorted(imports.items()):
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        top = [w for w, at_top in places.items() if at_top]
        if not dists and not top and canonicalize_name(module) in lazy_ok - core:
            continue  # an optional extra's own module, not installed in this venv
        if not dists:
            problems.append(f"{module} ({', '.join(places)}): not installed here, so no "
                            "distribution is known to provide it; install it and declare it")  # fmt: skip
            continue
        allowed = core if top else lazy_ok
        if not dists & allowed:
            where = ", ".join(top or places)
            need = "[project].dependencies" if top else f"dependencies or {RUNTIME_EXTRAS}"
            problems.append(f"{module} ({where}) comes from {sorted(dists)}: not in {need}")
    assert not problems, "\n".join(problems)


def test_every_core_dependency_is_imported() -> None:
    """Nothing declared that hpt/ does not import itself (a dependency's dependency is its own
    business). pydantic-core is imported directly (``pydantic_core.to_json``)."""
    providers = importlib.metadata.packages_distributions()
    imported = {
        canonicalize_name(d) for module in third_party_imports() for d in providers.get(module, [])
    }
    unused = declared(None) - imported
    assert not unused, f"declared but not imported by hpt/: {sorted(unused)}"


def lock_pins() -> dict[str, Version]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line.strip())
        assert m, f"{LOCK.name}: not NAME==VERSION: {line!r}"
        pins[canonicalize_name(m[1])] = Version(m[2])
    return pins


def test_lock_pins_satisfy_the_declared_bounds() -> None:
    pins = lock_pins()
    assert "hpt" not in pins
    problems = []
    for extra in (None, *LOCKED_EXTRAS):
        for req in requirements(extra):
            if req.marker is not None and not req.marker.evaluate():
                continue
            name = canonicalize_name(req.name)
            if name not in pins:
                problems.append(f"{req} ({extra or 'core'}): not pinned in {LOCK.name}")
            elif not req.specifier.contains(pins[name], prereleases=True):
                problems.append(f"{req} ({extra or 'core'}): {LOCK.name} pins {pins[name]}")
    assert not problems, "\n".join(problems)


def test_lock_pins_llama_cpp_exactly() -> None:
    """Its wheel is built from source; an exact pin keeps pip's cache of it hitting."""
    assert "llama-cpp-python" in lock_pins()


def _min_versions() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "min_versions", REPO / "packaging" / "min_versions.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_min_versions_job_reads_the_bounds_pip_would() -> None:
    """packaging/min_versions.py (standard library only) parses the lower bounds with a regex;
    it must find the same ``>=`` bound as ``packaging`` for every core dependency."""
    bounds = _min_versions().lower_bounds()
    expected = {}
    for req in requirements():
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{req}: needs exactly one >= lower bound"
        expected[req.name] = lows[0]
    assert bounds == expected


@pytest.mark.parametrize("stamp", [".installed-local", ".installed-dev"])
def test_make_installs_through_the_lock(stamp: str) -> None:
    makefile = (REPO / "Makefile").read_text()
    rule = makefile.split(f"$(VENV)/{stamp}:", 1)[1].split("\n\n", 1)[0]
    assert "$(LOCK)" in rule.splitlines()[0], rule  # a new lock reinstalls
    assert re.search(r"pip install .*-c \$\(LOCK\) ", rule), rule


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: plugin authors' type checkers read hpt's annotations only with ``py.typed``
    in the package (hatchling ships every file under hpt/)."""
    import importlib.resources

    assert importlib.resources.files("hpt").joinpath("py.typed").is_file()
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]["packages"] == ["hpt"]
