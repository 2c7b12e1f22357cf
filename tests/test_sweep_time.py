"""benchmarks/sweep_time.py: sums a sweep's pack times once per pack and counts how each
pack got its programs."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_sweep_time_counts_each_pack_once_and_splits_compiled_from_loaded(tmp_path):
    packs = [(2, "compiled", 30.0), (2, "loaded", 2.0)]  # (pack size, program source, compile_s)
    for p, (size, source, compile_s) in enumerate(packs):
        for member in range(size):
            folder = tmp_path / "results" / "runs" / "circle" / "d25" / f"algo{p}" / f"seed{member}"
            folder.mkdir(parents=True)
            folder.joinpath("run.json").write_text(json.dumps(
                {"pack_size": size, "compile_s": compile_s, "train_wall_s": 100.0, "eval_wall_s": 4.0,
                 "program_source": source}))
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sweep_time.py"), str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    assert "4 runs" in out
    assert "compile_s         32.0" in out and "train_wall_s     200.0" in out and "total            240.0" in out
    assert "programs compiled: 1 packs, 30.0 s" in out and "programs loaded: 1 packs, 2.0 s" in out


def fake_runs(root: Path, n: int) -> None:
    for seed in range(n):
        folder = root / "runs" / "circle" / "d25" / "ppo" / f"seed{seed}"
        folder.mkdir(parents=True)
        folder.joinpath("run.json").write_text(json.dumps(
            {"pack_size": n, "compile_s": 1.0, "train_wall_s": 1.0, "eval_wall_s": 1.0, "program_source": "compiled"}))


def test_sweep_time_reads_the_sweeps_own_folder(tmp_path):
    """results/ for the default preset, results-NAME/ with --preset NAME, the one results*/
    folder without it, or a results folder itself; two sweeps and no --preset: refused, naming both."""
    def counted(*args, rc=0):
        proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sweep_time.py"), *map(str, args)],
                              capture_output=True, text=True)
        assert proc.returncode == rc, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    fake_runs(tmp_path / "results-zoo", 3)
    assert "results-zoo/runs" in counted(tmp_path) and "3 runs" in counted(tmp_path)
    assert "3 runs" in counted(tmp_path / "results-zoo")
    fake_runs(tmp_path / "results-tiny", 2)
    assert "results-tiny/, results-zoo/" in counted(tmp_path, rc=1) and "--preset" in counted(tmp_path, rc=1)
    assert "2 runs" in counted(tmp_path, "--preset", "tiny") and "3 runs" in counted(tmp_path, "--preset", "zoo")
    fake_runs(tmp_path / "results", 1)
    assert "1 runs" in counted(tmp_path) and "1 runs" in counted(tmp_path, "--preset", "default")


def test_sweep_time_in_a_checkout_reads_its_results_not_the_trainers_package(tmp_path):
    """A clone where the sweep ran holds runs/ (the trainer's package) beside results/: the
    results are read; a folder with no trained run is refused in one line, not a traceback."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "__init__.py").write_text("")
    fake_runs(tmp_path / "results", 2)
    script = str(REPO / "benchmarks" / "sweep_time.py")
    out = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert f"runs of {tmp_path / 'results' / 'runs'}" in out and "2 runs" in out
    empty = tmp_path / "empty"
    (empty / "runs").mkdir(parents=True)
    proc = subprocess.run([sys.executable, script, str(empty)], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"sweep_time: no run.json under {empty / 'runs'}/TASK/BOUND/ALGO/SEED/: not a trained sweep's folder")
