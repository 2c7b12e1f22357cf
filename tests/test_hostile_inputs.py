"""Every input a user gives either works or is refused with one line naming the file, field and
value: never a traceback, never a hang. One test per input class, each command run as a user
runs it (a subprocess with a time limit): config files (YAML constructs, numbers at the edges,
odd names), thresholds files, the command-line options of `python -m metrics`,
`workflow.status` and `workflow.plan`, episode tables, and run folders found on disk."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from runs import run_layout
from fake_runs import complete_run

REPO = Path(__file__).resolve().parent.parent
LIMIT_S = 90  # a command that takes longer hangs (each needs a few seconds of imports)

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9))


def run(args, cwd=REPO, expect_rc=None) -> subprocess.CompletedProcess:
    """Run `python ARGS`; assert it ended in time without a traceback."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=LIMIT_S,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert time.monotonic() - start < LIMIT_S
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    if expect_rc is not None:
        assert proc.returncode == expect_rc, (proc.returncode, proc.stderr[-2000:])
    return proc


def refused(args, *words, cwd=REPO, rc=None) -> str:
    """Run a command that must refuse its input: non-zero exit, one line on stderr holding `words`."""
    proc = run(args, cwd)
    assert proc.returncode != 0 if rc is None else proc.returncode == rc, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def config_check(path):
    return ["-m", "workflow.config_validation", str(path)]


# ---- config files ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    (BOMB, ["not valid YAML: aliases expand to more than 100,000 values"]),  # nine deep: refused, not expanded
    ("preset: tiny\ntasks: &t [circle]\nalgos: *t\n", ["config key 'algos[0]': 'circle' is not one of"]),
    ("!!python/object/apply:os.system ['echo pwned']\n", ["not valid YAML", "python/object/apply"]),
    ("preset: tiny\npreset: default\n", ["duplicate key 'preset' on line 2 (first on line 1)"]),
    ("- preset\n- tiny\n", ["expected a mapping of config keys, got list"]),
    ("42\n", ["expected a mapping of config keys, got int"]),
    ("[" * 50_000 + "]" * 50_000 + "\n", ["nested too deeply"]),
    ("preset:\ttiny\n\t- x\n", ["not valid YAML", "line 1"]),
], ids=["alias-bomb", "alias-under-a-key", "python-tag", "duplicate-key", "list-top", "scalar-top", "deep", "tab"])
def test_yaml_constructs_in_a_config_file(tmp_path, text, words):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    proc = run(config_check(path))
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("invalid configuration: ") and all(w in proc.stderr for w in words), proc.stderr


