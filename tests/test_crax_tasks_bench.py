"""The CRAX-task benchmarks run as docs/envs.md gives them, at the smallest sizes: env steps/s of
CRAX tasks named by task id (benchmarks/envs_throughput.py --crax-tasks) and PPO-Lag's
batched-pack rates on a CRAX task against a built-in one (benchmarks/pack_throughput.py
--crax-task). Swimmer is the CRAX task that compiles fastest (no contacts to detect)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("crax", reason="the crax extra (PyPI crax-bench) is not installed: pip install -e '.[crax]'")
pytestmark = [pytest.mark.slow, pytest.mark.crax, pytest.mark.heavy]

REPO = Path(__file__).resolve().parent.parent
RATE = r"[\d,]+"


def run(*args):
    done = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_envs_throughput_times_crax_tasks_by_task_id():
    out = run("benchmarks/envs_throughput.py", "--tasks", "circle", "--num-envs", "2", "--steps", "2", "--repeats", "1",
              "--crax-num-envs", "2", "--crax-steps", "1", "--crax-tasks", "safe_velocity_swimmer@l2")
    assert re.search(rf"^circle +builtin: +{RATE} steps/s", out, re.M), out
    # the level-2 task with its own sizes, read from the environment
    assert re.search(rf"^safe_velocity_swimmer@l2 +crax \(2 envs, obs 8, act 2\): +{RATE} steps/s +compile +[\d.]+ s$",
                     out, re.M), out


def test_pack_throughput_compares_a_crax_task_with_a_builtin_one():
    out = run("benchmarks/pack_throughput.py", "--task", "circle", "--crax-task", "safe_velocity_swimmer",
              "--sizes", "2", "--modes", "batched", "--no-alone", "--chunks", "1", "--chunk-updates", "1",
              *(f"--set={s}" for s in ("num_envs=2", "batch_size=2", "num_minibatches=1", "unroll_length=4",
                                       "episode_length=16", "num_epochs=1")))
    rows = re.findall(rf"^ +2 +batched +({RATE}) +({RATE}) +[\d.]+ +- +-$", out, re.M)
    assert len(rows) == 2, out  # circle (builtin), then the CRAX task, no single-run baselines
    assert "circle (builtin):" in out and "safe_velocity_swimmer (crax):" in out
    ratio = re.search(r"^safe_velocity_swimmer / circle, 2 runs batched: ([\d.]+) \(CPU\), ([\d.]+) \(wall\)$", out, re.M)
    assert ratio, out
    cpu_rates = [float(r[0].replace(",", "")) for r in rows]
    assert float(ratio.group(1)) == pytest.approx(cpu_rates[1] / cpu_rates[0], rel=1e-3)
