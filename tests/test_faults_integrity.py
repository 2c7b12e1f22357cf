"""Fault injection, data integrity: a damaged or mismatched result is found and retrained, or
refused with one line naming the file, field and value; never read as good.

Rows (docs/workflow.md, "Faults and what happens"): 1 a bit flipped in a table; 2 run.json's
row count off; 3 a table zeroed with its mtime kept; 4 a table zeroed or truncated; 5 the
trainer pointed at a complete folder of another run; 6 a resume across a code change (in
tests/test_faults.py, it trains); 7 runs without training episodes; 8 duplicate YAML keys;
9 seeds outside int64 in an episode table; 10 seed counts that are not true integers or too
large; 11 a full disk; 12 two trainers on one folder; 13 a second controller (the run lock);
14 leftovers of interrupted atomic writes.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from runs import runfolder, runlock, train
from runs import run_layout
from algos.config import config_from_dict
from runs.pack import Member
from fake_runs import complete_run, tiny_config
from metrics import atomic
from metrics import cli as metrics_cli
from metrics.schema import ThresholdError
from metrics.thresholds import load_thresholds
from workflow import config_validation as cv
from workflow import packs, plan, status

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
             "--workflow-profile", str(REPO / "cluster_profiles" / "local")]


def flip_a_bit(path: Path, keep_mtime: bool = False) -> None:
    """One bit flipped in the middle of the file (a data page; the footer stays readable)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x10
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def zero_keeping_mtime(path: Path) -> None:
    st = path.stat()
    path.write_bytes(b"\0" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# ---- 1-4: every table is verified where completeness is decided --------------------------------

def test_a_flipped_bit_is_found_where_completeness_is_decided(tmp_path):
    run = complete_run(tmp_path / "results/runs/circle/d25/ppo/seed0")
    flip_a_bit(run / run_layout.EPISODES)
    # the footer still reads and still says 12 rows, the count run.json recorded: only the hash can tell
    assert pq.read_metadata(run / run_layout.EPISODES).num_rows == 12
    assert json.loads((run / run_layout.RUN_JSON).read_text())["files"][run_layout.EPISODES]["rows"] == 12
    reason = runfolder.incomplete_reason(run)
    assert reason == "episodes.parquet is damaged (its sha256 differs from the one run.json recorded)"
    assert packs.pending_reason(run, {"config": tiny_config("circle", 25.0, "ppo", 0)}) == reason


def test_a_flip_that_keeps_size_and_mtime_is_found_by_verify_and_by_summarise(tmp_path):
    run = complete_run(tmp_path / "results/runs/circle/d25/ppo/seed0")
    flip_a_bit(run / run_layout.EPISODES, keep_mtime=True)
    assert runfolder.incomplete_reason(run) is None  # planning reads footers of unchanged files only
    assert "damaged" in runfolder.incomplete_reason(run, verify=True)
    with pytest.raises(ValueError, match=r"seed0: not summarised: episodes.parquet is damaged.*run.json.damaged"):
        packs.verify_for_summary(run)
    assert not (run / run_layout.RUN_JSON).exists() and (run / "run.json.damaged").exists()
    assert runfolder.incomplete_reason(run) == "run.json missing"  # so the next plan retrains it


def test_two_episode_tables_of_equal_size_swapped_are_found_without_verify(tmp_path):
    """Two runs' episode tables swapped, each given the mtime its folder's run.json recorded
    (so neither size, row count nor mtime tells, and nothing is hashed): the footer's
    statistics name another run, and the default check (planning, status) says so."""
    runs = [complete_run(tmp_path / f"results/runs/circle/d25/ppo/seed{seed}", seed=seed) for seed in (0, 1)]
    tables = [run / run_layout.EPISODES for run in runs]
    assert tables[0].stat().st_size == tables[1].stat().st_size
    recorded = [json.loads((run / run_layout.RUN_JSON).read_text())["files"][run_layout.EPISODES] for run in runs]
    tables[0].rename(tmp_path / "swap")
    tables[1].rename(tables[0])
    (tmp_path / "swap").rename(tables[1])
    for table, record in zip(tables, recorded):
        os.utime(table, ns=(record["mtime_ns"], record["mtime_ns"]))
    assert runfolder.incomplete_reason(runs[0]) == "episodes.parquet holds rows of another run (seed 1, not 0)"
    assert runfolder.incomplete_reason(runs[1]) == "episodes.parquet holds rows of another run (seed 0, not 1)"
    args = dict(workdir=tmp_path, run="circle/d25/ppo/seed0", slurm_jobs=None, host="h")
    shown = status.run_status(**args)
    assert shown.state == "missing" and "holds rows of another run (seed 1, not 0)" in shown.detail


def test_status_verify_hashes_every_table(tmp_path):
    run = complete_run(tmp_path / "results/runs/circle/d25/ppo/seed0")
    flip_a_bit(run / run_layout.TRACE, keep_mtime=True)
    args = dict(workdir=tmp_path, run="circle/d25/ppo/seed0", slurm_jobs=None, host="h")
    assert status.run_status(**args).state == "done"
    verified = status.run_status(**args, verify=True)
    assert verified.state == "missing" and "trace.parquet is damaged" in verified.detail


def test_a_row_count_or_size_that_disagrees_with_run_json_is_incomplete(tmp_path):
    run = complete_run(tmp_path / "a")
    meta = json.loads((run / run_layout.RUN_JSON).read_text())
    meta["files"][run_layout.EPISODES]["rows"] = 5
    (run / run_layout.RUN_JSON).write_text(json.dumps(meta))
    assert runfolder.incomplete_reason(run) == "episodes.parquet has 12 rows, run.json recorded 5"
    run = complete_run(tmp_path / "b")
    with open(run / run_layout.TRACE, "r+b") as f:
        f.truncate(100)
    assert runfolder.incomplete_reason(run).startswith("trace.parquet is 100 bytes, run.json recorded")
    run = complete_run(tmp_path / "c")
    zero_keeping_mtime(run / run_layout.TRACE)
    assert runfolder.incomplete_reason(run) == "trace.parquet unreadable (ArrowInvalid)"


@pytest.mark.slow
def test_damaged_runs_are_retrained_by_the_same_command_and_the_metrics_match(tiny_sweep, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, sweep, symlinks=True)
    runs = sweep / "results-tiny" / "runs"  # the tiny preset's own folder
    flip_a_bit(runs / "circle/d15/ppo/seed0" / run_layout.EPISODES)  # 1
    meta_path = runs / "circle/d25/ppo_lag/seed1" / run_layout.RUN_JSON  # 2
    meta = json.loads(meta_path.read_text())
    meta["files"][run_layout.EPISODES]["rows"] += 1
    meta_path.write_text(json.dumps(meta))
    zero_keeping_mtime(runs / "circle/d25/ppo/seed1" / run_layout.TRACE)  # 3
    with open(runs / "circle/d15/ppo_lag/seed0" / run_layout.EPISODES, "r+b") as f:  # 4
        f.truncate(0)
    damaged = {"circle/d15/ppo/seed0", "circle/d25/ppo_lag/seed1", "circle/d25/ppo/seed1", "circle/d15/ppo_lag/seed0"}
    planned = plan.dry_run(sweep, ["--configfile", "tiny.yaml"])
    outputs = {o for j in planned if j.rule.startswith("train_") for o in j.outputs}
    assert {o.rsplit("/", 1)[0].removeprefix("results-tiny/runs/") for o in outputs} == damaged
    proc = subprocess.run([*SNAKEMAKE, "--configfile", "tiny.yaml"], cwd=sweep, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("iqm.csv", "tiers.csv", "conditions.csv"):
        assert (sweep / "results-tiny/metrics" / name).read_text() == (tiny_sweep / "results-tiny/metrics" / name).read_text()
    pd.testing.assert_frame_equal(pd.read_parquet(sweep / "results-tiny/metrics/run_metrics.parquet"),
                                  pd.read_parquet(tiny_sweep / "results-tiny/metrics/run_metrics.parquet"))
    for run in damaged:
        assert runfolder.incomplete_reason(runs / run, verify=True) is None
    assert plan.dry_run(sweep, ["--configfile", "tiny.yaml"]) == []


# ---- 5, 12: the trainer checks what a folder holds and takes its lock -----------------------------

def _member(folder: Path, seed=0) -> Member:
    """The tiny sweep's run circle/d25/ppo/seed<seed> into `folder`."""
    return Member(config_from_dict(tiny_config("circle", 25.0, "ppo", seed)), str(folder), "cpu")


def test_the_trainer_refuses_a_complete_folder_of_another_run_naming_the_fields(tmp_path, capsys):
    folder = complete_run(tmp_path / "run", seed=1, config=tiny_config("circle", 25.0, "ppo", 1))
    before = (folder / run_layout.EPISODES).read_bytes()
    assert train.run_pack([_member(folder, seed=0)]) == 1
    record = json.loads((folder / run_layout.FAILURE_RECORD).read_text())["error"]
    assert "holds a complete run of another config (fields ['seed'])" in record
    assert (folder / run_layout.EPISODES).read_bytes() == before  # nothing the user had is lost


def test_a_second_trainer_on_a_locked_folder_is_refused_and_writes_nothing(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as sleeper:
        try:
            marker = {"host": runlock.socket.gethostname(), "pid": sleeper.pid,
                      "proc_start": runlock._proc_start(sleeper.pid)}
            (folder / run_layout.JOB_MARKER).write_text(json.dumps(marker))
            assert train.run_pack([_member(folder)]) == 1
            assert f"owned by pid {sleeper.pid}" in capsys.readouterr().err
            assert {p.name for p in folder.iterdir()} == {run_layout.JOB_MARKER}  # no failure.json either
            assert runlock.read_marker(folder)["pid"] == sleeper.pid
        finally:
            sleeper.kill()


def test_a_trainer_accepts_the_lock_of_the_job_that_started_it(tmp_path):
    runlock.acquire(tmp_path, wait_s=0)  # this process plays the job wrapper
    code = ("import sys; from runs import runlock; print(runlock.acquire(sys.argv[1], wait_s=0)); "
            "runlock.release(sys.argv[1])")
    child = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO)
    assert "held by the job that started this trainer" in child.stdout, child.stderr
    assert runlock.read_marker(tmp_path)["pid"] == os.getpid() and "ended" not in runlock.read_marker(tmp_path)
    runlock.release(tmp_path)
    assert runlock.owner_alive(runlock.read_marker(tmp_path)) is False  # ended: the next job takes it over


# ---- 7-10: inputs and configs -------------------------------------------------------------------

def _csv(path: Path, rows: list[str]) -> Path:
    path.write_text("task,bound,algo,seed,phase,iteration,episode,return,cost\n" + "\n".join(rows) + "\n")
    return path


def test_runs_with_final_episodes_but_no_training_episodes_are_warned_about(tmp_path, capsys):
    rows = [f"a,25,ppo,{s},{phase},0,{e},1,{10 + e}" for s in (0, 1) for e in (0, 1)
            for phase in (["train"] if s == 0 else []) + ["final_explore", "final_greedy"]]
    path = _csv(tmp_path / "ep.csv", rows)
    assert metrics_cli.main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--reps", "10"]) == 0
    err = capsys.readouterr().err
    assert "seed=1 has final_explore, final_greedy episodes but no training episodes" in err


@pytest.mark.parametrize("seed, words", [("1e19", "1e+19 is outside -2**63 .. 2**63-1"),
                                         ("1.5", "must hold integers, not 1.5"),
                                         ("18446744073709551615", "1.8446744073709552e+19 is outside")])
def test_seeds_outside_int64_or_not_whole_are_refused_naming_file_and_row(tmp_path, capsys, seed, words):
    path = _csv(tmp_path / "ep.csv", ["a,25,ppo,0,train,0,0,1,2", f"a,25,ppo,{seed},train,0,0,1,2"])
    assert metrics_cli.main(["evaluate", str(path), "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert f"{path}: column seed" in err and words in err and "(row 1;" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_duplicate_keys_in_a_config_or_thresholds_file_are_an_error_naming_the_key(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("preset: tiny\nseeds: 2\nbootstrap: {reps: 10}\nseeds: 3\n")
    with pytest.raises(cv.ConfigError, match=r"c.yaml: .*duplicate key 'seeds' on line 4 \(first on line 2\)"):
        cv.check_config_files([config])
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("safe:\n  V: 0.1\n  V: 0.2\n")
    with pytest.raises(ThresholdError, match=r"t.yaml: .*duplicate key 'V' on line 3"):
        load_thresholds(thresholds)


@pytest.mark.slow
def test_snakemake_refuses_a_config_file_with_a_duplicate_key(tmp_path):
    (tmp_path / "dup.yaml").write_text("preset: tiny\nseeds: 2\nseeds: 3\n")
    proc = subprocess.run([*SNAKEMAKE, "--configfile", "dup.yaml", "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "dup.yaml: not valid YAML: duplicate key 'seeds'" in proc.stdout + proc.stderr


@pytest.mark.parametrize("override, words", [
    ({"seeds": 2.0}, "config key 'seeds': 2.0 is not valid"),
    ({"seeds": True}, "config key 'seeds': True is not valid"),
    ({"seeds": [0, 1.5]}, "config key 'seeds': [0, 1.5] is not valid"),
    ({"seeds": 2147483647}, "2,147,483,647 seeds give a grid of 8,589,934,588 runs"),
    ({"train": {"total_steps": 2048.0}}, "config key 'train.total_steps': 2048.0 is not of type 'integer'"),
])
def test_counts_must_be_true_integers_within_range(override, words):
    with pytest.raises(cv.ConfigError) as err:
        cv.resolve({"preset": "tiny", **override})
    assert words in str(err.value)


# ---- 11: a full disk is not a deterministic failure ----------------------------------------------

@pytest.mark.parametrize("code, transient", [(errno.ENOSPC, True), (errno.EDQUOT, True), (errno.EIO, True),
                                             (errno.EACCES, False)])
def test_transient_io_errors_are_not_recorded_as_failures(tmp_path, monkeypatch, code, transient):
    out = tmp_path / "run"

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(out / "checkpoint" / "state-0.npz"))

    monkeypatch.setattr(train, "run_pack", fail)
    argv = ["--task", "circle", "--bound", "25", "--algo", "ppo", "--seed", "0", "--preset", "cpu", "--out", str(out)]
    if transient:
        assert train.main(argv) == train.EXIT_TEMPFAIL
        assert not (out / run_layout.FAILURE_RECORD).exists()  # the SLURM retry goes ahead
    else:
        with pytest.raises(OSError):
            train.main(argv)
        assert "Permission denied" in json.loads((out / run_layout.FAILURE_RECORD).read_text())["error"]


def test_pyarrow_errors_without_errno_are_read_by_their_text():
    assert train.is_transient(OSError("Failed to write: No space left on device"))
    assert not train.is_transient(OSError("Parquet magic bytes not found"))


# ---- 14: leftovers of interrupted atomic writes ------------------------------------------------

def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


def test_leftovers_of_a_dead_writer_are_removed_by_the_next_write_and_a_live_ones_kept(tmp_path):
    host, dead = atomic._host(), _dead_pid()
    (tmp_path / f".run.json.{dead}@{host}.x1.tmp").write_text("half")
    (tmp_path / f".run.json.{os.getpid()}@{host}.x2.tmp").write_text("being written")
    (tmp_path / f".episodes.parquet.{dead}@{host}.x3.tmp").write_text("half")
    (tmp_path / f".staging-{dead}@{host}.x4").mkdir()
    atomic.write_text(tmp_path / "run.json", "{}")  # cleans its own name's leftovers only
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        f".run.json.{os.getpid()}@{host}.x2.tmp", f".episodes.parquet.{dead}@{host}.x3.tmp",
        f".staging-{dead}@{host}.x4", "run.json"])
    assert sorted(atomic.remove_leftovers(tmp_path)) == [f".episodes.parquet.{dead}@{host}.x3.tmp",
                                                         f".staging-{dead}@{host}.x4"]


def test_the_trainer_and_the_engine_remove_leftovers_in_their_folders(tmp_path, capsys):
    host, dead = atomic._host(), _dead_pid()
    folder = complete_run(tmp_path / "run", config=tiny_config("circle", 25.0, "ppo", 0))
    (folder / f".episodes.parquet.{dead}@{host}.a.tmp").write_text("half")
    assert train.run_pack([_member(folder)], quiet=True) == 0  # complete already: nothing trains
    assert not list(folder.glob(".*.tmp"))
    out = tmp_path / "metrics"
    (out / f".staging-{dead}@{host}.b").mkdir(parents=True)
    path = _csv(tmp_path / "ep.csv", [f"a,25,ppo,{s},train,0,{e},1,2" for s in (0, 1) for e in (0, 1)])
    assert metrics_cli.main(["evaluate", str(path), "--out", str(out), "--reps", "10"]) == 0
    assert not list(out.glob(".staging-*"))


@pytest.mark.slow
def test_the_report_command_builds_a_page_from_the_stage_files(tiny_sweep, tmp_path):
    """python -m workflow.report OUT --iqm --tiers --conditions [--config]: the report alone."""
    from workflow import report

    metrics_dir = tiny_sweep / "results-tiny" / "metrics"
    config = tmp_path / "config.yaml"
    config.write_text("preset: tiny\n")
    out = tmp_path / "report.html"
    report.main([str(out), "--iqm", str(metrics_dir / "iqm.csv"), "--tiers", str(metrics_dir / "tiers.csv"),
                 "--conditions", str(metrics_dir / "conditions.csv"), "--config", str(config)])
    page = out.read_text()
    assert page.lstrip().lower().startswith("<!doctype html><html") and page.rstrip().endswith("</html>")
    assert "preset <b>tiny</b>" in page
    assert "1 task (Circle) x 2 bounds (15, 25) x 2 algorithms (PPO, PPO-Lag) x 2 seeds = 8 runs" in page
    # Table 2 as the paper lays it out: per algorithm and phase, IQM [95 % CI] of V, Dnorm, Dnorm+
    # and the tier with P(tier), each cell the stage files' values
    header, rows = report_tables(page)["Table 2: how safe each algorithm is, in training and deployed"]
    phases = {"train": "Training (with noise)", "final_explore": "Final, with noise", "final_greedy": "Final, greedy"}
    assert header[:4] == ["Algorithm"] + list(phases.values())
    assert header[4:] == ["V", "Dnorm", "Dnorm+", "Tier"] * 3
    iqm = pd.read_csv(metrics_dir / "iqm.csv").set_index(["algo", "phase", "metric"])
    tiers = pd.read_csv(metrics_dir / "tiers.csv").set_index(["algo", "phase"])
    names = {"PPO": "ppo", "PPO-Lag": "ppo_lag"}
    assert sorted(row[0] for row in rows) == sorted(names)
    two = lambda x: f"{x:.2f}".replace("-0.00", "0.00")  # noqa: E731
    for row in rows:
        algo, cells = names[row[0]], iter(row[1:])
        for phase in phases:
            for metric in ("V", "Dnorm", "Dnorm_plus"):
                v = iqm.loc[(algo, phase, metric)]
                assert next(cells) == f"{two(v.iqm)}[{two(v.ci_low)}, {two(v.ci_high)}]", (algo, phase, metric)
            t = tiers.loc[(algo, phase)]
            tier = int(t.tier)
            name = ["Unsafe", "Minimal", "Moderate", "Substantial", "Strict"][tier]
            assert next(cells) == f"{tier} {name}P = {t[f'p_tier{tier}']:.2f}", (algo, phase)
    # the engine's files themselves are links
    for name in ("iqm.csv", "tiers.csv", "conditions.csv"):
        assert f"href='{os.path.relpath(metrics_dir / name, tmp_path)}'" in page
    tiers = pd.read_csv(metrics_dir / "tiers.csv")
    assert set(tiers["algo"]) == {"ppo", "ppo_lag"}  # the tiny sweep's algorithms, each with its tier rows


def report_tables(page: str) -> dict:
    """{h2 heading: (header cells, rows of cells)} of the first table after each heading."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found, self.heading, self.text, self.row, self.table = {}, None, None, None, None

        def handle_starttag(self, tag, attrs):
            if tag in ("h2", "td", "th"):
                self.text = ""
            elif tag == "table" and self.heading and self.heading not in self.found:
                self.table = ([], [])
            elif tag == "tr" and self.table is not None:
                self.row = []

        def handle_data(self, data):
            if self.text is not None:
                self.text += data

        def handle_endtag(self, tag):
            if tag == "h2":
                self.heading, self.text = self.text.strip(), None
            elif tag in ("td", "th") and self.row is not None:
                self.row.append((tag, self.text.strip()))
                self.text = None
            elif tag == "tr" and self.table is not None and self.row is not None:
                if all(kind == "th" for kind, _ in self.row):
                    self.table[0].extend(text for _, text in self.row)
                else:
                    self.table[1].append([text for _, text in self.row])
                self.row = None
            elif tag == "table" and self.table is not None:
                self.found[self.heading], self.table = self.table, None

    parser = Tables()
    parser.feed(page)
    return parser.found