def test_an_empty_config_file_is_the_default_and_paths_that_are_not_files_are_refused(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    assert run(config_check(tmp_path / "empty.yaml"), expect_rc=0).stderr.strip() == "(96 run specs)"
    (tmp_path / "bytes.yaml").write_bytes(b"\xff\xfe\x00garbage")
    refused(config_check(tmp_path / "bytes.yaml"), "bytes.yaml: not UTF-8 text", rc=1)
    refused(config_check(tmp_path), f"{tmp_path}: is a folder, not a file", rc=1)
    refused(config_check("/dev/zero"), "/dev/zero: not a regular file", rc=1)
    refused(config_check(tmp_path / "none.yaml"), "none.yaml: cannot read: No such file", rc=1)
    (tmp_path / "big.yaml").write_text("# padding\n" * 200_000)
    refused(config_check(tmp_path / "big.yaml"), "big.yaml: 2,000,000 bytes", rc=1)


@pytest.mark.parametrize("text, words", [
    ("seeds: " + "9" * 5000, ["not a usable value", "5000 digits"]),
    ("seeds: " + "9" * 40, ["config key 'seeds'", "largest seed"]),
    ("bounds: [1.0e+309]", ["config key 'bounds[0]': inf must be finite"]),
    ("bounds: [.nan]", ["config key 'bounds[0]': nan must be finite"]),
    ("bounds: [-0.0]", ["config key 'bounds[0]': -0.0 must be > 0"]),
    ("bounds: [0]", ["config key 'bounds[0]': 0 must be > 0"]),
    ("bootstrap: {reps: 0, seed: 0}", ["config key 'bootstrap.reps'"]),
    ("seeds: 2.0", ["config key 'seeds'"]),
    ("thresholds: {moderate: {V: .nan}}", ["config key 'thresholds.moderate.V': nan must be a finite number"]),
    ("thresholds: {moderate: {V: " + "1" * 400 + "}}", ["config key 'thresholds.moderate.V'", "finite"]),
], ids=["int-5000-digits", "seeds-40-digits", "inf", "nan", "minus-zero", "zero", "reps-0", "float-count",
        "nan-threshold", "int-400-digits"])
def test_numbers_at_the_edges_in_a_config_file(tmp_path, text, words):
    path = tmp_path / "c.yaml"
    path.write_text(f"preset: tiny\n{text}\n")
    refused(config_check(path), *words, rc=1)


@pytest.mark.parametrize("value, shown", [
    ('""', "''"), ("x" * 300, "'" + "x" * 300 + "'"), ("../../etc/passwd", "'../../etc/passwd'"),
    ('"a\\nb"', "'a\\nb'"), ('"a\\0b"', "'a\\x00b'"), ("tïny😀", "'tïny😀'"), ("tiny/..", "'tiny/..'"),
], ids=["empty", "300-chars", "dotdot", "newline", "nul", "unicode", "slash"])
def test_odd_names_in_a_config_file(tmp_path, value, shown):
    path = tmp_path / "c.yaml"
    path.write_text(f"preset: {value}\n")
    refused(config_check(path), f"config key 'preset': {shown} is not one of", rc=1)


def test_odd_names_in_config_lists(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text('preset: tiny\ntasks: ["circle/../goal"]\nalgos: ["", "ppo\\nppo"]\n')
    refused(config_check(path), "config key 'algos[0]': '' is not one of", rc=1)


@pytest.mark.parametrize("item, words", [
    ("seeds=[1", ["--set 'seeds=[1': the value is not valid YAML"]),
    ("seeds=!!python/none", ["--set 'seeds=!!python/none': the value is not valid YAML"]),
    ("novalue", ["--set 'novalue': expected KEY=VALUE"]),
    ("=5", ["unknown key(s) ['']"]),
], ids=["unclosed", "python-tag", "no-equals", "empty-key"])
def test_bad_set_options(item, words):
    refused(["-m", "workflow.config_validation", "--set", "preset=tiny", "--set", item], *words, rc=1)
    refused(["-m", "workflow.config_validation", "--set", "train=1", "--set", "train.x=1"],
            "--set 'train.x=1': 'train' is set to a value above, not a mapping", rc=1)


# ---- thresholds files ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def episodes_file(tmp_path_factory):
    """A small valid episode table: 2 algorithms x 2 seeds, every phase."""
    rows = [dict(task="t", bound=10.0, algo=algo, seed=s, phase=ph, iteration=0, episode=e,
                 **{"return": 1.0, "cost": float(5 * e + s)})
            for algo in ("a", "b") for s in range(2) for ph in ("train", "final_explore", "final_greedy")
            for e in range(3)]
    path = tmp_path_factory.mktemp("ep") / "ep.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_thresholds_files_that_are_no_file_or_no_yaml(tmp_path, episodes_file):
    def tiers_with(path, *words):
        refused(["-m", "metrics", "evaluate", str(episodes_file), "--out", str(tmp_path / "out"),
                 "--thresholds", str(path)], *words, rc=2)
        assert not (tmp_path / "out").exists()

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # opening it would block forever
    tiers_with(fifo, "fifo.yaml: not a regular file")
    tiers_with("/dev/zero", "/dev/zero: not a regular file")
    tiers_with(tmp_path, "is a folder, not a file")
    for name, content, words in [
        ("empty.yaml", "", ["empty.yaml: empty; expected a mapping"]),
        ("bomb.yaml", BOMB, ["bomb.yaml: not valid YAML: aliases expand to more than 100,000 values"]),
        ("tag.yaml", "!!python/name:os.system\n", ["tag.yaml: not valid YAML"]),
        ("dup.json", '{"minimal": {}, "minimal": {}}', ["dup.json: duplicate key 'minimal'"]),
        ("list.yaml", "- minimal\n", ["list.yaml: key '<top level>': expected a mapping"]),
        ("deep.json", "[" * 100_000 + "]" * 100_000, ["deep.json: nested too deeply"]),
        ("huge.json", '{"minimal": {"Dnorm": ' + "9" * 5000 + "}}", ["huge.json: not a usable value", "5000 digits"]),
    ]:
        (tmp_path / name).write_text(content)
        tiers_with(tmp_path / name, *words)
    (tmp_path / "bytes.yaml").write_bytes(bytes(range(256)))
    tiers_with(tmp_path / "bytes.yaml", "bytes.yaml: not UTF-8 text")


# ---- the engine's command-line options ------------------------------------------------------

@pytest.mark.parametrize("options, words", [
    (["--reps", "1e3"], ["argument --reps: invalid int value: '1e3'"]),
    (["--reps", "0"], ["--reps must be >= 1"]),
    (["--reps", "100000000000000000000"], ["too many bootstrap replicates"]),
    (["--seed", "-1"], ["--seed >= 0"]),
    (["--estimator", "mean"], ["argument --estimator: invalid choice: 'mean'"]),
    (["--jobs", "x"], ["argument --jobs: invalid int value"]),
], ids=["reps-float", "reps-0", "reps-huge", "seed-negative", "estimator", "jobs"])
def test_engine_options_at_the_edges(tmp_path, episodes_file, options, words):
    refused(["-m", "metrics", "evaluate", str(episodes_file), "--out", str(tmp_path / "out"), *options], *words, rc=2)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options, words", [
    (["--k-max", "1000000000"], ["--k-max must be <= 1000"]),  # would run for hours
    (["--k-max", "1"], ["--k-max must be >= 2"]),
    (["--target", "nan"], ["--target must be a probability in (0, 1] (got nan)"]),
    (["--target", "-0"], ["--target must be a probability"]),
    (["--phase", "test"], ["argument --phase: invalid choice: 'test'"]),
], ids=["k-huge", "k-1", "target-nan", "target-minus-zero", "phase"])
def test_seed_planning_options_at_the_edges(tmp_path, episodes_file, options, words):
    refused(["-m", "metrics", "plan-seeds", str(episodes_file), "--out", str(tmp_path / "out"), *options], *words, rc=2)


