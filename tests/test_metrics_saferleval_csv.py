"""The paper's suite's per-seed summary CSVs read as an episode table (metrics/saferleval_csv.py),
on files written in that format: one row per seed, JSON lists of final episode costs."""
import csv
import json

import pytest

import metrics
from metrics.cli import main
from metrics.saferleval_csv import read_saferleval

BOUND = 25.0


def _write(folder, seed, det_costs, test_costs, algo="ppo_lag", env="safe_goal_point"):
    row = {"run_name": f"{env}_Level_1_{algo}_bound25_seed{seed}_20260101", "env": env, "algo": algo,
           "bound": BOUND, "seed": seed, "level": 1,
           "train_reward": 3.0, "train_cost": 30.0, "train_violation_rate": 0.6, "train_cost_mean_violating": 40.0,
           "test_reward": 7.5, "test_cost": sum(test_costs) / max(len(test_costs), 1), "test_violation_rate": 0.5,
           "test_cost_mean_violating": 0.0, "test_episode_costs": json.dumps(test_costs),
           "det_test_reward": 6.25, "det_test_cost": sum(det_costs) / len(det_costs), "det_test_violation_rate": 0.0,
           "det_test_cost_mean_violating": 0.0, "det_test_episode_costs": json.dumps(det_costs)}
    path = folder / f"{row['run_name']}_summary.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    return path


def test_final_episodes_become_the_episode_table_and_evaluate(tmp_path):
    _write(tmp_path, 0, det_costs=[20.0, 30.0, 50.0, 10.0], test_costs=[0.0, 40.0])
    _write(tmp_path, 1, det_costs=[25.0, 26.0], test_costs=[])  # stochastic evaluation not run for this seed
    episodes, notes = read_saferleval([tmp_path])
    greedy = episodes[(episodes["seed"] == 0) & (episodes["phase"] == "final_greedy")]
    assert greedy["cost"].tolist() == [20.0, 30.0, 50.0, 10.0] and set(greedy["return"]) == {6.25}
    assert greedy["task"].iloc[0] == "safe_goal_point" and greedy["bound"].iloc[0] == BOUND
    assert len(episodes) == 4 + 2 + 2
    assert any("training" in n and "not episode costs" in n for n in notes)
    assert any("seed1" in n and "no test_episode_costs" in n and "no final_explore episodes" in n for n in notes)

    out = tmp_path / "episodes.parquet"
    assert main(["from-saferleval", str(tmp_path), "--out", str(out)]) == 0
    runs = metrics.summarise(out).runs.set_index(["seed", "phase"])
    # seed 0 greedy: V = 2/4 (30 and 50 exceed 25), Dnorm+ = mean(5/25, 25/25), R the mean return
    assert runs.loc[(0, "final_greedy"), "V"] == 0.5
    assert runs.loc[(0, "final_greedy"), "Dnorm_plus"] == pytest.approx((0.2 + 1.0) / 2)
    assert runs.loc[(0, "final_greedy"), "R"] == 6.25
    assert runs.loc[(1, "final_greedy"), "V"] == 0.5  # a cost of exactly d is within the bound


def test_what_the_file_lacks_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "x_summary.csv"
    bad.write_text("run_name,algo,bound,seed\nr,ppo,25,0\n")
    assert main(["from-saferleval", str(bad), "--out", str(tmp_path / "e.csv")]) == 2
    assert "x_summary.csv: not a SafeRLEval summary file: missing column(s) ['env']" in capsys.readouterr().err
    path = _write(tmp_path, 0, det_costs=[1.0], test_costs=[])
    text = path.read_text().replace(json.dumps([1.0]), "[]")
    path.write_text(text)
    assert main(["from-saferleval", str(path), "--out", str(tmp_path / "e.csv")]) == 2
    assert "no final episode costs (test_episode_costs, det_test_episode_costs empty or missing)" in capsys.readouterr().err
    assert main(["from-saferleval", str(tmp_path / "empty_dir_missing"), "--out", str(tmp_path / "e.csv")]) == 2
    (tmp_path / "none").mkdir()
    assert main(["from-saferleval", str(tmp_path / "none"), "--out", str(tmp_path / "e.csv")]) == 2
    assert "no SafeRLEval summary files (*_summary.csv) in this folder" in capsys.readouterr().err
    assert not (tmp_path / "e.csv").exists()
