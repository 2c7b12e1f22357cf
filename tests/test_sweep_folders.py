"""Each sweep has its own results folder (workflow.sweep): results/ for the default preset,
results-<preset>/ for the others, `results_dir` for a user config; a folder records which
config made it (sweep.json); a folder holding another sweep's runs is named as such by the dry
run and by status, never listed as failed; every command names its sweep and folder first and
takes `--preset NAME` as well as `--config preset=NAME`."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_runs import complete_run
from metrics.safe_text import read_csv
from runs import runfolder, run_layout
from test_dry_run import state_of, tiny_sweep_folder
from workflow import config_validation as cv
from workflow import joblog, plan, sweep

REPO = Path(__file__).resolve().parent.parent
LOCAL = str(REPO / "cluster_profiles" / "local")


def run(cwd, *args, env=None):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def snakemake(cwd, *args):
    return run(cwd, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), *args)


def status(cwd, *args):
    return run(REPO, "-m", "workflow.status", "--dir", str(cwd), *args)


def test_every_preset_has_its_own_folder_and_a_user_config_may_name_one():
    folders = {name: sweep.results_dir(cv.resolve({"preset": name})) for name in cv.available_presets()}
    assert folders["default"] == "results" and folders["tiny"] == "results-tiny" and folders["paper"] == "results-paper"
    assert len(set(folders.values())) == len(folders)
    assert sweep.results_dir(cv.resolve({"preset": "tiny", "results_dir": "sweeps/mine/"})) == "sweeps/mine"
    for bad in ("../up", "/abs", ".hidden", "a b"):
        with pytest.raises(cv.ConfigError, match="config key 'results_dir'"):
            cv.resolve({"preset": "tiny", "results_dir": bad})


def test_the_training_hash_leaves_out_threads_pack_size_and_the_grid():
    tiny = cv.resolve({"preset": "tiny"})
    same = cv.resolve({"preset": "tiny", "seeds": 5, "train": {"threads": 3, "pack_size": 2},
                       "thresholds": {"moderate": {"V": 0.3}}})
    assert sweep.training_hash(tiny) == sweep.training_hash(same)
    assert sweep.training_hash(tiny) != sweep.training_hash(cv.resolve({"preset": "tiny", "train": {"total_steps": 8192}}))


def test_a_legacy_results_folder_of_the_tiny_preset_is_another_sweep_for_default_status_and_dry_run(tmp_path):
    """results/ filled by the tiny preset before each preset had its own folder."""
    tiny_sweep_folder(tmp_path)
    shutil.move(tmp_path / "results-tiny", tmp_path / "results")
    before = state_of(tmp_path)

    got = status(tmp_path)  # the default preset
    assert got.returncode == 1
    assert got.stdout.splitlines()[0].startswith("sweep default in results/ (96 runs")
    assert "results/ holds runs of another sweep (the tiny preset" in got.stderr
    assert "mv results results-tiny" in got.stderr and "failed" not in got.stdout + got.stderr

    dry = snakemake(tmp_path, "-n", "--cores", "1")
    assert dry.returncode != 0 and "holds runs of another sweep (the tiny preset" in dry.stdout + dry.stderr
    assert "sweep default in results/" in dry.stdout + dry.stderr
    assert state_of(tmp_path) == before

    # the fix the message gives; then the tiny sweep's status finds its runs done
    shutil.move(tmp_path / "results", tmp_path / "results-tiny")
    ok = status(tmp_path, "--preset", "tiny")
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1] == "8 done, 0 running, 0 failed, 0 missing of 8 runs"


def test_sweep_json_of_another_preset_is_refused_and_another_config_of_the_same_preset_is_named(tmp_path):
    tiny_sweep_folder(tmp_path)
    tiny = cv.resolve({"preset": "tiny"})
    sweep.write_record(tiny, tmp_path)
    assert sweep.check(tiny, tmp_path).kind == "same"
    mine = cv.resolve({"preset": "default", "results_dir": "results-tiny"})
    other = sweep.check(mine, tmp_path)
    assert other.kind == "other" and "holds runs of another sweep (preset tiny, sweep.json)" in other.message
    changed = cv.resolve({"preset": "tiny", "train": {"total_steps": 8192}})
    verdict = sweep.check(changed, tmp_path)
    assert verdict.kind == "changed" and "train.total_steps 16384 -> 8192" in verdict.message
    got = status(tmp_path, "--config", "preset=tiny", "train.total_steps=8192")
    assert got.returncode == 0 and "train.total_steps 16384 -> 8192" in got.stdout
    assert got.stdout.splitlines()[-1] == "0 done, 0 running, 0 failed, 8 stale, 0 missing of 8 runs"
    assert "failed    " not in got.stdout


def test_status_takes_the_preset_both_ways_and_names_it_first(tmp_path):
    a, b = status(tmp_path, "--preset", "tiny"), status(tmp_path, "--config", "preset=tiny")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    assert a.stdout.startswith("sweep tiny in results-tiny/ (8 runs, training config ")
    assert not any(tmp_path.iterdir())  # status writes nothing


def test_a_complete_run_of_another_config_is_stale_not_failed(tmp_path):
    folder = complete_run(run_layout.run_dir(tmp_path, "circle", 25, "ppo", 0, "results-tiny"))
    (folder / run_layout.JOB_MARKER).write_text('{"host": "elsewhere", "pid": 1, "log": "x.log"}')  # its job ended
    cfg = cv.resolve({"preset": "tiny", "train": {"total_steps": 8192}, "bounds": [25], "algos": ["ppo"], "seeds": [0]})
    from workflow import status as st

    [got] = st.sweep_status(cfg, tmp_path)
    assert got.state == "stale" and "trained with another config (fields ['total_steps'])" in got.detail


def test_plan_has_help_and_takes_the_preset(tmp_path):
    helped = run(tmp_path, "-m", "workflow.plan", "--help", env={"PYTHONPATH": str(REPO)})
    assert helped.returncode == 0 and "python -m workflow.plan [--preset NAME]" in helped.stdout
    assert "nothing to do" not in helped.stdout
    planned = run(tmp_path, "-m", "workflow.plan", "--preset", "tiny", "runs", env={"PYTHONPATH": str(REPO)})
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert lines[0].startswith("sweep tiny in results-tiny/") and "train_circle_ppo_p0" in planned.stdout
    assert not any(p.name.startswith("results") for p in tmp_path.iterdir())  # a dry run makes no folder


def test_launch_takes_the_preset_both_ways(capsys):
    from workflow import launch

    profile = str(REPO / "cluster_profiles" / "slurm")
    assert launch.main(["--profile", profile, "--preset", "tiny", "--dry-run"]) == 0
    first = capsys.readouterr().out
    assert launch.main(["--profile", profile, "--config", "preset=tiny", "--dry-run"]) == 0
    assert capsys.readouterr().out == first and first.startswith("sweep tiny in results-tiny/")


def test_long_job_file_lists_are_cut_and_short_ones_kept():
    short = [f"f{i}" for i in range(joblog.MAX_FILES)]
    assert joblog.shorten_files(short) == short
    long = [f"f{i}" for i in range(270)]
    assert joblog.shorten_files(long) == ["f0", "f1", "f2", "... (264 more)", "f267", "f268", "f269"]
    reason = "Missing output files: " + ", ".join(long)
    assert len(joblog.shorten_reason(reason)) <= joblog.MAX_REASON + 40


@pytest.mark.slow
def test_the_paper_dry_run_plans_16_packs_in_a_short_listing(tmp_path):
    proc = snakemake(tmp_path, "-n", "--workflow-profile", str(REPO / "cluster_profiles" / "slurm"),
                     "--config", "preset=paper")
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "sweep paper in results-paper/ (1440 runs" in log
    assert len(plan.parse_jobs(log)) > 16 and sum(j.rule.startswith("train_") for j in plan.parse_jobs(log)) == 16
    assert len(log) < 200_000  # was 2.6 MB: every pack's 270 outputs listed whole
    assert not (tmp_path / "results-paper").exists()


def readme_threshold_example() -> tuple[str, list[str]]:
    """README's my-thresholds.yaml (the code block after 'holding') and its tiny-sweep command's
    arguments after `snakemake`."""
    text = (REPO / "README.md").read_text()
    content = re.search(r"With `my-thresholds.yaml` holding\n\n```\n(.*?)```", text, re.S).group(1)
    command = re.search(r"`snakemake (results-tiny/tables/table2.md [^`]*)`", text).group(1)
    return content, shlex.split(command)


def tier_table(folder: Path) -> dict:
    """{(algo, phase): tier} of a sweep's tiers.csv."""
    tiers = read_csv(folder / "metrics" / "tiers.csv")
    return {(a, p): int(t) for a, p, t in zip(tiers["algo"], tiers["phase"], tiers["tier"])}