def test_out_paths_that_are_files_where_folders_belong_and_back(tmp_path, episodes_file):
    refused(["-m", "metrics", "evaluate", str(episodes_file), "--out", str(episodes_file)], "is a file, not a folder", rc=2)
    refused(["-m", "metrics", "summarise", str(episodes_file), "--out", str(tmp_path)], "is a folder", rc=2)
    refused(["-m", "metrics", "evaluate", str(episodes_file), "--out", str(episodes_file / "sub")], "Not a directory", rc=2)
    refused(["-m", "metrics", "tiers", str(episodes_file)], rc=2)
    refused(["-m", "metrics", "bogus"], "invalid choice: 'bogus'", rc=2)


# ---- episode tables ---------------------------------------------------------------------------

def test_odd_names_in_episode_tables_work_and_come_out_safe(tmp_path, episodes_file):
    names = {"a": "x" * 300, "b": "line\nbreak/../é😀"}
    df = pd.read_parquet(episodes_file)
    df["algo"] = df["algo"].map(names)
    df["task"] = "=cmd|' /C calc'!A0"
    df.to_parquet(tmp_path / "odd.parquet")
    run(["-m", "metrics", "evaluate", str(tmp_path / "odd.parquet"), "--out", str(tmp_path / "out"), "--reps", "20"],
        expect_rc=0)
    conditions = pd.read_csv(tmp_path / "out" / "conditions.csv")
    # the line break is written as its visible escape (metrics.safe_text.visible), the rest as given
    assert set(conditions["algo"]) == {"x" * 300, "line\\nbreak/../é😀"}
    assert set(conditions["task"]) == {"'=cmd|' /C calc'!A0"}


@pytest.mark.parametrize("make, words", [
    (lambda p: p.write_bytes(np.random.default_rng(0).bytes(5000)), ["cannot be read as an episode table"]),
    (lambda p: p.write_text(""), ["cannot be read as an episode table"]),
    (lambda p: p.mkdir(), ["a folder with no episode files"]),
    (lambda p: None, ["no such file"]),
], ids=["random-bytes", "empty", "folder", "missing"])
def test_episode_files_that_are_not_tables(tmp_path, make, words):
    path = tmp_path / "e.parquet"
    make(path)
    refused(["-m", "metrics", "evaluate", str(path), "--out", str(tmp_path / "out")], *words, rc=2)


