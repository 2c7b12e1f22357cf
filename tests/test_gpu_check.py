"""benchmarks/gpu_check.sh, the checks to run when a GPU is at hand, in its CPU-sized mode: the
same code path prints the same table, so it cannot rot between GPU sessions."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_check.sh"


@pytest.mark.slow
def test_the_small_gpu_check_prints_its_table_with_every_check_passing():
    # packs of 2 everywhere: the bitwise check, the timed pack and the pack job share one program
    done = subprocess.run(["bash", str(SCRIPT), "small", "--backends", "builtin", "--sizes", "2",
                           "--pack-job", "2", "--bitwise-size", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| builtin |")]
    assert len(rows) == 3, done.stdout
    assert rows[0].startswith("| builtin | bitwise: slot, pack-mates, alone | 2 | yes |")
    assert re.match(r"\| builtin \| train env steps/s \(batched\) \| 2 \| \d+\.\d{3}M \| \d+\.\d \|", rows[1]), rows[1]
    assert re.match(r"\| builtin \| runs.train pack job \| 2 \| train [\d.]+ s \([\d.]+M steps/s\), eval [\d.]+ s, "
                    r"job [\d.]+ s \| [\d.]+ \|", rows[2]), rows[2]
    assert done.stdout.splitlines()[0].startswith("gpu_check: cpu")


def test_the_gpu_check_says_how_to_use_it_and_refuses_an_unknown_step():
    usage = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "bash benchmarks/gpu_check.sh download" in usage.stdout
    wrong = subprocess.run(["bash", str(SCRIPT), "fly"], capture_output=True, text=True)
    assert wrong.returncode != 0 and "bash benchmarks/gpu_check.sh run" in wrong.stdout


def test_without_crax_the_crax_rows_say_they_skip():
    """A GPU machine where the wheels were not installed: the CRAX rows say so instead of failing
    (crax's import blocked here, so this holds wherever the extra is installed too)."""
    code = ("import runpy, sys; sys.modules['crax'] = None; "
            "sys.argv = ['gpu_check.py', '--small', '--backends', 'crax']; "
            "runpy.run_path('benchmarks/gpu_check.py', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "| crax | (all) | - | skipped: crax-bench not installed | - |"


@pytest.mark.slow
def test_the_flags_step_times_the_pack_once_per_xla_flags_setting():
    """`flags` runs the throughput row alone in a fresh process per setting (CPU flags here: the
    GPU ones are unknown to a CPU-only XLA), each row labelled with its setting; `--set` changes a
    config field in every row and labels it too (here at its default value, so it compiles no
    program a plain run would not; tests/test_matmul_precision.py covers the field itself)."""
    env = {**os.environ, "GPU_CHECK_XLA_FLAGS": ";--xla_cpu_max_isa=AVX", "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(SCRIPT), "flags", "--small", "--sizes", "2", "--set", "matmul_precision=default"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| builtin |")]
    assert [row.split("|")[2].strip() for row in rows] == [
        "train env steps/s (batched) [XLA_FLAGS=default] [matmul_precision=default]",
        "train env steps/s (batched) [XLA_FLAGS=--xla_cpu_max_isa=AVX] [matmul_precision=default]"]
    assert all(re.search(r"\| 2 \| \d+\.\d{3}M \| \d+\.\d \|$", row) for row in rows), rows

