"""The environment the sweep's jobs run in, set when a real run starts (the Snakefile's
`onstart`), never while the workflow is read: a dry run, `--lint` or `python -m workflow.status`
leave the environment as it was.

- PYTHONPATH: this checkout first, so jobs import its packages even without `pip install -e`;
- PATH: this interpreter's folder first (a job's `python -m ...` is the controller's Python),
  and before it nothing but `workflow/slurm_bin`, whose `sbatch` retries a busy scheduler's
  transient errors (the SLURM executor plugin runs `sbatch` from the PATH; only sbatch is
  wrapped there);
- JAX_COMPILATION_CACHE_DIR: `.jax_cache/` of the working directory unless already set.

Local jobs (threads of the controller, or Snakemakes it starts) inherit it, and SLURM jobs get
it through sbatch's `--export=ALL`. Snakemake profiles hold command-line options only, so
this cannot live in cluster_profiles/ (docs/workflow.md).
"""
from __future__ import annotations

import os
import sys

def job_environment(repo: str, environ: dict | None = None, python: str = sys.executable) -> dict:
    """The variables `export` sets, computed from `environ` (default: os.environ)."""
    environ = dict(os.environ if environ is None else environ)
    slurm_bin = os.path.join(repo, "workflow", "slurm_bin")
    path = environ.get("PATH", "")
    if slurm_bin not in path.split(os.pathsep):
        path = os.pathsep.join([slurm_bin, path])
    return {
        "PYTHONPATH": os.pathsep.join(p for p in [repo, environ.get("PYTHONPATH", "")] if p),
        "PATH": os.pathsep.join([os.path.dirname(python), path]),
        "JAX_COMPILATION_CACHE_DIR": environ.get("JAX_COMPILATION_CACHE_DIR", os.path.abspath(".jax_cache")),
    }


def export(repo: str) -> None:
    """Set the jobs' environment in this process (the controller), once per run."""
    os.environ.update(job_environment(repo))