def test_numbers_at_the_edges_in_an_episode_table(tmp_path, episodes_file):
    df = pd.read_parquet(episodes_file)
    for name, column, value, words in [
        ("inf.parquet", "bound", np.inf, ["column bound must be finite and > 0"]),
        ("big.parquet", "cost", 1e308, ["non-finite metric values"]),
        ("tiny.parquet", "bound", 5e-324, ["non-finite metric values"]),
    ]:
        df.assign(**{column: value}).to_parquet(tmp_path / name)
        refused(["-m", "metrics", "evaluate", str(tmp_path / name), "--out", str(tmp_path / "out")], *words, rc=2)
    df.assign(cost=-0.0).to_parquet(tmp_path / "zero.parquet")
    run(["-m", "metrics", "evaluate", str(tmp_path / "zero.parquet"), "--out", str(tmp_path / "z"), "--reps", "20"],
        expect_rc=0)


# ---- workflow.status and workflow.plan --------------------------------------------------------

def hostile_run_folders(root: Path) -> None:
    """The tiny sweep's run folders as hands and crashes might leave them."""
    runs = root / "results-tiny" / "runs" / "circle"  # the tiny preset's own folder
    (runs / "d15/ppo/seed0/run.json").mkdir(parents=True)  # a folder where a file belongs
    complete_run(runs / "d15/ppo/seed1")
    (runs / "d15/ppo/seed1" / run_layout.RUN_JSON).write_text('{"complete": true, "files": [1]}')
    complete_run(runs / "d15/ppo_lag/seed0")
    (runs / "d15/ppo_lag/seed0" / run_layout.JOB_MARKER).write_text('{"log": 5, "pid": 99999999999999999999}')
    (runs / "d15/ppo_lag/seed1").mkdir(parents=True)
    (runs / "d15/ppo_lag/seed1" / run_layout.JOB_MARKER).write_text('{"log": "../../../../../etc/passwd"}')
    (runs / "d15/ppo_lag/seed1" / run_layout.FAILURE_RECORD).write_text("[1]")
    (runs / "d25/ppo").mkdir(parents=True)
    (runs / "d25/ppo/seed0").write_text("a file where a folder belongs")
    (runs / "d25/ppo/seed1").symlink_to("seed1")  # a symlink loop
    complete_run(runs / "d25/ppo_lag/seed0", bound=25.0, algo="ppo_lag")
    (runs / "d25/ppo_lag/seed0" / run_layout.VERIFIED).write_text("not json")


def test_status_reads_hostile_run_folders_and_refuses_bad_options(tmp_path):
    (tmp_path / "tiny.yaml").write_text("preset: tiny\n")
    hostile_run_folders(tmp_path)
    status = ["-m", "workflow.status", "--configfile", str(tmp_path / "tiny.yaml"), "--dir", str(tmp_path)]
    table = run(status, expect_rc=0).stdout
    # stale: d15/ppo_lag/seed0 holds a complete run of another config (complete_run's bound 25, ppo) and
    # d15/ppo/seed1's run.json records no config; both are retrained, neither counts as failed
    assert table.splitlines()[-1] == "1 done, 0 running, 1 failed, 2 stale, 4 missing of 8 runs", table
    assert "passwd" not in table and "root:" not in table
    rows = [json.loads(line) for line in run([*status, "--json"], expect_rc=0).stdout.splitlines()]
    states = {r["run"]: r["state"] for r in rows}
    assert len(rows) == 8 and {r for r, s in states.items() if s == "done"} == {"circle/d25/ppo_lag/seed0"}
    assert {r for r, s in states.items() if s == "stale"} == {"circle/d15/ppo/seed1", "circle/d15/ppo_lag/seed0"}
    assert {r for r, s in states.items() if s == "failed"} == {"circle/d15/ppo_lag/seed1"}
    refused([*status[:-1], str(tmp_path / "tiny.yaml")], "not a folder", rc=1)
    refused([*status[:-1], str(tmp_path / "nowhere")], "no such folder", rc=1)
    refused([*status, "--only", "done,gone"], "--only: unknown state(s) ['gone']", rc=1)
    refused([*status, "--config", "seeds=[1"], "--config 'seeds=[1': the value is not valid YAML", rc=1)
    (tmp_path / "list.yaml").write_text("[1, 2]\n")
    refused(["-m", "workflow.status", "--configfile", str(tmp_path / "list.yaml")], "expected a mapping", rc=1)
    refused([*status, "--bogus"], "unrecognized arguments: --bogus", rc=2)


