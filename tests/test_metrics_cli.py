"""The command line: evaluate = summarise + aggregate + tiers, all-or-nothing outputs, the docs' worked example."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metrics.cli import main

from test_metrics_episodes import episodes, write

ROOT = Path(__file__).resolve().parents[1]
EVALUATE_FILES = {
    "iqm.csv", "tiers.csv", "conditions.csv", "run_metrics.parquet", "cdf.parquet", "bootstrap.parquet",
    "condition_stats.parquet", "condition_bootstrap.parquet", "iterates.parquet", "final_episodes.parquet",
    "aggregate.json",
}


def small_sweep(tmp_path):
    rng = np.random.default_rng(4)
    paths = []
    for algo in ("ppo", "lag"):
        for t in ("a", "b"):
            for b in (10.0, 20.0):
                for k in range(3):
                    df = pd.concat(
                        [episodes(rng.uniform(0, 2 * b, 6), task=t, bound=b, algo=algo, seed=k, iteration=j) for j in range(2)]
                        + [episodes(rng.uniform(0, 2 * b, 4), task=t, bound=b, algo=algo, seed=k, phase=p, iteration=1)
                           for p in ("final_explore", "final_greedy")]
                    )
                    paths.append(write(df, tmp_path / f"{algo}_{t}_{b:g}_{k}.parquet"))
    return paths


def test_stages_one_by_one_equal_evaluate(tmp_path):
    paths = small_sweep(tmp_path)
    assert main(["evaluate", *paths, "--out", str(tmp_path / "all"), "--reps", "300", "--seed", "5"]) == 0
    assert {f.name for f in (tmp_path / "all").iterdir()} == EVALUATE_FILES
    summaries = []
    for i, p in enumerate(paths):
        summaries.append(str(tmp_path / f"s{i}.parquet"))
        assert main(["summarise", p, "--out", summaries[-1]]) == 0
    assert main(["aggregate", *summaries, "--out", str(tmp_path / "agg"), "--reps", "300", "--seed", "5"]) == 0
    assert main(["tiers", str(tmp_path / "agg")]) == 0
    for name in ("iqm.csv", "tiers.csv", "conditions.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "all" / name), pd.read_csv(tmp_path / "agg" / name), check_exact=True)
    for name in ("cdf.parquet", "bootstrap.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "all" / name), pd.read_parquet(tmp_path / "agg" / name), check_exact=True)
    iqm = pd.read_csv(tmp_path / "all" / "iqm.csv")
    assert list(iqm.columns[:6]) == ["algo", "phase", "metric", "iqm", "ci_low", "ci_high"]
    assert set(iqm["metric"]) == {"R", "C", "V", "Dnorm", "Dnorm_plus"}
    assert set(iqm["phase"]) == {"train", "final_explore", "final_greedy"}
    # stage 3 alone with other thresholds, into another folder
    strict = tmp_path / "loose.yaml"
    strict.write_text("minimal: {Dnorm: 10}\nmoderate: {V: 1}\nsubstantial: {V: 1, Dnorm_plus: 10}\nstrict: {V: 1, Dnorm_plus: 10}\n")
    assert main(["tiers", str(tmp_path / "agg"), "--thresholds", str(strict), "--out", str(tmp_path / "t2")]) == 0
    assert set(pd.read_csv(tmp_path / "t2" / "tiers.csv")["tier"]) == {4}


def test_failed_evaluate_leaves_the_folder_as_it_was(tmp_path, capsys):
    paths = small_sweep(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    bad = write(episodes([1.0, 2.0], bound=-1.0), tmp_path / "bad.csv")
    assert main(["evaluate", *paths, bad, "--out", str(out), "--reps", "10"]) == 2
    assert "bad.csv: column bound must be finite and > 0" in capsys.readouterr().err
    assert [f.name for f in out.iterdir()] == ["keep.txt"]
    bad_thresholds = tmp_path / "t.yaml"
    bad_thresholds.write_text("minimal: {Dnorm: zero}\n")
    fresh = tmp_path / "fresh"
    assert main(["evaluate", *paths, "--out", str(fresh), "--thresholds", str(bad_thresholds)]) == 2
    assert "t.yaml: key 'minimal.Dnorm': 'zero' is not a number" in capsys.readouterr().err
    assert not fresh.exists()
    assert main(["tiers", str(tmp_path / "nowhere")]) == 2
    assert "not a stage-2 folder" in capsys.readouterr().err


def _block(text, name):
    match = re.search(rf"<!-- {name} -->\n```[a-z]*\n(.*?)```", text, re.S)
    assert match, f"docs/metrics.md has no {name} block"
    return match.group(1)


def test_worked_example_in_docs_runs_and_matches(tmp_path):
    doc = (ROOT / "docs" / "metrics.md").read_text()
    command = shlex.split(_block(doc, "worked-example-command").strip())
    assert command[:4] == ["python", "-m", "metrics", "evaluate"]
    out = command[command.index("--out") + 1]
    command[command.index("--out") + 1] = str(tmp_path / out)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, *command[1:]], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / out / "tiers.csv").read_text() == _block(doc, "worked-example-tiers")
    shown = pd.read_csv(pd.io.common.StringIO(_block(doc, "worked-example-iqm")), sep=r"\s+")
    iqm = pd.read_csv(tmp_path / out / "iqm.csv").set_index(["algo", "phase", "metric"])
    for _, row in shown.iterrows():
        for col in ("iqm", "ci_low", "ci_high"):
            assert iqm.loc[(row["algo"], row["phase"], row["metric"]), col] == pytest.approx(row[col], abs=5.01e-4)  # shown rounded to 3 decimals


def test_warnings_are_printed_and_the_run_still_succeeds(tmp_path, capsys):
    paths = small_sweep(tmp_path)
    single = [p for p in paths if not p.endswith(("_1.parquet", "_2.parquet")) or "lag_a_10" not in p]
    assert main(["evaluate", *single, "--out", str(tmp_path / "o"), "--reps", "20"]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "lag_a_10_0.parquet: rows of task=a, bound=10, algo=lag, seed=0" in err
