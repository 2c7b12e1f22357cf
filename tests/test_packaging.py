"""Packaging: the base install (no extras) is exactly what the evaluation engine needs.

`python -m metrics evaluate` runs in a subprocess in which the training and sweep
dependencies cannot be imported, and every third-party module metrics imports is a base
dependency in pyproject.toml."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXAMPLE = REPO / "docs" / "examples" / "episodes_other_framework.csv"
# what only the extras bring, and this project's other packages
NOT_IN_BASE = ["jax", "jaxlib", "optax", "snakemake", "snakemake_executor_plugin_slurm", "submitit",
               "matplotlib", "jsonschema", "envs", "algos", "workflow", "crax"]

# Runs a module with the imports named in argv[1] refused, as if those packages were absent.
WITHOUT = """
import importlib.abc, runpy, sys
blocked = set(sys.argv[1].split(","))

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the base install)", name=name)
        return None

sys.meta_path.insert(0, Absent())
module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def run_without(blocked, module, *args, cwd):
    return subprocess.run([sys.executable, "-c", WITHOUT, ",".join(blocked), module, *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_blocking_hook_really_hides_a_package(tmp_path):
    (tmp_path / "probe.py").write_text("import jax\n")
    proc = run_without(NOT_IN_BASE, "probe", cwd=tmp_path)
    assert proc.returncode != 0 and "No module named 'jax' (not in the base install)" in proc.stderr


def test_metrics_evaluate_runs_with_the_base_install_only(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", WITHOUT, ",".join(NOT_IN_BASE), "metrics", "evaluate",
                           str(EXAMPLE), "--out", str(out), "--reps", "20", "--seed", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tiers = pd.read_csv(out / "tiers.csv")
    assert set(tiers["algo"]) == {"CPO", "PPOLag"}
    assert set(tiers["phase"]) == {"train", "final_explore", "final_greedy"}
    for name in ["iqm.csv", "conditions.csv", "run_metrics.parquet", "cdf.parquet", "bootstrap.parquet"]:
        assert (out / name).is_file(), name


# optional imports of the engine: module -> the one file that may import it, inside a
# function, turning its absence into a warning (the seed-planning figure)
OPTIONAL_IN_METRICS = {"matplotlib": "seeds_figure.py"}


def _third_party_imports(package: Path) -> set[str]:
    names = set()
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        optional = {m for m, owner in OPTIONAL_IN_METRICS.items() if owner == path.name}
        at_top = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        at_top |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
        assert not optional & at_top, f"{path} imports an optional package at module level"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names} - optional
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names |= {node.module.split(".")[0]} - optional
    return {n for n in names if n not in sys.stdlib_module_names and n != package.name}


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_module_metrics_imports_is_a_base_dependency():
    base = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    distributions = metadata.packages_distributions()
    for module in sorted(_third_party_imports(REPO / "metrics")):
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        assert dists & base, f"metrics imports {module!r} ({sorted(dists)}), not a base dependency in pyproject.toml"
    for module in NOT_IN_BASE:
        assert _requirement_name(module) not in base, f"{module} should be an extra, not a base dependency"


def test_extras_build_on_each_other_so_one_command_sets_everything_up():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert "saferl-eval[all,gym]" in extras["test"]  # the recorders' tests need gymnasium
    assert "saferl-eval[train,sweep]" in extras["all"]
    train = {_requirement_name(r) for r in extras["train"]}
    sweep = {_requirement_name(r) for r in extras["sweep"]}
    assert {"jax", "optax"} <= train and {"snakemake", "submitit", "jsonschema", "matplotlib"} <= sweep
    readme = (REPO / "README.md").read_text()
    assert 'pip install -e ".[all]" && snakemake' in readme and 'pip install -e ".[test]" && pytest' in readme
