"""The import layers of docs/architecture.md ("The layers"), checked on every module.

Each package may import only the project packages its row names; `workflow` may import the
run job (`runs`) and, of the learning (`algos`), only the registries' names and code_version. Every import counts: module level, inside functions, under
`if`/`try`; and the Snakemake files' import lines count as `workflow`'s. A failure names each
offending file:line and what it imports.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROJECT = ("metrics", "envs", "recorders", "algos", "runs", "tools", "workflow")

# package -> the project packages (or, for a part of one, its modules) it may import
ALLOWED = {
    "metrics": set(),
    "envs": set(),
    "recorders": {"metrics"},  # through recorders.engine, so an install uses its own engine
    "algos": {"envs", "metrics", "recorders"},
    "runs": {"algos", "envs", "metrics"},
    "tools": {"envs", "algos", "metrics"},
    "workflow": {"metrics", "envs", "runs",  # the run job's folders, locks, checkpoints, failure records
                 "algos.registry", "algos.config",  # the registries' names (no JAX)
                 "algos.programs"},  # code_version, the learning code's hash (no JAX at import)
}
SNAKEMAKE_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+([\w., ]+)|import\s+([\w., ]+))")


def imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import anywhere in the module; `from a import b`
    gives `a.b` (a submodule or a name in `a`: the rules below accept either)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def snakemake_imports(text: str) -> list[tuple[int, str]]:
    """The same for a Snakemake file (not Python that ast parses: its import lines)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = SNAKEMAKE_IMPORT.match(line)
        if match and match.group(1):
            found += [(number, f"{match.group(1)}.{name.strip().split(' ')[0]}") for name in match.group(2).split(",")]
        elif match:
            found += [(number, name.strip().split(" ")[0]) for name in match.group(3).split(",")]
    return found


def allowed(package: str, name: str) -> bool:
    top = name.split(".")[0]
    if top not in PROJECT or top == package:
        return True
    return any(name == rule or name.startswith(rule + ".") for rule in ALLOWED[package])


def violations(root: Path) -> list[str]:
    """`file:line: package imports name` for every import a layer does not allow."""
    found = []
    for package in PROJECT:
        for path in sorted((root / package).rglob("*.py")):
            for line, name in imported_names(ast.parse(path.read_text(), str(path))):
                if not allowed(package, name):
                    found.append(f"{path.relative_to(root)}:{line}: {package} imports {name}")
    for path in [root / "Snakefile", *sorted((root / "workflow").rglob("*.smk"))]:
        for line, name in snakemake_imports(path.read_text()):
            if not allowed("workflow", name):
                found.append(f"{path.relative_to(root)}:{line}: workflow imports {name}")
    return found


def test_every_package_imports_only_the_layers_below_it():
    assert violations(REPO) == []


def test_every_project_package_has_a_layer():
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests", "saferl_eval"}
    assert packages == set(PROJECT)


@pytest.mark.parametrize("where", ["module", "function", "snakemake"])
def test_a_forbidden_import_is_reported_with_its_file_and_line(tmp_path, where):
    for package in PROJECT:
        (tmp_path / package).mkdir()
    (tmp_path / "Snakefile").write_text("import os\n")
    text = {"module": "import os\nfrom algos.core import make_env\n",
            "function": "def f():\n    from algos import core\n    return core\n",
            "snakemake": "rule x:\n    run:\n        from algos.networks import apply_mlp\n"}[where]
    name = "rules/x.smk" if where == "snakemake" else "products/x.py"
    (tmp_path / "workflow" / name).parent.mkdir(parents=True)
    (tmp_path / "workflow" / name).write_text(text)
    (tmp_path / "metrics" / "ok.py").write_text("from metrics import schema\nimport numpy\n")
    line, imported = {"module": (2, "algos.core.make_env"), "function": (2, "algos.core"),
                      "snakemake": (3, "algos.networks.apply_mlp")}[where]
    assert violations(tmp_path) == [f"workflow/{name}:{line}: workflow imports {imported}"]


def test_the_bottom_layers_may_not_reach_up():
    assert not allowed("metrics", "runs.runfolder") and not allowed("recorders", "algos.core")
    assert not allowed("envs", "metrics.schema") and allowed("workflow", "algos.registry.ALGORITHMS")
    assert not allowed("workflow", "algos.core") and not allowed("algos", "workflow.packs")
