"""A tiny sweep of SAC-Lag through Snakemake, from the config file to the report: the off-policy
core's runs go through the same packs, run folders, metrics, tiers, tables and report as PPO's."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest


pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent

CONFIG = """preset: tiny
algos: [sac_lag]
train:
  total_steps: 4096
  set: {batch_size: 8, num_minibatches: 2, lagrangian_lr: 30.0, replay_batch_size: 32}
"""


def test_a_tiny_sac_lag_sweep_completes_with_its_products(tmp_path):
    (tmp_path / "sac.yaml").write_text(CONFIG)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                           "--workflow-profile", str(REPO / "cluster_profiles" / "local"), "--configfile", "sac.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = tmp_path / "results-tiny"
    trace = pd.read_parquet(results / "runs" / "circle" / "d15" / "sac_lag" / "seed0" / "trace.parquet")
    assert list(trace.columns[-1:]) == ["sac_alpha"] and trace["update"].max() > 0
    tiers = pd.read_csv(results / "metrics" / "tiers.csv")
    assert set(tiers.algo) == {"sac_lag"} and set(tiers.phase) == {"train", "final_explore", "final_greedy"}
    assert "SAC-Lag" in (results / "tables" / "table2.md").read_text()
    assert "SAC-Lag" in (results / "report.html").read_text()
