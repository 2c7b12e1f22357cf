"""workflow.interrupt's parts: which processes the controller signals, which runs it counts,
its one line (the whole path runs in tests/test_faults_disk_clock_signals.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from runs import checkpoint, run_layout
from workflow import interrupt


def test_job_wrappers_and_scripts_are_signalled_trainers_and_shells_are_not(tmp_path):
    sleep = "import time; time.sleep(60)"
    # as Snakemake runs a job: a shell whose command is a Python process (the wrapper, or a
    # script), and beside it a trainer (the wrapper's child, which the wrapper signals)
    parent = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys, time
subprocess.Popen(["bash", "-c", "set -e; {sys.executable} -c '{sleep}' workflow.train_job; true"])
subprocess.Popen([sys.executable, "-c", "{sleep}", "-m", "runs.train"])
time.sleep(60)
"""])
    try:
        deadline = time.monotonic() + 30
        while len(psutil.Process(parent.pid).children(recursive=True)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        chosen = [" ".join(p.cmdline()) for p in interrupt.job_processes(parent.pid)]
        assert len(chosen) == 1 and chosen[0].endswith("workflow.train_job"), chosen
        signalled = interrupt.stop_job_processes(parent.pid)
        gone, alive = psutil.wait_procs(signalled, timeout=30)
        assert len(gone) == 1 and alive == []
        assert interrupt.stop_job_processes(parent.pid, skip=signalled) == set()  # nothing new to stop
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()


def test_the_runs_counted_are_those_a_rerun_resumes(tmp_path):
    folders = [tmp_path / name for name in ("resumable", "complete", "untouched")]
    for f in folders:
        f.mkdir()
    for f in folders[:2]:
        (f / run_layout.CHECKPOINT_DIR).mkdir()
        (f / run_layout.CHECKPOINT_DIR / checkpoint.META.format(slot=checkpoint.SLOTS[0])).write_text("{}")
    (folders[1] / run_layout.RUN_JSON).write_text("{}")
    assert interrupt.checkpointed(map(str, folders)) == [str(folders[0])]


def test_a_folder_is_held_while_its_job_lives(tmp_path):
    from runs import runlock

    live, ended, dead = (tmp_path / n for n in ("live", "ended", "dead"))
    for f in (live, ended, dead):
        f.mkdir()
    mine = runlock.this_job()
    (live / run_layout.JOB_MARKER).write_text(json.dumps(mine))
    (ended / run_layout.JOB_MARKER).write_text(json.dumps(dict(mine, ended=time.time())))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (dead / run_layout.JOB_MARKER).write_text(json.dumps(dict(mine, pid=int(gone.stdout))))
    assert interrupt.held([str(live), str(ended), str(dead)]) == [str(live)]


@pytest.mark.parametrize("signum, resumable, busy, line", [
    (signal.SIGINT, 4, 0, "Stopped by SIGINT: 4 runs checkpointed; run the same command again to resume them."),
    (signal.SIGTERM, 1, 0, "Stopped by SIGTERM: 1 run checkpointed; run the same command again to resume it."),
    (signal.SIGINT, 0, 0, "Stopped by SIGINT: no run was checkpointed; run the same command again to go on."),
    (signal.SIGTERM, 2, 1, "Stopped by SIGTERM: 2 runs checkpointed; run the same command again to resume them. "
                           "(1 run folder still locked by jobs that are ending.)"),
])
def test_the_one_line(signum, resumable, busy, line):
    assert interrupt.summary(signum, resumable, busy) == line


def test_report_exits_128_plus_the_signal_and_does_nothing_after_another_failure(tmp_path, capsys, monkeypatch):
    interrupt.report([str(tmp_path)])  # not stopped by a signal: Snakemake reports its own error
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(interrupt._state, "signal", signal.SIGTERM)
    with pytest.raises(SystemExit) as stop:
        interrupt.report([str(tmp_path)], wait_s=0)
    assert stop.value.code == 143
    assert capsys.readouterr().err == "Stopped by SIGTERM: no run was checkpointed; run the same command again to go on.\n"
    assert os.path.isdir(tmp_path)


def test_a_cancelled_slurm_jobs_folder_is_let_go_once_squeue_no_longer_lists_it(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "squeue").write_text('#!/bin/sh\ncat "$FAKE_SQUEUE_STATE"\n')  # `squeue -h -j ID -o %T`
    (fake / "squeue").chmod(0o755)
    state = tmp_path / "state"
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SQUEUE_STATE", str(state))
    run = tmp_path / "run"
    run.mkdir()
    (run / run_layout.JOB_MARKER).write_text(json.dumps({"host": "node7", "pid": 1, "slurm_job_id": "42"}))
    state.write_text("COMPLETING\n")  # scancel's SIGTERM: the trainer is writing its checkpoint
    assert interrupt.held([str(run)]) == [str(run)]
    state.write_text("")
    assert interrupt.held([str(run)]) == []


def test_sigterm_to_a_controller_running_as_a_slurm_job_is_left_to_snakemake():
    # its time limit: the cluster jobs go on and the relaunched controller takes them over
    assert interrupt.stop_signals({"SLURM_JOB_ID": "17"}) == (signal.SIGINT,)
    assert interrupt.stop_signals({}) == (signal.SIGINT, signal.SIGTERM)


def test_a_second_ctrl_c_ends_the_wait_for_the_jobs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(interrupt._state, "signal", signal.SIGINT)
    monkeypatch.setattr(interrupt, "held", lambda folders: list(folders))  # a job that never lets go
    previous = {s: signal.getsignal(s) for s in interrupt.STOP_SIGNALS}
    interrupt.install()
    try:
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        with pytest.raises(SystemExit) as stop:
            interrupt.report([str(tmp_path)], wait_s=120)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert stop.value.code == 130 and time.monotonic() - started < 30
    assert capsys.readouterr().err == ("Stopped by SIGINT: no run was checkpointed; run the same command again to "
                                       "go on. (1 run folder still locked by jobs that are ending.)\n")
