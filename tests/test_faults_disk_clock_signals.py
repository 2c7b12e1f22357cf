"""Issue 46, faults a cluster user meets: a full disk, a skewed clock, an interrupt; then
hostile inputs beyond the listed ones (a read-only results folder, a run folder that is a file,
a truncated Parquet file, a spec.json that is a folder).

The rule for each: one line naming the file, no output left looking complete, and the same
command, rerun once the cause is gone, ends with the results of an undisturbed run.
"""
from __future__ import annotations

import errno
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from metrics import cli as metrics_cli
from runs import run_layout

REPO = Path(__file__).resolve().parent.parent
EPISODES = REPO / "docs" / "examples" / "episodes_other_framework.csv"
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
             "--workflow-profile", str(REPO / "cluster_profiles" / "local"), "--configfile", "tiny.yaml"]
ENV = dict(os.environ, PYTHONPATH=str(REPO))
# trainers hold after their first chunk until a signal comes (tests/hold_after_first_chunk)
HELD = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "hold_after_first_chunk"), str(REPO)]))


def files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too) by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---- a full disk ---------------------------------------------------------------------------------

@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs: a filesystem that fills up (mounting needs root; skipped where refused)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill ({proc.stderr.strip() or proc.returncode}): needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(fs: Path, leave: int = 0) -> Path:
    """Fill `fs` with a ballast file until a write fails, then give `leave` bytes back."""
    ballast = fs / "ballast"
    with open(ballast, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC
    size = ballast.stat().st_size
    with open(ballast, "r+b") as f:
        f.truncate(max(size - leave, 0))
    return ballast


def engine(stage: str, out: Path, summary: Path) -> list[str]:
    args = {"evaluate": ["evaluate", str(EPISODES)], "summarise": ["summarise", str(EPISODES)],
            "aggregate": ["aggregate", str(summary)]}[stage]
    return [*args, "--out", str(out), *(["--reps", "200", "--seed", "0"] if stage != "summarise" else [])]


@pytest.mark.parametrize("stage", ["evaluate", "summarise", "aggregate"])
def test_a_full_disk_is_one_line_naming_the_output_and_the_rerun_matches(small_fs, tmp_path, capsys, stage):
    summary = tmp_path / "summary.parquet"
    assert metrics_cli.main(["summarise", str(EPISODES), "--out", str(summary)]) == 0
    name = "summary.parquet" if stage == "summarise" else "out"
    assert metrics_cli.main(engine(stage, tmp_path / "reference" / name, summary)) == 0
    capsys.readouterr()

    ballast = fill(small_fs)
    out = small_fs / name
    assert metrics_cli.main(engine(stage, out, summary)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: cannot write {out}" in err and "No space left on device" in err, err
    assert "free space and run the same command again" in err
    assert sorted(p.name for p in small_fs.iterdir()) == ["ballast"]  # nothing half-written, no temporary left

    ballast.unlink()
    assert metrics_cli.main(engine(stage, out, summary)) == 0
    reference = tmp_path / "reference" / name
    if stage == "summarise":
        assert out.read_bytes() == reference.read_bytes()
    else:
        assert files(out) == files(reference) and len(files(out)) >= 9


TINY = ["--task", "circle", "--bound", "15", "--algo", "ppo", "--seed", "0", "--preset", "cpu",
        "--total-steps", str(4 * 2048), "--num-envs", "4", "--episode-length", "64", "--eval-episodes", "4",
        "--set", "chunk_updates=1", "--set", "checkpoint_every_s=0"]


def train(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runs.train", *TINY, "--out", str(out)], capture_output=True,
                          text=True, env=ENV, cwd=REPO, timeout=600)


def same_run(a: Path, b: Path) -> None:
    assert (a / run_layout.EPISODES).read_bytes() == (b / run_layout.EPISODES).read_bytes()
    trace_a, trace_b = (pd.read_parquet(p / run_layout.TRACE).drop(columns="wall_time") for p in (a, b))
    pd.testing.assert_frame_equal(trace_a, trace_b)  # wall_time is the clock's


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    reference = tmp_path_factory.mktemp("trained") / "reference"
    assert train(reference).returncode == 0
    return reference


@pytest.mark.slow
def test_training_on_a_full_disk_exits_75_naming_the_file_and_resumes_identically(small_fs, trained):
    reference = trained
    ballast = fill(small_fs, leave=8192)  # the lock fits, the first checkpoint does not
    out = small_fs / "run"
    proc = train(out)
    assert proc.returncode == 75, proc.stderr[-2000:]
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("runs.train:")]
    assert f"cannot write {out}/" in line and "No space left on device" in line, line
    assert "Traceback" not in proc.stderr
    assert not (out / run_layout.RUN_JSON).exists() and not (out / run_layout.FAILURE_RECORD).exists()
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    ballast.unlink()
    proc = train(out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    same_run(out, reference)


# ---- a skewed clock ------------------------------------------------------------------------------

def copy_sweep(tiny_sweep: Path, dest: Path) -> Path:
    shutil.copytree(tiny_sweep, dest, symlinks=True)
    return dest


def date_ahead(folder: Path, seconds: float) -> int:
    when = time.time() + seconds
    paths = [p for p in folder.rglob("*") if not p.is_symlink()]
    for p in paths:
        os.utime(p, (when, when))
    return len(paths)


def snakemake(cwd: Path, *args: str, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, env=ENV, timeout=timeout)


def trained_files(sweep: Path) -> dict[str, bytes]:
    """What training wrote (verified.json, a cache of hashes keyed by mtime, is rewritten when dates move)."""
    return {k: v for k, v in files(sweep / "results-tiny" / "runs").items() if not k.endswith("verified.json")}


@pytest.mark.slow
def test_a_sweep_dated_an_hour_ahead_is_done_and_nothing_retrains_or_loops(tiny_sweep, tmp_path):
    sweep = copy_sweep(tiny_sweep, tmp_path / "sweep")
    date_ahead(sweep / "results-tiny", 3600)
    before = trained_files(sweep)

    dry = snakemake(sweep, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    said = dry.stdout + dry.stderr
    assert "Nothing to be done" in said and "rule train_" not in said
    assert re.search(r"warning: \d+ file\(s\) in results-tiny/ are dated in the future, up to (0\.9|1\.0) h ahead",
                     said), said[-3000:]

    status = subprocess.run([sys.executable, "-m", "workflow.status", "--preset", "tiny"], cwd=sweep,
                            capture_output=True, text=True, env=ENV, timeout=300)
    assert "8 done, 0 running, 0 failed, 0 missing of 8 runs" in status.stdout, status.stdout + status.stderr
    assert "dated in the future" in status.stdout

    # a product lost: rebuilt from inputs dated ahead (Snakemake's clock-skew check failed it), then at rest
    (sweep / "results-tiny" / "metrics" / "tiers.csv").unlink()
    real = snakemake(sweep, timeout=600)
    assert real.returncode == 0, real.stderr[-3000:]
    assert "localrule tiers" in real.stderr and "rule train_" not in real.stderr
    assert (sweep / "results-tiny" / "metrics" / "tiers.csv").read_bytes() == \
        (tiny_sweep / "results-tiny" / "metrics" / "tiers.csv").read_bytes()
    again = snakemake(sweep, timeout=600)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stderr[-3000:]
    assert trained_files(sweep) == before  # nothing retrained


# ---- an interrupt --------------------------------------------------------------------------------

EVALUATE = [sys.executable, "-m", "metrics", "evaluate", str(EPISODES), "--reps", "10000", "--seed", "0"]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("evaluate")
    (folder / "moved.yaml").write_text("moderate: {V: 0.3}\n")  # its notice is the line that says work began
    cmd = [*EVALUATE, "--thresholds", str(folder / "moved.yaml")]
    reference = folder / "reference"
    assert subprocess.run([*cmd, "--out", str(reference)], env=ENV, cwd=REPO, timeout=300).returncode == 0
    return reference, cmd


@pytest.mark.parametrize("phase", ["computing", "writing"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_evaluate_leaves_nothing_and_the_rerun_matches(evaluated, tmp_path, signum, phase):
    (reference, cmd), out = evaluated, tmp_path / "out"
    proc = subprocess.Popen([*cmd, "--out", str(out)], env=ENV, cwd=REPO, stderr=subprocess.PIPE, text=True)
    # begun: computing once the thresholds' notice is out (then the bootstrap runs for seconds);
    # writing once the staging folder fills
    notice = proc.stderr.readline() if phase == "computing" else ""
    while phase == "writing" and proc.poll() is None and not glob.glob(str(out / ".staging-*" / "*")):
        time.sleep(0.0005)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=300)
    err = notice + err
    if proc.returncode == 0:  # finished before the signal (a fast machine): the output must be whole
        assert files(out) == files(reference)
    else:
        assert proc.returncode == 128 + signum, err
        assert f"stopped by {signal.Signals(signum).name}" in err and "Traceback" not in err, err
        assert not out.exists() or not files(out)  # nothing, not even a staging folder's files
    assert subprocess.run([*cmd, "--out", str(out)], env=ENV, cwd=REPO, timeout=300).returncode == 0
    assert files(out) == files(reference)


@pytest.mark.slow
def test_ctrl_c_to_the_trainer_checkpoints_and_the_rerun_resumes_identically(trained, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "runs.train", *TINY, "--out", str(out)], stderr=subprocess.PIPE,
                            text=True, env=HELD, cwd=REPO)
    while proc.poll() is None and not (out / run_layout.PROGRESS).exists():  # begun: held after its first chunk
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    assert proc.returncode == 75, rest
    assert "SIGINT: checkpoints written, exiting 75" in rest and "Traceback" not in rest, rest
    assert not (out / run_layout.RUN_JSON).exists() and (out / run_layout.CHECKPOINT_DIR).is_dir()
    again = train(out)
    assert again.returncode == 0 and "resumed from" in again.stderr, again.stderr[-2000:]
    same_run(out, trained)


# stage: (files to delete from the finished sweep, the log line that says the stage has begun)
STAGES = {
    "training": (["runs/circle/d15/ppo/seed0"], "runs.train --spec"),
    "summaries": ([f"runs/circle/{b}/{a}/seed{s}/summary.parquet" for b in ("d15", "d25")
                   for a in ("ppo", "ppo_lag") for s in (0, 1)], "rule summarise_"),
    "aggregation": (["metrics/aggregate.json"], "rule aggregate:"),
    "products": (["tables/table1.md", "figures/figure1.png"], "rule table1:"),
}
COMPARED = ("metrics/*.csv", "metrics/*.parquet", "metrics/aggregate.json", "tables/*.csv", "tables/*.md",
            "runs/*/*/*/*/summary.parquet", "runs/*/*/*/*/episodes.parquet")


def compared(results: Path) -> dict[str, bytes]:
    return {str(p.relative_to(results)): p.read_bytes() for pattern in COMPARED for p in results.glob(pattern)}


@pytest.mark.slow
@pytest.mark.parametrize("stage, signum", [("training", signal.SIGTERM), ("summaries", signal.SIGINT),
                                           ("aggregation", signal.SIGTERM), ("products", signal.SIGINT)])
def test_an_interrupted_controller_leaves_nothing_looking_complete_and_the_rerun_matches(
        tiny_sweep, tmp_path, stage, signum):
    sweep = copy_sweep(tiny_sweep, tmp_path / "sweep")
    results, reference = sweep / "results-tiny", compared(tiny_sweep / "results-tiny")
    deleted, begun = STAGES[stage]
    for name in deleted:
        path = results / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    log = tmp_path / "controller.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(SNAKEMAKE, cwd=sweep, stdout=sink, stderr=subprocess.STDOUT, text=True, env=ENV)
        while proc.poll() is None and not any(begun in p.read_text(errors="replace") for p in
                                              [log, *results.glob("logs/train/*.log")] if p.exists()):
            time.sleep(0.02)
        proc.send_signal(signum)
        proc.wait(timeout=300)
    # whatever exists now is either the undisturbed run's file or absent (or, for a run, incomplete)
    now = compared(results)
    assert {k: v for k, v in now.items() if reference.get(k) != v} == {}, log.read_text()[-3000:]
    run = results / "runs/circle/d15/ppo/seed0"
    if stage == "training" and (run / run_layout.RUN_JSON).exists():
        from runs import runfolder
        assert runfolder.incomplete_reason(run) is None  # a run.json only beside its complete tables

    rerun = snakemake(sweep, timeout=900)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert compared(results) == reference
    if stage == "training":  # retrained alone in its full pack's program, loaded from the cache, not compiled
        record = json.loads((run / run_layout.RUN_JSON).read_text())
        assert (record["program_slots"], record["program_source"]) == (4, "loaded"), record
    for name in deleted:
        assert (results / name).exists()
    dry = snakemake(sweep, "--dry-run")
    assert "Nothing to be done" in dry.stdout + dry.stderr


@pytest.mark.slow
def test_sigint_to_the_controller_mid_training_checkpoints_within_a_minute_and_the_rerun_resumes(tiny_sweep, tmp_path):
    sweep = copy_sweep(tiny_sweep, tmp_path / "sweep")
    results, reference = sweep / "results-tiny", compared(tiny_sweep / "results-tiny")
    pack = sorted(results.glob("runs/circle/d*/ppo/seed*"))  # one pack's four runs retrain
    for run in pack:
        shutil.rmtree(run)
    proc = subprocess.Popen(SNAKEMAKE, cwd=sweep, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=HELD)  # the trainer holds after its first chunk: mid-training when signalled
    seen = []

    def read():
        for line in proc.stdout:
            seen.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    training = "train_circle_ppo_p0: training (programs "  # the console's line (workflow.console)
    deadline = time.monotonic() + 900  # only a broken console waits this long: the trainer holds
    while proc.poll() is None and time.monotonic() < deadline and not (
            any(line.startswith(training) for line in seen) and any((r / run_layout.PROGRESS).exists() for r in pack)):
        time.sleep(0.05)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)  # to the controller alone, as `kill -INT <pid>`
    proc.wait(timeout=300)
    took = time.monotonic() - sent
    reader.join(timeout=60)
    out = "".join(seen)
    assert any(line.startswith("train_circle_ppo_p0: compiling (4 runs, ") for line in seen), out[-3000:]
    assert any(line.startswith(training) for line in seen), out[-3000:]
    assert proc.returncode == 130, out[-3000:]
    assert took < 60, f"{took:.0f} s"
    assert out.rstrip().endswith("Stopped by SIGINT: 4 runs checkpointed; run the same command again to resume them."), \
        out[-3000:]
    assert "Traceback" not in out and "WorkflowError" not in out and "Terminating processes" not in out, out[-3000:]
    for run in pack:
        assert (run / run_layout.CHECKPOINT_DIR).is_dir() and not (run / run_layout.RUN_JSON).exists()
    rerun = snakemake(sweep, timeout=900)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert [json.loads((run / run_layout.RUN_JSON).read_text())["restarts"] for run in pack] == [1] * len(pack)
    assert compared(results) == reference  # resumed, bitwise the runs an uninterrupted sweep trained


# ---- hostile inputs beyond the listed ones -------------------------------------------------------

def test_a_read_only_results_folder_is_one_line_naming_the_output(small_fs, capsys):
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    try:
        assert metrics_cli.main(["summarise", str(EPISODES), "--out", str(small_fs / "s.parquet")]) == 2
        err = capsys.readouterr().err
        assert err == f"error: cannot write {small_fs / 's.parquet'}: Read-only file system\n"  # not a temporary name
        assert metrics_cli.main(["evaluate", str(EPISODES), "--out", str(small_fs / "out"), "--reps", "10"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Read-only file system" in err and str(small_fs / "out") in err
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
    assert not list(small_fs.iterdir())


@pytest.mark.parametrize("stage", ["evaluate", "aggregate"])
def test_a_truncated_parquet_is_named_and_nothing_is_written(tmp_path, capsys, stage):
    whole = tmp_path / "whole.parquet"
    kind = "summarise" if stage == "aggregate" else "episodes"
    if stage == "aggregate":
        assert metrics_cli.main(["summarise", str(EPISODES), "--out", str(whole)]) == 0
    else:
        pd.read_csv(EPISODES).to_parquet(whole)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    out = tmp_path / "out"
    assert metrics_cli.main([stage, str(cut), "--out", str(out), "--reps", "10"]) == 2, kind
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {cut}: cannot be read" in err, err
    assert not out.exists()


def test_a_spec_json_that_is_a_folder_is_one_line_and_no_failure_record(tmp_path):
    spec = tmp_path / "run" / "spec.json"
    spec.mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "runs.train", "--spec", str(spec)], capture_output=True, text=True,
                          env=ENV, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"runs.train: {spec}: not a usable run spec: IsADirectoryError" in proc.stderr
    assert sorted(p.name for p in spec.parent.iterdir()) == ["spec.json"]


def test_a_run_folder_that_is_a_file_is_named_before_planning(tmp_path):
    from workflow import packs
    from workflow.config_validation import resolve

    cfg = resolve({"preset": "tiny"})
    assert packs.not_folders(cfg, tmp_path) == []
    run = tmp_path / "results-tiny" / "runs" / "circle" / "d15" / "ppo" / "seed0"
    run.parent.mkdir(parents=True)
    run.write_text("not a folder")
    (tmp_path / "results-tiny" / "runs" / "circle" / "d25").write_text("")  # a folder above four runs
    assert packs.not_folders(cfg, tmp_path) == ["results-tiny/runs/circle/d15/ppo/seed0", "results-tiny/runs/circle/d25"]
    assert packs.not_folders_message(["a", "b", "c", "d"]).startswith(
        "4 run folder path(s) hold a file, not a folder: a, b, c and 1 more; move them away")


@pytest.mark.slow
def test_a_sweep_with_a_run_folder_that_is_a_file_or_a_spec_that_is_a_folder(tiny_sweep, tmp_path):
    sweep = copy_sweep(tiny_sweep, tmp_path / "sweep")
    run = sweep / "results-tiny" / "runs" / "circle" / "d15" / "ppo" / "seed0"
    shutil.rmtree(run)
    run.write_text("")
    dry = snakemake(sweep, "--dry-run")
    assert dry.returncode != 0 and "Traceback" not in dry.stdout + dry.stderr
    assert "hold a file, not a folder: results-tiny/runs/circle/d15/ppo/seed0; move them away" in dry.stdout + dry.stderr
    status = subprocess.run([sys.executable, "-m", "workflow.status", "--preset", "tiny"], cwd=sweep,
                            capture_output=True, text=True, env=ENV, timeout=300)
    assert "hold a file, not a folder: results-tiny/runs/circle/d15/ppo/seed0" in status.stdout

    run.unlink()
    (run / "spec.json").mkdir(parents=True)
    real = snakemake(sweep, timeout=600)
    assert real.returncode != 0
    assert "cannot write results-tiny/runs/circle/d15/ppo/seed0/spec.json: Is a directory" in real.stdout + real.stderr
    assert not (run / run_layout.RUN_JSON).exists()
