"""workflow.console: what the controller's console says about each training pack, from the
pack's log, on a fake clock (the sweep test in tests/test_faults_disk_clock_signals.py sees the
lines of a real sweep)."""
from __future__ import annotations

import logging

from workflow import console

COMPILE = "[circle/d15/ppo/seed0 +3] compiling: 4 runs, a sequential program of 4 slots"
TRAIN = "[circle/d15/ppo/seed0 +3] training: programs loaded in 1.2 s"
PROGRESS = "[circle/d15/ppo/seed0 +3] 4 runs | update {u}/128 | 0.03M/0.07M steps | 17,231 steps/s | ETA 00:00:02"


def record(event: str, **fields) -> logging.LogRecord:
    rec = logging.LogRecord("snakemake.logging", logging.INFO, __file__, 0, "", None, None)
    rec.__dict__.update(event=event, **fields)
    return rec


def watcher(tmp_path):
    said = []
    w = console.Watcher(lambda rule: str(tmp_path / f"{rule}.log"), said.append)
    return w, said


def test_phases_are_said_at_once_and_progress_at_most_every_ten_seconds(tmp_path):
    (tmp_path / "train_p0.log").write_text("earlier attempt: not this job's\n")
    w, _ = watcher(tmp_path)
    assert w.filter(record("LogEvent.JOB_INFO", rule_name="train_p0", jobid=7)) is True  # drops nothing
    w.filter(record("LogEvent.JOB_INFO", rule_name="summarise_p0", jobid=8))  # not a training job
    log = tmp_path / "train_p0.log"
    start = w.packs[7].started
    with open(log, "a") as f:
        f.write("train_job: circle/d15/ppo/seed0: run folder lock taken\n" + COMPILE + "\n" + TRAIN + "\n"
                + PROGRESS.format(u=1) + "\n" + PROGRESS.format(u=2) + "\n[circle/d15/ppo/seed0 +3] 4 ru")
    assert w.poll(start + 1) == ["train_p0: compiling (4 runs, a sequential program of 4 slots)",
                                 "train_p0: training (programs loaded in 1.2 s)",
                                 "train_p0: " + PROGRESS.format(u=1)[len("[circle/d15/ppo/seed0 +3] "):]]
    with open(log, "a") as f:  # the half-written line is read whole once it ends
        f.write("ns | update 54/128 | 0.03M/0.07M steps | 17,231 steps/s | ETA 00:00:02\n")
    assert w.poll(start + 5) == []  # within ten seconds of the last progress line said
    with open(log, "a") as f:
        f.write(PROGRESS.format(u=60) + "\n")
    assert w.poll(start + 11.5) == ["train_p0: " + PROGRESS.format(u=60)[len("[circle/d15/ppo/seed0 +3] "):]]
    w.filter(record("LogEvent.JOB_FINISHED", job_id=7))
    assert w.packs == {} and w.poll(start + 100) == []


def test_a_silent_pack_is_heard_from_every_25_seconds_saying_what_it_does(tmp_path):
    w, _ = watcher(tmp_path)
    w.filter(record("LogEvent.JOB_INFO", rule_name="train_p0", jobid=1))
    start, log = w.packs[1].started, tmp_path / "train_p0.log"
    assert w.poll(start + 24) == []
    assert w.poll(start + 25) == ["train_p0: started 25 s ago, no output yet (queued, or starting Python)"]
    log.write_text(COMPILE + "\n")
    assert w.poll(start + 30) == ["train_p0: compiling (4 runs, a sequential program of 4 slots)"]
    assert w.poll(start + 54) == []
    assert w.poll(start + 55) == ["train_p0: compiling for 25 s"]
    with open(log, "a") as f:
        f.write(TRAIN + "\n" + PROGRESS.format(u=1) + "\n")
    w.poll(start + 60)
    assert w.poll(start + 85) == ["train_p0: 4 runs | update 1/128 | 0.03M/0.07M steps | 17,231 steps/s | "
                                  "ETA 00:00:02 (as of 25 s ago)"]
    # the longest silence of a running pack: HEARTBEAT_S plus one poll
    assert console.HEARTBEAT_S + console.POLL_S <= 30


def test_a_stop_and_a_failed_run_are_said(tmp_path):
    w, _ = watcher(tmp_path)
    w.filter(record("LogEvent.JOB_INFO", rule_name="train_p0", jobid=1))
    (tmp_path / "train_p0.log").write_text(
        "[circle/d15/ppo/seed1] failed: training diverged (NaN/inf multiplier or cost) at update 3\n"
        "[runs.train] SIGTERM: checkpoints written, exiting 75\n")
    assert w.poll(w.packs[1].started + 1) == [
        "train_p0: circle/d15/ppo/seed1 failed: training diverged (NaN/inf multiplier or cost) at update 3",
        "train_p0: SIGTERM: checkpoints written, exiting 75"]
    w.filter(record("LogEvent.JOB_ERROR", jobid=1))
    assert w.packs == {}


def test_a_log_snakemake_replaces_when_the_job_starts_is_read_from_its_start(tmp_path):
    log = tmp_path / "train_p0.log"
    log.write_text("[circle/d15/ppo/seed0 +3] training: the previous sweep's\n" * 40)
    w, _ = watcher(tmp_path)
    w.filter(record("LogEvent.JOB_INFO", rule_name="train_p0", jobid=1))
    log.unlink()  # Snakemake removes a job's old log before running it
    log.write_text(COMPILE + "\n")
    assert w.poll(w.packs[1].started + 1) == ["train_p0: compiling (4 runs, a sequential program of 4 slots)"]


def test_the_console_gap_benchmark_measures_each_packs_longest_silence():
    from benchmarks import console_gaps

    stamped = [(0.0, "localrule train_p0:"), (1.0, "localrule summarise_p0:"), (3.0, "train_p0: compiling (4 runs)"),
               (28.5, "train_p0: compiling for 25 s"), (30.0, "train_p1: compiling (2 runs)"),
               (40.0, "Finished jobid: 3 (Rule: train_p0)")]
    assert console_gaps.gaps(stamped) == {"train_p0": (40.0, 4, 25.5), "train_p1": (0.0, 1, 0.0)}
