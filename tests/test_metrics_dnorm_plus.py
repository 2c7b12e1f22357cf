"""The `saferleval` Dnorm+ definition (metrics/dnorm_plus.py) against the paper's, on a
hand-worked table where they differ: bound 10, two seeds, two training iterates."""
import numpy as np
import pandas as pd
import pytest

import metrics
from metrics.cli import main

D = 10.0
COSTS = {  # (seed, phase, iteration) -> episode costs
    (0, "train", 0): [15, 5],   # V 0.5, Dnorm+ 0.5
    (0, "train", 1): [5, 5],    # V 0,   Dnorm+ 0     -> run: paper 0.25, saferleval 0.5 (violating iterate only)
    (1, "train", 0): [12, 20],  # V 1,   Dnorm+ 0.6
    (1, "train", 1): [14, 2],   # V 0.5, Dnorm+ 0.4   -> run: 0.5 either way
    (0, "final_greedy", 1): [5, 5],   # never violates: Dnorm+ 0
    (1, "final_greedy", 1): [20, 5],  # Dnorm+ 1.0      -> condition: paper 0.5, saferleval 1.0 (violating seed only)
}


@pytest.fixture
def episodes(tmp_path):
    rows = []
    for (seed, phase, it), costs in COSTS.items():
        for final in ((phase,) if phase == "train" else ("final_explore", "final_greedy")):
            rows += [{"task": "goal", "bound": D, "algo": "a", "seed": seed, "phase": final, "iteration": it,
                      "episode": i, "return": 1.0, "cost": float(c)} for i, c in enumerate(costs)]
    path = tmp_path / "episodes.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _iqm(result, phase):
    row = result.iqm[(result.iqm["phase"] == phase) & (result.iqm["metric"] == "Dnorm_plus")].iloc[0]
    return row["iqm"]


def test_the_two_definitions_on_the_hand_worked_table(episodes):
    summary = metrics.summarise(episodes)
    paper = metrics.aggregate(summary, reps=200)
    suite = metrics.aggregate(summary, reps=200, dnorm_plus="saferleval")
    assert _iqm(paper, "train") == pytest.approx((0.25 + 0.5) / 2)
    assert _iqm(suite, "train") == pytest.approx((0.5 + 0.5) / 2)
    assert _iqm(paper, "final_greedy") == pytest.approx(0.5)
    assert _iqm(suite, "final_greedy") == pytest.approx(1.0)
    runs = suite.run_metrics.set_index(["seed", "phase"])["Dnorm_plus"]
    assert runs[(0, "train")] == pytest.approx(0.5) and runs[(0, "final_greedy")] == 0.0
    # every other metric is the same under both definitions
    for m in ("R", "C", "V", "Dnorm"):
        assert paper.iqm[paper.iqm["metric"] == m]["iqm"].tolist() == suite.iqm[suite.iqm["metric"] == m]["iqm"].tolist()
    # bootstrap replicates: resampling {seed 0, seed 0} gives 0, any draw with seed 1 gives 1.0 (paper: 0, 0.5, 1)
    greedy = lambda r: set(np.round(r.bootstrap[r.bootstrap["phase"] == "final_greedy"]["Dnorm_plus"], 12))  # noqa: E731
    assert greedy(suite) == {0.0, 1.0} and greedy(paper) == {0.0, 0.5, 1.0}
    stats = suite.condition_stats.set_index("phase")
    assert np.isnan(stats.loc["final_greedy", "Dnorm_plus_std"])  # one violating seed: no spread
    assert paper.condition_stats.set_index("phase").loc["final_greedy", "Dnorm_plus_std"] == pytest.approx(np.sqrt(0.5))
    assert suite.meta["dnorm_plus"] == "saferleval" and paper.meta["dnorm_plus"] == "paper"


def test_the_cli_option_and_a_bad_name(episodes, tmp_path, capsys):
    assert main(["evaluate", str(episodes), "--out", str(tmp_path / "out"), "--reps", "50",
                 "--dnorm-plus", "saferleval"]) == 0
    iqm = pd.read_csv(tmp_path / "out" / "iqm.csv")
    assert iqm[(iqm["phase"] == "final_greedy") & (iqm["metric"] == "Dnorm_plus")]["iqm"].iloc[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="dnorm_plus must be one of paper, saferleval, not 'eq5'"):
        metrics.aggregate(metrics.summarise(episodes), dnorm_plus="eq5")
    with pytest.raises(SystemExit):
        main(["aggregate", "x.parquet", "--out", str(tmp_path / "o"), "--dnorm-plus", "eq5"])
    assert "invalid choice: 'eq5'" in capsys.readouterr().err
