"""Issue 10, item 11: the job's thread count reaches the trainer (train.threads -> --threads)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path



REPO = Path(__file__).resolve().parent.parent


def test_train_rule_passes_the_configured_threads_to_the_trainer(tmp_path):
    (tmp_path / "threads.yaml").write_text("preset: tiny\ntrain: {threads: 2}\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                           "--cores", "4", "--dry-run", "runs", "--configfile", "threads.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the tiny grid: 2 packs (circle x ppo, ppo_lag) of 4 runs; the rule passes {threads} on
    jobs = re.findall(r"rule (train_\w+):\n(?:\s+\w+: .*\n)*?\s+threads: (\d+)", proc.stdout + proc.stderr)
    assert sorted(jobs) == [("train_circle_ppo_lag_p0", "2"), ("train_circle_ppo_p0", "2")], proc.stderr[-2000:]
    assert "--threads {threads}" in (REPO / "workflow" / "rules" / "train.smk").read_text()
