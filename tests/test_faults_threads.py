"""Issue 10, item 11: the job's thread count reaches the trainer (train.threads -> --threads)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path



REPO = Path(__file__).resolve().parent.parent


def test_train_rule_passes_the_configured_threads_to_the_trainer(tmp_path):
    (tmp_path / "threads.yaml").write_text("preset: tiny\ntrain: {threads: 2}\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                           "--cores", "4", "--dry-run", "--printshellcmds", "runs", "--configfile", "threads.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = [line for line in proc.stdout.splitlines() if "workflow.train_job" in line]
    assert len(commands) == 2  # the tiny grid: 2 packs (circle x ppo, ppo_lag) of 4 runs
    assert all("--threads 2 " in c for c in commands), commands[0]