def test_plan_refuses_a_bad_config_in_one_line(tmp_path):
    refused(["-m", "workflow.plan", "--config", "preset=../x"],
            "snakemake --dry-run failed: invalid configuration: --config: config key 'preset': '../x' is not one of",
            cwd=tmp_path, rc=1)
    (tmp_path / "c.yaml").write_text("preset: tiny\npreset: tiny\n")
    refused(["-m", "workflow.plan", "--configfile", str(tmp_path / "c.yaml")], "duplicate key 'preset'",
            cwd=tmp_path, rc=1)


# ---- issue 46: names read as missing, empty names, alias bombs, bounds without a folder label --

NA_NAMES = ["NA", "None", "null", "nan", "N/A", "NaN", "#N/A", "<NA>", "NULL", "n/a", "-nan", "1.#IND"]


@pytest.mark.parametrize("name", NA_NAMES)
def test_an_algorithm_named_like_a_missing_value_is_kept_through_every_stage(tmp_path, episodes_file, name):
    df = pd.read_parquet(episodes_file)
    df["algo"] = df["algo"].map({"a": name, "b": "b"})
    df.to_csv(tmp_path / "e.csv", index=False)
    summary, agg = tmp_path / "s.parquet", tmp_path / "agg"
    run(["-m", "metrics", "summarise", str(tmp_path / "e.csv"), "--out", str(summary)], expect_rc=0)
    run(["-m", "metrics", "aggregate", str(summary), "--out", str(agg), "--reps", "20"], expect_rc=0)
    run(["-m", "metrics", "tiers", str(agg)], expect_rc=0)
    shown = "'" + name if name.startswith("-") else name  # a leading '-' is prefixed against spreadsheet formulas
    for table in ("tiers.csv", "iqm.csv", "conditions.csv"):
        algos = pd.read_csv(agg / table, dtype=str, keep_default_na=False)["algo"]
        assert set(algos) == {shown, "b"}, (table, set(algos))
    from metrics.aggregate import read_aggregate
    assert set(read_aggregate(agg).iqm["algo"]) == {shown, "b"}


@pytest.mark.parametrize("column, value, fmt", [("algo", "", "csv"), ("task", "", "csv"), ("algo", "  ", "csv"),
                                                ("algo", "", "parquet")])
def test_an_empty_name_is_refused_naming_file_column_and_rows(tmp_path, episodes_file, column, value, fmt):
    df = pd.read_parquet(episodes_file)
    df.loc[df["algo"] == "a", column] = value
    path = tmp_path / f"e.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path)
    line = refused(["-m", "metrics", "summarise", str(path), "--out", str(tmp_path / "s.parquet")], rc=2)
    assert line.startswith(f"error: {path}: column {column} has an empty name {value!r}; name every {column} "
                           "(rows 0, 1, 2,"), line
    assert not (tmp_path / "s.parquet").exists()


THRESHOLD_BOMB = "minimal: {Dnorm: [&a0 [1,1,1,1,1,1,1,1,1], " + ", ".join(
    f"&a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)) + "]}\n"


def test_an_alias_bomb_in_a_thresholds_file_is_refused_at_once(tmp_path, episodes_file):
    agg = tmp_path / "agg"
    run(["-m", "metrics", "evaluate", str(episodes_file), "--out", str(agg), "--reps", "20"], expect_rc=0)
    (tmp_path / "bomb.yaml").write_text(THRESHOLD_BOMB)  # 9**9 values once expanded; it ran > 20 s
    start = time.monotonic()
    refused(["-m", "metrics", "tiers", str(agg), "--thresholds", str(tmp_path / "bomb.yaml"), "--out",
             str(tmp_path / "out")], "bomb.yaml: not valid YAML: aliases expand to more than 100,000 values", rc=2)
    assert time.monotonic() - start < 10  # imports only: the expansion is never built
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, words", [
    ("a: &x [1, *x]\n", ["an alias refers to the value it is in (line 1)"]),
    ("preset: tiny\nbounds: " + THRESHOLD_BOMB.split("Dnorm: ")[1][:-2] + "\n", ["aliases expand to more than"]),
], ids=["self-alias", "bomb-in-bounds"])
def test_aliases_that_loop_or_explode_in_a_config_file(tmp_path, text, words):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    refused(config_check(path), f"{path}: not valid YAML", *words, rc=1)


