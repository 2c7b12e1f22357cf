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