@pytest.mark.slow
def test_the_whole_story_tiny_sweep_then_a_threshold_change_then_other_presets_touch_nothing_else(tiny_sweep, tmp_path):
    """README's threshold command on the tiny sweep (as README shows it, and the tier it moves), then the default and
    paper presets' dry runs and status: each names its own sweep and folder and none touches
    the tiny sweep's files; the default sweep's folder is not even created."""
    work = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, work, symlinks=True)
    assert sweep.read_record(work / "results-tiny")["preset"] == "tiny"  # written by the real run
    content, command = readme_threshold_example()
    assert content == "thresholds: {moderate: {V: 0.3}}\n"
    (work / "my-thresholds.yaml").write_text(content)
    rebuilt = snakemake(work, *(LOCAL if arg == "cluster_profiles/local" else arg for arg in command))  # the clone's profile
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    log = rebuilt.stdout + rebuilt.stderr
    assert "sweep tiny in results-tiny/" in log and not any(r in log for r in ("rule train_", "rule aggregate"))
    assert "V: 0.3" in (work / "results-tiny" / "metrics" / "thresholds.yaml").read_text()
    # what README says the change does: the tiny sweep's algorithms differ (ppo's final policy with
    # exploration noise tier 2, ppo_lag's tier 4) and moderate's V <= 0.3 moves ppo's to tier 1
    before = tier_table(tiny_sweep / "results-tiny")
    after = tier_table(work / "results-tiny")
    assert (before["ppo", "final_explore"], before["ppo_lag", "final_explore"]) == (2, 4)
    assert (after["ppo", "final_explore"], after["ppo_lag", "final_explore"]) == (1, 4)
    iqm = read_csv(work / "results-tiny" / "metrics" / "iqm.csv").query("metric == 'V'").set_index(["algo", "phase"])["iqm"]
    moved = {row for row in before if before[row] != after[row]}
    assert moved and all(before[row] == 2 and after[row] == 1 and 0.3 < iqm[row] <= 0.5 for row in moved), (before, after)
    assert all(after[row] == 1 for row in before if before[row] == 2 and iqm[row] > 0.3)  # every one it should move

    before = state_of(work)
    for preset, folder, runs in (("default", "results", 96), ("paper", "results-paper", 1440)):
        dry = snakemake(work, "-n", "--workflow-profile", LOCAL, "--config", f"preset={preset}")
        assert dry.returncode == 0, dry.stderr[-2000:]
        text = dry.stdout + dry.stderr
        assert f"sweep {preset} in {folder}/ ({runs} runs" in text and "other sweeps here: results-tiny/ (tiny)" in text
        got = status(work, "--preset", preset)
        assert got.returncode == 0 and got.stdout.startswith(f"sweep {preset} in {folder}/")
        assert got.stdout.splitlines()[-1] == f"0 done, 0 running, 0 failed, {runs} missing of {runs} runs"
        assert not (work / folder).exists()
    assert state_of(work) == before
