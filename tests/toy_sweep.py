"""A tiny sweep of a toy algorithm in a copy of the repository, the algorithm added the way
docs/algos.md says (one registry entry plus its own code, nothing else): shared by
tests/test_registry_sweep.py and tests/test_algos_toy_stateful.py."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REGISTRY_ANCHOR = "ALGORITHMS: dict[str, Algorithm] = {\n"


def add_toy_algorithm(repo: Path, entry: str, code: dict[str, str]) -> None:
    """`entry` first in algos/registry.py's table; each `code` text appended to its file (path
    relative to `repo`; a missing file is created)."""
    registry = repo / "algos" / "registry.py"
    text = registry.read_text()
    assert REGISTRY_ANCHOR in text
    registry.write_text(text.replace(REGISTRY_ANCHOR, REGISTRY_ANCHOR + entry))
    for path, addition in code.items():
        target = repo / path
        target.write_text((target.read_text() if target.exists() else "") + addition)


def toy_sweep(root: Path, entry: str, code: dict[str, str], sweep_yaml: str) -> Path:
    """Copy this checkout to `root`/repo, add the toy algorithm there, run the sweep's `metrics`
    target with `sweep_yaml` in `root`/work (the copy's packages in the controller and the
    jobs) and return that folder."""
    repo = root / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns(
        ".git", ".jax_cache", ".snakemake", ".pytest_cache", "results", "__pycache__", ".venv"))
    add_toy_algorithm(repo, entry, code)
    work = root / "work"
    work.mkdir()
    (work / "toy.yaml").write_text(sweep_yaml)
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"),
                           "--workflow-profile", str(repo / "cluster_profiles" / "local"),
                           "metrics", "--configfile", "toy.yaml"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work
