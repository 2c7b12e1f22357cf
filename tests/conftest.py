import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# Tests run on the CPU and share one persistent compilation cache so that repeated
# runs (and CI reruns on the same machine) do not pay XLA compile time again.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".jax_cache"))

REPO = Path(__file__).resolve().parent.parent

# A suite started in the background of a non-interactive shell (`nohup ... &`) inherits SIGINT
# ignored, and so would every trainer and controller it starts: the Ctrl-C tests would wait on
# processes that cannot hear it. Python's own handler here means each child starts with the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
