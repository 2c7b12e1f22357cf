"""Planning and `workflow.status` hash a run's tables only when they may have changed: Snakemake
touches a job's outputs after it ends, so the mtimes run.json recorded are older than the
files; the first full hash after that (the summarise step's) notes the touched mtime in
verified.json, and later checks read footers only. A modified table is still found, and
`--verify` still hashes every table."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runs import runfolder
from fake_runs import complete_run, tiny_config
from runs import run_layout
from workflow import config_validation as cv
from workflow import packs, status

TABLES = (run_layout.EPISODES, run_layout.TRACE)


@pytest.fixture
def hashes(monkeypatch):
    """The files runfolder hashes, in order."""
    calls = []
    real = runfolder._sha256

    def counting(path):
        calls.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(runfolder, "_sha256", counting)
    return calls


def touch_like_snakemake(folder: Path, seconds: float = 3.0) -> None:
    """Every output's mtime moved to a later time, the bytes untouched (Snakemake's lutime)."""
    for name in (*TABLES, run_layout.RUN_JSON):
        st = (folder / name).stat()
        later = st.st_mtime_ns + int(seconds * 1e9)
        os.utime(folder / name, ns=(later, later))


def flip_a_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x10
    path.write_bytes(bytes(data))


def run_folder(tmp_path, hashes) -> Path:
    """A complete run folder; the hashes of writing it are not counted."""
    folder = complete_run(tmp_path / run_layout.RUNS_ROOT / "circle/d25/ppo/seed0")
    hashes.clear()
    return folder


def test_an_unchanged_run_is_not_hashed_and_a_touched_one_only_once(tmp_path, hashes):
    run = run_folder(tmp_path, hashes)
    spec = {"config": tiny_config("circle", 25.0, "ppo", 0)}
    assert packs.pending_reason(run, spec) is None and hashes == []  # mtimes as recorded

    touch_like_snakemake(run)
    packs.verify_for_summary(run)  # the summarise step hashes in full and notes the touched mtimes
    assert hashes == list(TABLES) and (run / run_layout.VERIFIED).exists()
    hashes.clear()
    for _ in range(3):  # planning and status after that: footers only
        assert packs.pending_reason(run, spec) is None
        assert status.run_status(tmp_path, "circle/d25/ppo/seed0", None, "h").state == "done"
    assert hashes == []

    # --verify still hashes every table
    assert status.run_status(tmp_path, "circle/d25/ppo/seed0", None, "h", verify=True).state == "done"
    assert hashes == list(TABLES)


def test_a_touched_run_not_yet_summarised_is_hashed_once_by_whoever_looks_first(tmp_path, hashes):
    run = run_folder(tmp_path, hashes)
    touch_like_snakemake(run)
    assert runfolder.incomplete_reason(run) is None and hashes == list(TABLES)
    assert runfolder.incomplete_reason(run) is None and hashes == list(TABLES)  # not again


def test_a_table_modified_after_it_was_noted_is_found_damaged(tmp_path, hashes):
    run = run_folder(tmp_path, hashes)
    touch_like_snakemake(run)
    packs.verify_for_summary(run)
    flip_a_bit(run / run_layout.TRACE)  # same size; the write moves the mtime
    assert runfolder.incomplete_reason(run) == \
        "trace.parquet is damaged (its sha256 differs from the one run.json recorded)"


def test_a_note_for_other_bytes_is_not_trusted(tmp_path, hashes):
    """verified.json vouches only for the bytes run.json records (a retrained run has new hashes)."""
    run = run_folder(tmp_path, hashes)
    touch_like_snakemake(run)
    notes = {}
    for name in TABLES:
        st = (run / name).stat()
        notes[name] = {"sha256": "0" * 64, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    runfolder.write_json(str(run / run_layout.VERIFIED), notes)
    assert runfolder.incomplete_reason(run) is None and hashes == list(TABLES)


def test_a_folder_that_cannot_be_written_is_checked_without_noting(tmp_path, hashes, monkeypatch):
    run = run_folder(tmp_path, hashes)
    touch_like_snakemake(run)

    def read_only(path, obj):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(runfolder, "write_json", read_only)
    assert runfolder.incomplete_reason(run) is None and runfolder.incomplete_reason(run) is None
    assert hashes == list(TABLES) * 2 and not (run / run_layout.VERIFIED).exists()


@pytest.mark.slow
def test_planning_a_finished_tiny_sweep_hashes_nothing(tiny_sweep, tmp_path, hashes):
    """The real thing: Snakemake trained, touched and summarised every run; planning the same
    sweep again reads footers only."""
    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, sweep, symlinks=True, copy_function=shutil.copy2)
    cfg = cv.resolve({"preset": "tiny"})
    assert all(not p.pending for p in packs.plan(cfg, sweep))
    assert hashes == []


def test_the_plan_status_benchmark_runs_and_prints_each_call(tmp_path):
    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, str(repo / "benchmarks" / "plan_status_scale.py"), "--seeds", "1",
                           "--episodes", "300", "--keep", str(tmp_path / "sweep")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("48 runs x 300 episodes")
    assert [line.split()[:2] for line in lines[2:]] == [["plan", "before"], ["plan", "after"], ["status", "before"],
                                                       ["status", "after"], ["status", "--verify"]]
    runs = list((tmp_path / "sweep" / "results-paper" / "runs").glob("*/*/*/*"))  # the paper preset's folder
    assert len(runs) == 48 and all((r / run_layout.VERIFIED).exists() for r in runs)
