"""benchmarks/metrics_scale.py at a tiny size: --compare evaluates another checkout in the same run."""

import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--seeds", "1", "--iterates", "2", "--train-episodes", "16", "--final-episodes", "4", "--reps", "20"]


def run_benchmark(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "metrics_scale.py"), *TINY, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


# Appended to a copy of metrics/__init__.py: an engine that writes one extra line into tiers.csv
# and is the same otherwise (the benchmark's child calls metrics.tiers.write_tiers).
ONE_TABLE_CHANGED = """
import importlib as _importlib
import os as _os

_tiers = _importlib.import_module("metrics.tiers")  # the module (metrics.tiers is also a function)

_write_tiers = _tiers.write_tiers


def _write_tiers_changed(tables, out_dir):
    _write_tiers(tables, out_dir)
    with open(_os.path.join(out_dir, "tiers.csv"), "a") as fh:
        fh.write("a row this checkout adds\\n")


_tiers.write_tiers = _write_tiers_changed
"""


def test_compare_evaluates_the_other_checkout_and_names_the_files_that_differ(tmp_path):
    """The other checkout is a copy of this one's metrics/ whose tiers.csv differs: the benchmark
    must import it (not this checkout's again), find exactly that file different and every other
    output identical."""
    other = tmp_path / "other"
    shutil.copytree(os.path.join(ROOT, "metrics"), other / "metrics", ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "metrics" / "__init__.py", "a") as fh:
        fh.write(ONE_TABLE_CHANGED)
    out = run_benchmark("--shards", str(tmp_path / "work"), "--compare", str(other))
    assert out.returncode == 0, out.stderr
    assert "48 runs x (2 iterates x 16 + 2 x 4) = 1,920 episodes" in out.stdout
    assert "this: wall time" in out.stdout and "other: wall time" in out.stdout
    assert "speed-up (other / this)" in out.stdout
    assert re.search(r"^  outputs: DIFFER: tiers\.csv$", out.stdout, flags=re.M), out.stdout
    assert not (tmp_path / "work" / "out").exists() and not (tmp_path / "work" / "out-other").exists()  # no --keep


def test_compare_with_a_folder_that_is_no_checkout_stops_up_front(tmp_path):
    out = run_benchmark("--shards", str(tmp_path), "--compare", str(tmp_path))
    assert out.returncode != 0
    assert "has no metrics/ package (not a checkout of this project)" in out.stderr
    assert not (tmp_path / "shards").exists()  # stopped before generating
