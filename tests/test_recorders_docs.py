"""docs/byo.md's three examples run as written and end in a successful `saferl-eval evaluate`."""
import glob
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DOC = open(os.path.join(ROOT, "docs", "byo.md")).read()


def block(marker: str) -> str:
    match = re.search(rf"<!-- {re.escape(marker)} -->\n```\w*\n(.*?)```", DOC, re.S)
    assert match, f"docs/byo.md has no block marked {marker}"
    return match.group(1)


def run(argv, cwd):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.parametrize("name", ["gym", "vector", "jax"])
def test_byo_example_runs_and_is_evaluated(tmp_path, name):
    (tmp_path / "corridor.py").write_text(block("byo-file: corridor.py"))
    (tmp_path / "example.py").write_text(block(f"byo-example: {name}"))
    run([sys.executable, "example.py"], tmp_path)
    command = block(f"byo-command: {name}").strip()
    argv = shlex.split(command)
    assert argv[:2] == ["saferl-eval", "evaluate"]  # the installed engine's console script
    folder = tmp_path / argv[2]  # the recorders' folders, one per seed, below it
    files = sorted(glob.glob(str(folder / "*" / "*.parquet")))
    assert len(files) >= 4  # two seeds, each with training files and final.parquet
    run([str(Path(sys.executable).parent / "saferl-eval"), *argv[1:]], tmp_path)
    out = tmp_path / argv[argv.index("--out") + 1]
    tiers = pd.read_csv(out / "tiers.csv")
    assert list(tiers.phase) == ["train", "final_explore", "final_greedy"]
    runs = pd.read_parquet(out / "run_metrics.parquet")
    assert len(runs) == 6 and (runs.n_episodes > 0).all()
    final = runs[runs.phase != "train"]
    assert (final.n_episodes == 20).all()
    assert (runs.R.abs() > 0.1).all(), runs[["phase", "R"]]  # the examples show returns, not zeros
    episodes = pd.concat([pd.read_parquet(f) for f in files])
    train = episodes[episodes.phase == "train"]
    assert train.trainer_step.notna().all()
    assert (train.groupby(["seed", "iteration"]).trainer_step.nunique() == 1).all()