def snakemake_dry_run(folder) -> list:
    return ["-m", "snakemake", "-n", "--workflow-profile", "cluster_profiles/local", "--directory", str(folder),
            "--snakefile", str(REPO / "Snakefile")]


def snake_refused(args, words) -> None:
    """Snakemake refuses the config: its own lines around ours, exit 1, our line among them."""
    proc = run(args, expect_rc=1)  # Snakemake prints a WorkflowError on stdout
    assert [line for line in proc.stdout.splitlines() if line.startswith(words)], proc.stdout[-2000:]


@pytest.mark.parametrize("bound, length", [("1.0e+300", 301), ("1.0e-300", 302), ("1.0e+32", 33)])
def test_a_bound_without_a_folder_label_is_refused_at_plan_time(tmp_path, bound, length):
    path = tmp_path / "c.yaml"
    path.write_text(f"preset: tiny\nbounds: [15, {bound}]\n")
    refused(config_check(path), f"invalid configuration: {path}: config key 'bounds[1]': {float(bound)!r} has no "
            f"folder label of at most 32 characters (written without an exponent it is {length})", rc=1)
    snake_refused([*snakemake_dry_run(tmp_path), "--configfile", str(path)],
                  f"invalid configuration: {path}: config key 'bounds[1]'")


def test_ordinary_bounds_keep_their_folder_labels():
    # existing result folders are named by these labels: they must not change
    assert [run_layout.bound_label(b) for b in (15, 25, 50, 7.5, 12.5, 0.1, 1e-5, 1e31, 1e-30)] == [
        "15", "25", "50", "7.5", "12.5", "0.1", "0.00001", "1" + "0" * 31, "0." + "0" * 29 + "1"]


def test_config_errors_name_the_file_or_option_that_set_the_key(tmp_path):
    (tmp_path / "mine.yaml").write_text("preset: tiny\nseeds: 0\n")
    snake = snakemake_dry_run(tmp_path)
    snake_refused([*snake, "--configfile", str(tmp_path / "mine.yaml")],
                  f"invalid configuration: {tmp_path / 'mine.yaml'}: config key 'seeds': 0 is not valid")
    snake_refused([*snake, "--configfile", str(tmp_path / "mine.yaml"), "--config", "seeds=2", "algos=[ppo,trpo]"],
                  "invalid configuration: --config: config key 'algos[1]': 'trpo' is not one of")
    refused(["-m", "workflow.status", "--configfile", str(tmp_path / "mine.yaml"), "--dir", str(tmp_path)],
            f"invalid configuration: {tmp_path / 'mine.yaml'}: config key 'seeds'", rc=1)
    from workflow import config_validation as cv  # a preset file (in-process: the shipped ones are all valid)

    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "mine.yaml").write_text("extends: tiny\nbounds: [1.0e+300]\n")
    for name in ("tiny", "base"):
        (tmp_path / "presets" / f"{name}.yaml").write_text((REPO / "config" / "presets" / "tiny.yaml").read_text())
    with pytest.raises(cv.ConfigError, match=r"^.*presets/mine.yaml: config key 'bounds\[0\]': 1e\+300 has no folder"):
        cv.resolve({"preset": "mine"}, presets_dir=tmp_path / "presets")


def test_numbers_in_a_config_list_work_from_snakemake_config(tmp_path):
    # Snakemake passes the items of `bounds=[15,25]` as text; they read as the numbers they are
    proc = run([*snakemake_dry_run(tmp_path), "--config", "preset=tiny", "bounds=[15,7.5]", "seeds=[0,1]"],
               expect_rc=0)  # was: config key 'bounds[0]': '15' is not of type 'number'
    assert "invalid configuration" not in proc.stdout
