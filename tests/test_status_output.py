"""What `python -m workflow.status` prints: totals over the whole sweep whatever --only lists,
a sweep not started yet in one line, and a failed run's reason before its log."""
from __future__ import annotations

import json
from pathlib import Path

from fake_runs import complete_run
from runs import run_layout
from workflow import config_validation as cv
from workflow import status

DEAD_JOB = {"host": "elsewhere", "pid": 1, "log": "results-tiny/logs/train/circle_ppo_p0.log"}


def tiny_sweep_folder(workdir: Path) -> list[tuple]:
    """A tiny-preset sweep folder whose eight runs are complete (no training); their keys."""
    keys = status.run_keys(cv.resolve({"preset": "tiny"}))
    for task, bound, algo, seed in keys:
        complete_run(run_layout.run_dir(workdir, task, bound, algo, seed, "results-tiny"), task, float(bound), algo,
                     seed)
    return keys


def fail_run(workdir: Path, key: tuple, log_line: str, error: str | None = None) -> Path:
    """Make one complete run a failed one: its episodes gone, a marker of a job that ended, the
    pack's log ending in `log_line`, and the trainer's failure record when `error` is given."""
    folder = run_layout.run_dir(workdir, *key, "results-tiny")
    (folder / run_layout.EPISODES).unlink()
    (folder / run_layout.JOB_MARKER).write_text(json.dumps(DEAD_JOB))
    log = workdir / DEAD_JOB["log"]
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"compiling\n{log_line}\n")
    if error is not None:
        (folder / run_layout.FAILURE_RECORD).write_text(json.dumps({"error": error}))
    return folder


def run_status_command(workdir: Path, capsys, *args: str) -> list[str]:
    assert status.main(["--preset", "tiny", "--dir", str(workdir), *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_only_lists_the_chosen_states_but_counts_every_run(tmp_path, capsys):
    keys = tiny_sweep_folder(tmp_path)
    fail_run(tmp_path, keys[0], "update 3/10")
    lines = run_status_command(tmp_path, capsys, "--only", "failed,running")
    failed_run = run_layout.run_id(*keys[0])
    assert [line.split()[0] for line in lines[2:-1]] == [failed_run]  # headline, header, the one row
    assert lines[-1] == "7 done, 0 running, 1 failed, 0 missing of 8 runs"
    lines = run_status_command(tmp_path, capsys, "--only", "running")
    assert lines[-1] == "7 done, 0 running, 1 failed, 0 missing of 8 runs" and len(lines) == 3


def test_a_sweep_not_started_is_one_line_not_a_row_per_run(tmp_path, capsys):
    lines = run_status_command(tmp_path, capsys)
    assert lines[1:] == ["not started: all 8 runs missing (no job has run in this sweep's folder); "
                         "the sweep's command starts them", "0 done, 0 running, 0 failed, 8 missing of 8 runs"]
    # --json still gives one object per run, for scripts
    assert status.main(["--preset", "tiny", "--dir", str(tmp_path), "--json"]) == 0
    assert [json.loads(l)["state"] for l in capsys.readouterr().out.splitlines()] == ["missing"] * 8


def test_the_paper_sweep_not_started_prints_three_lines(tmp_path, capsys):
    assert status.main(["--preset", "paper", "--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[-1] == "0 done, 0 running, 0 failed, 1440 missing of 1440 runs"


def test_one_run_started_lists_every_run(tmp_path, capsys):
    cfg = cv.resolve({"preset": "tiny"})
    key = status.run_keys(cfg)[0]
    complete_run(run_layout.run_dir(tmp_path, *key, "results-tiny"), key[0], float(key[1]), key[2], key[3])
    lines = run_status_command(tmp_path, capsys)
    assert len(lines) == 2 + 8 + 1 and lines[-1] == "1 done, 0 running, 0 failed, 7 missing of 8 runs"


def test_a_failed_run_states_the_recorded_error_first_and_the_log_line_last(tmp_path, capsys):
    keys = tiny_sweep_folder(tmp_path)
    fail_run(tmp_path, keys[0], "Traceback (most recent call last):", error="RuntimeError: boom")
    got = status.sweep_status(cv.resolve({"preset": "tiny"}), tmp_path)[0]
    assert got.state == "failed"
    assert got.detail == ("error: RuntimeError: boom; incomplete: episodes.parquet missing; "
                          "the log's last line: Traceback (most recent call last):")
    row = run_status_command(tmp_path, capsys, "--only", "failed")[2]
    assert row.index("error: RuntimeError: boom") < row.index(DEAD_JOB["log"])


def test_a_failed_run_without_a_record_says_its_job_ended_before_the_log_line(tmp_path):
    keys = tiny_sweep_folder(tmp_path)
    fail_run(tmp_path, keys[0], "update 3/10: 412 env steps/s")
    got = status.sweep_status(cv.resolve({"preset": "tiny"}), tmp_path)[0]
    assert got.detail == ("its job (pid 1 on elsewhere) ended before the run was complete; "
                          "incomplete: episodes.parquet missing; the log's last line: update 3/10: 412 env steps/s")
