"""benchmarks/metrics_scale.py at a tiny size: --compare evaluates another checkout in the same run."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--seeds", "1", "--iterates", "2", "--train-episodes", "16", "--final-episodes", "4", "--reps", "20"]


def run_benchmark(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "metrics_scale.py"), *TINY, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_compare_with_the_same_engine_reports_both_and_identical_outputs(tmp_path):
    out = run_benchmark("--shards", str(tmp_path), "--compare", ROOT)
    assert out.returncode == 0, out.stderr
    assert "48 runs x (2 iterates x 16 + 2 x 4) = 1,920 episodes" in out.stdout
    assert "this: wall time" in out.stdout and "other: wall time" in out.stdout
    assert "speed-up (other / this)" in out.stdout
    assert "outputs: every file identical" in out.stdout
    assert not (tmp_path / "out").exists() and not (tmp_path / "out-other").exists()  # no --keep


def test_compare_with_a_folder_that_is_no_checkout_stops_up_front(tmp_path):
    out = run_benchmark("--shards", str(tmp_path), "--compare", str(tmp_path))
    assert out.returncode != 0
    assert "has no metrics/ package (not a checkout of this project)" in out.stderr
    assert not (tmp_path / "shards").exists()  # stopped before generating
