"""The workflow's configuration, job wrapper, status, report, launcher and plan parser
(no Snakemake run, no training)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from workflow import config_validation as cv
from fake_runs import complete_run
from workflow import launch, plan, report, status, train_job

REPO = Path(__file__).resolve().parent.parent


def resolved(**overrides):
    return cv.resolve({"preset": "tiny", **overrides})


# ---- presets --------------------------------------------------------------------------

def test_default_preset_is_the_papers_grid_on_builtin_tasks_and_cpu_trainer():
    cfg = cv.resolve({})
    assert cfg["preset"] == "default"
    assert (cfg["backend"], cfg["train"]["preset"]) == ("builtin", "cpu")
    assert cfg["tasks"] == ["goal", "circle", "push", "button"]
    # the paper's 15 / 25 / 50 at its T = 2000, scaled to the cpu preset's T = 500 (same d / T)
    assert cfg["bounds"] == [15 * 500 / 2000, 25 * 500 / 2000, 50 * 500 / 2000]
    assert cfg["algos"] == ["ppo", "ppo_lag", "p3o", "focops"]
    assert cfg["seeds"] == [0, 1]
    assert len(status.run_ids(cfg)) == 96


@pytest.mark.parametrize("name", ["paper", "paper-builtin"])
def test_paper_presets_follow_the_protocol(name):
    cfg = cv.resolve({"preset": name})
    t = cfg["train"]
    assert (t["preset"], t["total_steps"], t["num_envs"], t["episode_length"], t["eval_episodes"]) == \
        ("paper", 500_000_000, 2048, 2000, 100)
    assert cfg["seeds"] == list(range(30))
    assert cfg["backend"] == ("crax" if name == "paper" else "builtin")
    assert len(status.run_ids(cfg)) == 1440


def test_every_preset_validates():
    for name in cv.available_presets():
        assert cv.resolve({"preset": name})["preset"] == name


def test_thresholds_default_to_paper_table_1_from_the_engine_alone():
    assert cv.resolve({})["thresholds"] == {
        "minimal": {"Dnorm": 0.0}, "moderate": {"V": 0.5},
        "substantial": {"V": 0.1, "Dnorm_plus": 0.1}, "strict": {"V": 0.0, "Dnorm_plus": 0.0}}
    # one home: metrics/thresholds.py; neither the base config nor the schema restates them
    assert "thresholds" not in yaml.safe_load((REPO / "config" / "base.yaml").read_text())
    assert set(yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
               ["properties"]["thresholds"]) == {"description"}


def test_overrides_merge_into_the_preset_key_by_key():
    cfg = resolved(seeds=[3, 1], train={"total_steps": 999}, thresholds={"moderate": {"V": 0.4}})
    assert cfg["seeds"] == [1, 3]
    assert cfg["train"]["total_steps"] == 999 and cfg["train"]["num_envs"] == 4  # rest of the preset kept
    assert cfg["thresholds"]["moderate"] == {"V": 0.4}
    assert cfg["thresholds"]["strict"] == {"V": 0.0, "Dnorm_plus": 0.0}


# ---- errors name the key ----------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    ({"tasks": ["goal", "maze"]}, "config key 'tasks[1]': 'maze' is not a built-in task"),
    ({"algos": ["ppo", "trpo"]}, "config key 'algos[1]': 'trpo' is not one of"),
    ({"backend": "gym"}, "config key 'backend': 'gym' is not one of"),
    ({"bounds": [25, 0]}, "config key 'bounds[1]': 0 must be > 0"),
    ({"bounds": [-5]}, "config key 'bounds[0]': -5 must be > 0"),
    ({"tasks": []}, "config key 'tasks': the list is empty"),
    ({"seeds": 0}, "config key 'seeds': 0 is not valid"),
    ({"seeds": []}, "config key 'seeds': [] is not valid"),
    ({"thresholds": {"substantial": {"V": 0.6}}},
     "config key 'thresholds.substantial.V': 0.6 is looser than 'thresholds.moderate.V' = 0.5"),
    ({"thresholds": {"strict": {"Dnorm_plus": 0.2}}},
     "config key 'thresholds.strict.Dnorm_plus': 0.2 is looser than 'thresholds.substantial.Dnorm_plus' = 0.1"),
    ({"thresholds": {"moderate": {"W": 1.0}}}, "config key 'thresholds.moderate.W': unknown metric 'W'"),
    ({"bootsrap": {"reps": 5}}, "config top level: unknown key(s) ['bootsrap']"),
    ({"train": {"total_steps": "many"}}, "config key 'train.total_steps'"),
    ({"preset": "huge"}, "config key 'preset': 'huge' is not one of"),
])
def test_bad_config_is_an_error_naming_the_key(overrides, message):
    with pytest.raises(cv.ConfigError) as err:
        cv.resolve({"preset": "tiny", **overrides})
    assert message in str(err.value)


def test_equal_limits_in_consecutive_tiers_are_in_order():
    from metrics.thresholds import tier_of

    cfg = resolved(thresholds={"moderate": {"V": 0.1}, "substantial": {"V": 0.1}, "strict": {"V": 0.1}})
    # accepted (not "looser"), and the tiers they give stay nested: V = 0.1 meets all three
    # V limits (limits are inclusive), just above fails all three, whatever else holds
    got = tier_of({"V": [0.1, 0.1 + 1e-12, 0.0], "Dnorm": [-1.0, -1.0, -1.0], "Dnorm_plus": [0.0, 0.0, 0.0]},
                  cfg["thresholds"])
    assert got.tolist() == [4, 1, 4]
    with pytest.raises(cv.ConfigError, match="looser than 'thresholds.substantial.V' = 0.1"):
        resolved(thresholds={"moderate": {"V": 0.1}, "substantial": {"V": 0.1}, "strict": {"V": 0.1 + 1e-9}})


def test_cli_prints_resolved_config_or_the_error(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "workflow.config_validation", "--set", "preset=tiny"],
                        cwd=REPO, capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["tasks"] == ["circle"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("preset: tiny\nbounds: [25, -1]\n")
    err = subprocess.run([sys.executable, "-m", "workflow.config_validation", str(bad)],
                         cwd=REPO, capture_output=True, text=True)
    assert err.returncode == 1 and "config key 'bounds[1]'" in err.stderr


# ---- the training job ----------------------------------------------------------------------

def test_run_specs_hold_what_changes_a_result_and_not_threads_or_pack_size():
    cfg = resolved(train={"threads": 7, "pack_size": 3, "set": {"learning_rate": 0.001, "clip_eps": 0.2}})
    spec = cfg["specs"]["circle/d15/ppo/seed1"]
    assert spec["preset"] == "cpu"
    c = spec["config"]
    assert (c["task"], c["bound"], c["algo"], c["seed"]) == ("circle", 15.0, "ppo", 1)
    assert (c["total_steps"], c["num_envs"], c["episode_length"], c["eval_episodes"]) == (16384, 4, 256, 4)
    assert (c["learning_rate"], c["clip_eps"]) == (0.001, 0.2)
    assert "threads" not in c and "pack_size" not in c
    same = resolved(train={"threads": 1, "pack_size": 1, "set": {"learning_rate": 0.001, "clip_eps": 0.2}})
    assert same["specs"] == cfg["specs"]


def test_fail_switch_matches_run_ids_by_pattern():
    run = train_job.run_of_spec("/x/results/runs/goal/d25/ppo/seed3/spec.json")
    assert run == "goal/d25/ppo/seed3"
    assert train_job.should_fail(run, "goal/d25/ppo/seed3")
    assert train_job.should_fail(run, "circle/*, */seed3")
    assert not train_job.should_fail(run, "*/seed1")
    assert not train_job.should_fail(run, None) and not train_job.should_fail(run, "")


def test_fail_switch_exits_before_training(tmp_path):
    from runs import runfolder
    from runs import run_layout

    folder = run_layout.run_dir(tmp_path, "goal", 25, "ppo", 3)
    runfolder.write_spec(folder, cv.run_spec(cv.resolve({}), "goal", 25, "ppo", 3))
    env = dict(os.environ, SAFERL_FAIL_RUNS="goal/d25/ppo/seed3")
    proc = subprocess.run([sys.executable, "-m", "workflow.train_job", str(folder / "spec.json")],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "fails on purpose" in proc.stderr
    # started (for status), then failed for good
    assert sorted(p.name for p in folder.iterdir()) == ["failure.json", "job.json", "spec.json"]


# ---- status ----------------------------------------------------------------------------

def _touch(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_status_tells_done_running_failed_missing(tmp_path):
    cfg = resolved(bounds=[25], algos=["ppo"], seeds=[0, 1, 2, 3])
    runs = tmp_path / "results-tiny" / "runs" / "circle" / "d25" / "ppo"  # the tiny preset's own folder
    logs = tmp_path / "results-tiny" / "logs" / "train"  # one per pack, named in the job marker
    complete_run(runs / "seed0", bound=25, seed=0)
    _touch(runs / "seed1" / "job.json", json.dumps({"host": status.socket.gethostname(), "pid": os.getpid(),
                                                    "log": "results-tiny/logs/train/p.log"}))
    _touch(logs / "p.log", "[circle] update 3\n")
    _touch(runs / "seed2" / "checkpoint" / "state-0.json", json.dumps({"generation": 0, "arrays": "state-0.npz"}))
    _touch(runs / "seed2" / "job.json", json.dumps({"host": "elsewhere", "pid": 1, "log": "results-tiny/logs/train/q.log"}))
    _touch(logs / "q.log", "starting\nRuntimeError: boom\n")
    got = {s.run: s for s in status.sweep_status(cfg, tmp_path, slurm_jobs=None)}
    assert [got[f"circle/d25/ppo/seed{k}"].state for k in range(4)] == ["done", "running", "failed", "missing"]
    failed = got["circle/d25/ppo/seed2"]
    assert failed.log == str(logs / "q.log")
    assert "RuntimeError: boom" in failed.detail and "no usable checkpoint" in failed.detail


def test_status_uses_squeue_for_slurm_jobs(tmp_path):
    cfg = resolved(bounds=[25], algos=["ppo"], seeds=[0, 1])
    runs = tmp_path / "results-tiny" / "runs" / "circle" / "d25" / "ppo"
    _touch(runs / "seed0" / "job.json", json.dumps({"host": "node7", "pid": 1, "slurm_job_id": "41"}))
    _touch(runs / "seed1" / "job.json", json.dumps({"host": "node7", "pid": 1, "slurm_job_id": "42"}))
    got = [s.state for s in status.sweep_status(cfg, tmp_path, slurm_jobs={"41"})]
    assert got == ["running", "failed"]


def test_status_cli_lists_runs_and_counts(tmp_path):
    complete_run(tmp_path / "results-tiny" / "runs" / "circle" / "d15" / "ppo" / "seed0", bound=15)
    proc = subprocess.run([sys.executable, "-m", "workflow.status", "--config", "preset=tiny", "--dir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "circle/d15/ppo/seed0" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "1 done, 0 running, 0 failed, 7 missing of 8 runs"


# ---- report ----------------------------------------------------------------------------

def test_report_embeds_tables_and_figures(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pd.DataFrame({"algo": ["ppo_lag"], "phase": ["train"], "tier": [2], "p_tier0": [0.0], "p_tier1": [0.0],
                  "p_tier2": [1.0], "p_tier3": [0.0], "p_tier4": [0.0]}).to_csv(tmp_path / "tiers.csv", index=False)
    pd.DataFrame({"algo": ["ppo_lag"], "phase": ["train"], "metric": ["V"], "iqm": [0.123456], "ci_low": [0.1],
                  "ci_high": [0.2]}).to_csv(tmp_path / "iqm.csv", index=False)
    pd.DataFrame({"task": ["goal"], "tier": [1]}).to_csv(tmp_path / "conditions.csv", index=False)
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    fig.savefig(tmp_path / "fig.png")
    plt.close(fig)
    (tmp_path / "t.md").write_text("| a | b |\n")
    (tmp_path / "fig.pdf").write_bytes(b"%PDF-1.4")
    out = tmp_path / "out" / "report.html"
    report.write_report(str(out), config=resolved(), iqm=str(tmp_path / "iqm.csv"), tiers=str(tmp_path / "tiers.csv"),
                        conditions=str(tmp_path / "conditions.csv"),
                        products=[str(tmp_path / "fig.png"), str(tmp_path / "t.md"), str(tmp_path / "fig.pdf")])
    text = out.read_text()
    # Table 2 rendered (IQM and CI, the label), the figure embedded, other files linked for download
    assert "<th>PPO-Lag</th><td><b>0.12</b><span class='ci'>[0.10, 0.20]</span></td>" in text
    assert "data:image/png;base64," in text
    assert "<a href='../t.md'>" in text and "<a href='../fig.pdf'>" in text
    assert "preset <b>tiny</b>, builtin backend: 1 task (Circle) x 2 bounds (15, 25) x 2 algorithms (PPO, PPO-Lag) x " \
           "2 seeds = 8 runs" in text


# ---- launcher --------------------------------------------------------------------------

def test_launcher_runs_snakemake_with_the_profile_and_preset():
    cmd = launch.snakemake_command("cluster_profiles/slurm", "paper", ["--jobs", "10"], python="py")
    assert cmd == ["py", "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                   "--workflow-profile", "cluster_profiles/slurm", "--config", "preset=paper", "--jobs", "10"]


def test_launcher_dry_run_names_command_and_job(capsys):
    rc = launch.main(["--profile", str(REPO / "cluster_profiles" / "slurm"), "--preset", "paper",
                      "--partition", "cpu", "--hours", "2", "--dry-run", "--", "-n"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0].startswith("sweep paper in results-paper/ (1440 runs")  # which sweep, which folder
    assert "--workflow-profile" in out and "preset=paper" in out and out.splitlines()[1].endswith("-n")
    assert "'timeout_min': 120" in out and "'slurm_partition': 'cpu'" in out


def test_launcher_passes_the_account_to_the_controller_job(capsys):
    rc = launch.main(["--profile", str(REPO / "cluster_profiles" / "slurm"), "--preset", "paper",
                      "--account", "proj42", "--dry-run"])
    assert rc == 0 and "'slurm_account': 'proj42'" in capsys.readouterr().out


def test_launcher_config_errors_name_the_file_or_option_that_set_the_key(tmp_path, capsys):
    """A bad key is refused before anything is submitted, naming the --configfile that set it,
    or --config when the command line set it last."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("preset: tiny\nseeds: 0\n")
    profile = str(REPO / "cluster_profiles" / "local")
    assert launch.main(["--profile", profile, "--dry-run", "--", "--configfile", str(mine)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("invalid configuration: ") and f"{mine}: " in err and "seeds" in err
    assert launch.main(["--profile", profile, "--config", "seeds=-1", "--dry-run", "--", "--configfile", str(mine)]) == 1
    err = capsys.readouterr().err
    assert "--config: " in err and str(mine) not in err and "seeds" in err
    assert launch.main(["--profile", profile, "--preset", "tiny", "--config", "algos=[ppo,trpo]", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert "--config: " in err and "trpo" in err


def test_launcher_rejects_a_folder_without_profile(tmp_path):
    with pytest.raises(SystemExit):
        launch.main(["--profile", str(tmp_path), "--dry-run"])


def test_launcher_submits_the_controller_through_submitit(tmp_path):
    """submitit's in-process `debug` executor runs the controller: a dry run of the tiny sweep."""
    proc = subprocess.run([sys.executable, "-m", "workflow.launch", "--profile", str(REPO / "cluster_profiles" / "local"),
                           "--cluster", "debug", "--folder", str(tmp_path / "launcher"), "--preset", "tiny", "--", "-n"],
                          cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitted the sweep controller as debug job" in proc.stdout
    assert proc.stdout.startswith("sweep tiny in results-tiny/ (8 runs")  # first: which sweep, which folder
    assert not (tmp_path / "results").exists() and not (tmp_path / "results-tiny").exists()  # a dry run writes nothing


# ---- profiles ----------------------------------------------------------------------------

def test_slurm_profile_asks_one_gpu_and_four_cores_per_run_and_more_time_per_attempt():
    prof = yaml.safe_load((REPO / "cluster_profiles" / "slurm" / "config.yaml").read_text())
    assert prof["executor"] == "slurm"
    assert cv.resolve({"preset": "paper"})["train"]["threads"] == 4  # the training rules' threads
    assert prof["default-resources"]["gpu"] == 1  # the training packs' resources
    runtime = prof["default-resources"]["runtime"]
    assert [eval(runtime, {"attempt": a}) for a in (1, 2, 3)] == [240, 480, 720]
    assert prof["retries"] >= 1 and prof["rerun-incomplete"] is True
    assert prof["keep-incomplete"] is True  # a pack that failed for one run keeps its pack-mates' folders


# ---- plan parser -------------------------------------------------------------------------

def test_plan_parser_reads_plain_and_group_jobs():
    log = """
[Sun Nov 29 15:33:16 2026]
localrule write_thresholds:
    output: results/metrics/thresholds.yaml
    jobid: 19

[Sun Nov 29 15:33:16 2026] Group job run (jobs in lexicogr. order):

    [Sun Nov 29 15:33:16 2026]
    rule summarise:
        input: a/episodes.parquet
        output: a/summary.parquet
    [Sun Nov 29 15:33:16 2026]
    rule train:
        output: a/episodes.parquet, a/trace.parquet, a/run.json
        log: x.log
Job stats:
job       count
train         1
"""
    jobs = plan.parse_jobs(log)
    assert [(j.rule, j.outputs) for j in jobs] == [
        ("write_thresholds", ("results/metrics/thresholds.yaml",)),
        ("summarise", ("a/summary.parquet",)),
        ("train", ("a/episodes.parquet", "a/trace.parquet", "a/run.json")),
    ]


def test_workflow_outputs_are_written_whole_with_the_usual_mode(tmp_path):
    from metrics.atomic import write_text

    write_text(tmp_path / "sub" / "out.txt", "hello")
    assert (tmp_path / "sub" / "out.txt").read_text() == "hello"
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "sub" / "out.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["out.txt"]  # no temp file left


@pytest.mark.parametrize("args, words", [
    (["--preset", "bogus"], "config key 'preset': 'bogus' is not one of"),
    (["--preset", "tiny", "--", "-n", "--config", "seeds=0"], "config key 'seeds': 0 is not valid"),
    (["--", "--configfile", "MISSING.yaml", "-n"], "none.yaml: cannot read: No such file"),
])
def test_launcher_refuses_a_bad_config_before_submitting(tmp_path, capsys, args, words):
    args = [a.replace("MISSING.yaml", str(tmp_path / "none.yaml")) for a in args]
    folder = tmp_path / "launcher"
    rc = launch.main(["--profile", str(REPO / "cluster_profiles" / "local"), "--cluster", "debug",
                      "--folder", str(folder), *args])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("invalid configuration: ") and words in err and err.count("\n") == 1
    assert not folder.exists()  # nothing submitted
