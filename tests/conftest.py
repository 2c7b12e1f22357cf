import os
import subprocess
import sys
from pathlib import Path

import pytest

# Tests run on the CPU and share one persistent compilation cache so that repeated
# runs (and CI reruns on the same machine) do not pay XLA compile time again.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".jax_cache"))

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory):
    """A completed sweep of the `tiny` preset (local profile) in a temporary folder, run once per
    session and shared by every test that needs one (about a minute with a warm JAX cache).
    Tests must not change it; copy it first (see tests/test_workflow_dag.py's sweep_copy)."""
    workdir = tmp_path_factory.mktemp("tiny_sweep")
    (workdir / "tiny.yaml").write_text("preset: tiny\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                           "--workflow-profile", str(REPO / "cluster_profiles" / "local"), "--configfile", "tiny.yaml"],
                          cwd=workdir, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return workdir


# The two files that each take a worker for 12-14 minutes go first, so under README's
# `pytest -n auto --dist loadfile` the other worker works through the rest meanwhile instead of
# leaving them for the end. xdist would reorder the files by their number of tests (most first);
# pytest_configure keeps this order instead (not in pyproject's addopts: the compatibility venv
# runs these tests without xdist).
SLOW_FIRST = ("test_paper_path.py", "test_workflow_slurm.py")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist >= 3.6
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        return SLOW_FIRST.index(name) if name in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)  # stable: every file's tests keep their order
