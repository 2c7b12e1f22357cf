"""Seed planning (metrics.seeds, `python -m metrics plan-seeds`): planned CI widths against
independent K-seed experiments, P(tier) for clear-cut and on-threshold algorithms, agreement
with stage 2's bootstrap, clear errors, determinism, the docs' example."""

import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metrics import EpisodeTableError, aggregate, assign_tiers, iqm, summarise, write_aggregate, write_summary
from metrics.cli import main
from metrics.seeds import load_runs, plan_seeds, seeds_needed

from test_metrics_episodes import episodes, write

ROOT = Path(__file__).resolve().parents[1]
TASKS, BOUNDS = ("a", "b", "c", "d"), (10.0, 20.0, 40.0)
STRATA = [(t, b) for t in TASKS for b in BOUNDS]  # 12 strata, as in the paper's grid
# the synthetic runs tables hold one phase, which stage 2's checks (rightly) warn about
pytestmark = pytest.mark.filterwarnings("ignore::metrics.schema.MetricsWarning")


def runs_table(algo, dnorm, V=0.3, dnorm_plus=0.2, phase="final_greedy"):
    """A runs table (Summary.runs' columns): dnorm[s] holds stratum s's seeds' Dnorm values."""
    rows = []
    for (task, bound), values in zip(STRATA, dnorm):
        for seed, d in enumerate(values):
            rows.append({"task": task, "bound": bound, "algo": algo, "seed": seed, "phase": phase, "R": 1.0,
                         "C": bound * (1 + d), "V": V, "Dnorm": d, "Dnorm_plus": dnorm_plus, "source": f"{algo}.parquet"})
    return pd.DataFrame(rows)


def exact_spread(mus, sigma, n, rng):
    """n seeds per stratum whose values have mean mu and plug-in std sigma exactly (a known spread)."""
    z = rng.standard_normal((len(mus), n))
    z = (z - z.mean(axis=1, keepdims=True)) / z.std(axis=1, keepdims=True)
    return np.asarray(mus)[:, None] + sigma * z


def measured_width(mus, sigma, k, experiments, rng):
    """95 % interval width of IQM(Dnorm) over independent experiments of k fresh seeds per stratum."""
    seeds = np.asarray(mus)[None, :, None] + sigma * rng.standard_normal((experiments, len(mus), k))
    values = iqm(seeds.mean(axis=2), axis=1)
    low, high = np.percentile(values, [2.5, 97.5])
    return high - low


def test_planned_ci_width_matches_independent_k_seed_experiments():
    # strata 1 apart, sigma 0.2: their order never changes, so IQM(Dnorm) = mean of the middle 6
    # stratum means and its 95 % width is 2 * 1.96 * sigma / sqrt(6 K) (hand formula)
    mus, sigma, n = np.arange(12) - 5.5, 0.2, 40
    rng = np.random.default_rng(1)
    plan = plan_seeds(runs_table("x", exact_spread(mus, sigma, n, rng)), k_max=160, reps=2000, seed=3)
    table = plan.table.set_index("k")
    for k in (4, 10, 40, 160):
        formula = 2 * 1.96 * sigma / np.sqrt(6 * k)
        measured = measured_width(mus, sigma, k, 4000, rng)
        planned = table.loc[k, "ci_width_Dnorm"]
        assert measured == pytest.approx(formula, rel=0.07)
        assert planned == pytest.approx(measured, rel=0.1), (k, planned, measured)
        assert table.loc[k, "extrapolated"] == (k > n)
    # a constant metric has no spread at any K
    assert (table["ci_width_V"] == 0).all() and (table["ci_width_Dnorm_plus"] == 0).all()


def test_extrapolation_is_the_spread_at_k_have_scaled_by_sqrt_k_have_over_k():
    rng = np.random.default_rng(2)
    plan = plan_seeds(runs_table("x", exact_spread(np.linspace(-1, 1, 12), 0.3, 5, rng)), k_max=20, reps=500)
    w = plan.table.set_index("k")["ci_width_Dnorm"]
    for k in (6, 11, 20):
        assert w[k] == pytest.approx(w[5] * np.sqrt(5 / k), rel=1e-9)


def test_p_tier_is_one_when_clear_cut_and_one_half_on_a_threshold():
    rng = np.random.default_rng(4)
    clear = runs_table("clear", -0.5 + 0.05 * rng.standard_normal((12, 3)))  # tier 2 (V 0.3, Dnorm+ 0.2) by far
    e = 0.1 * rng.standard_normal((12, 2))
    mus = np.linspace(-0.3, 0.3, 12)[:, None]
    edge = runs_table("edge", np.hstack([mus + e, mus - e]))  # symmetric about 0: IQM(Dnorm) sits on the threshold
    plan = plan_seeds(pd.concat([clear, edge]), k_max=30, reps=2000, target=0.9)
    table, needed = plan.table.set_index("algo"), plan.needed.set_index("algo")

    assert (table.loc["clear", "p_tier"] == 1.0).all() and (table.loc["clear", "tier"] == 2).all()
    assert needed.loc["clear", "settled"] and needed.loc["clear", "k_needed"] == 2 and needed.loc["clear", "add_seeds"] == 0
    assert needed.loc["edge", "tier"] in (0, 2)
    assert np.abs(table.loc["edge", "p_tier"] - 0.5).max() < 0.08  # resampled (K=2) and extrapolated alike
    assert not needed.loc["edge", "settled"] and pd.isna(needed.loc["edge", "k_needed"])


def test_an_algorithm_near_a_threshold_needs_more_seeds_and_the_table_says_how_many():
    rng = np.random.default_rng(5)
    near = runs_table("near", exact_spread(np.linspace(-0.35, 0.25, 12), 0.3, 3, rng))  # IQM(Dnorm) = -0.05
    plan = plan_seeds(near, k_max=30, reps=2000, target=0.9)
    row, curve = plan.needed.iloc[0], plan.table
    assert row["tier"] == 2 and row["k_have"] == 3 and not row["settled"]
    assert row["k_needed"] == seeds_needed(curve["k"], curve["p_tier"], 0.9) and row["k_needed"] > 3
    assert row["k_needed_extrapolated"] and row["add_seeds"] == row["k_needed"] - 3
    assert curve["p_tier"].iloc[-1] > curve["p_tier"].iloc[0]


def test_seeds_needed_is_where_p_stays_at_or_above_the_target():
    ks = [2, 3, 4, 5, 6]
    assert seeds_needed(ks, [0.95, 0.85, 0.91, 0.92, 0.93], 0.9) == 4  # an early lucky K does not count
    assert seeds_needed(ks, [0.9] * 5, 0.9) == 2
    assert seeds_needed(ks, [0.5, 0.6, 0.7, 0.95, 0.89], 0.9) is None


def small_sweep(tmp_path, seeds=3, extra_seed_stratum=None):
    """Episode files: 2 algorithms x 2 tasks x 2 bounds x `seeds` seeds, train + final phases."""
    rng = np.random.default_rng(7)
    paths = []
    for algo, scale in (("ppo", 2.0), ("lag", 1.1)):
        for t in ("a", "b"):
            for b in (10.0, 20.0):
                n = seeds + (1 if extra_seed_stratum == (algo, t, b) else 0)
                for k in range(n):
                    df = pd.concat(
                        [episodes(rng.uniform(0, scale * b, 6), task=t, bound=b, algo=algo, seed=k, iteration=j) for j in range(2)]
                        + [episodes(rng.uniform(0, scale * b, 5), task=t, bound=b, algo=algo, seed=k, phase=p, iteration=2)
                           for p in ("final_explore", "final_greedy")])
                    paths.append(write(df, tmp_path / f"{algo}_{t}_{b:g}_{k}.parquet"))
    return paths


def test_p_tier_now_and_widths_at_k_have_are_stage_2s_own(tmp_path):
    summary = summarise(small_sweep(tmp_path))
    result = aggregate(summary, reps=300, seed=5)
    tiers = assign_tiers(result)["tiers"].set_index(["algo", "phase"])
    plan = plan_seeds(summary.runs, k_max=6, reps=300, seed=5)
    for row in plan.needed.itertuples():
        assert row.tier == tiers.loc[(row.algo, row.phase), "tier"]
        assert row.p_tier == tiers.loc[(row.algo, row.phase), f"p_tier{row.tier}"]  # exactly: the same draws
    at_k_have = plan.table[plan.table["k"] == 3].set_index(["algo", "phase"])
    ci = result.iqm.set_index(["algo", "phase", "metric"])
    for (algo, phase), row in at_k_have.iterrows():
        for m in ("V", "Dnorm", "Dnorm_plus"):
            assert row[f"ci_width_{m}"] == pytest.approx(ci.loc[(algo, phase, m), "ci_high"] - ci.loc[(algo, phase, m), "ci_low"], abs=1e-12)


def test_unequal_strata_plan_from_the_fewest_seeds_a_stratum_has(tmp_path):
    summary = summarise(small_sweep(tmp_path, seeds=3, extra_seed_stratum=("lag", "a", 10.0)))
    plan = plan_seeds(summary.runs, k_max=5, reps=100)
    needed, table = plan.needed.set_index("algo"), plan.table
    assert (needed.loc["lag", "k_have"] == 3).all()  # one stratum has 4 seeds, the others 3
    assert list(table.loc[table["algo"] == "lag", "extrapolated"].iloc[:4]) == [False, False, True, True]


def test_cli_writes_tables_and_figure_from_any_input_kind(tmp_path, capsys):
    paths = small_sweep(tmp_path)
    out = tmp_path / "plan"
    assert main(["plan-seeds", *paths, "--out", str(out), "--k-max", "8", "--reps", "200"]) == 0
    printed = capsys.readouterr().out
    assert printed == (out / "needed.md").read_text() and "| algo | phase | seeds per stratum now |" in printed
    assert {f.name for f in out.iterdir()} == {"plan.csv", "needed.csv", "needed.md", "plan.json", "seed_planning.png"}
    assert (out / "seed_planning.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(out / "plan.csv")
    assert list(table.columns) == ["algo", "phase", "k", "extrapolated", "tier", "p_tier",
                                   "ci_width_V", "ci_width_Dnorm", "ci_width_Dnorm_plus"]
    assert len(table) == 2 * 3 * 7 and set(table["k"]) == set(range(2, 9))

    # the same plan from summary files and from a stage-2 folder
    summaries = []
    for i, p in enumerate(paths):
        summaries.append(str(tmp_path / f"s{i}.parquet"))
        write_summary(summarise(p), summaries[-1])
    write_aggregate(aggregate(summarise(paths), reps=10), tmp_path / "agg")
    for inputs in (summaries, [str(tmp_path / "agg")]):
        other = tmp_path / f"plan{len(inputs)}"
        assert main(["plan-seeds", *inputs, "--out", str(other), "--k-max", "8", "--reps", "200", "--no-figure"]) == 0
        for name in ("plan.csv", "needed.csv"):
            pd.testing.assert_frame_equal(pd.read_csv(other / name), pd.read_csv(out / name), check_exact=True)
        assert not (other / "seed_planning.png").exists()

    # one phase only
    assert main(["plan-seeds", *paths, "--out", str(tmp_path / "g"), "--phase", "final_greedy", "--reps", "50", "--no-figure"]) == 0
    assert set(pd.read_csv(tmp_path / "g" / "needed.csv")["phase"]) == {"final_greedy"}


def test_without_matplotlib_the_tables_are_written_and_the_figure_is_a_warning(tmp_path, monkeypatch, capsys):
    paths = small_sweep(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # what an absent matplotlib looks like to an import
    assert main(["plan-seeds", *paths, "--out", str(tmp_path / "p"), "--reps", "50"]) == 0
    assert "warning: the seed-planning figure needs matplotlib" in capsys.readouterr().err
    assert {f.name for f in (tmp_path / "p").iterdir()} == {"plan.csv", "needed.csv", "needed.md", "plan.json"}


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    paths = small_sweep(tmp_path, seeds=1)
    out = tmp_path / "out"
    assert main(["plan-seeds", *paths, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"lag_a_10_0\.parquet: algo=lag, phase=train: stratum task=a, bound=10 has 1 seed \(seed=0; 4 of 4 strata", err), err
    assert "at least 2 seeds in every (task, bound) stratum" in err and not out.exists()

    paths = small_sweep(tmp_path)
    assert main(["plan-seeds", *paths, "--out", str(out), "--k-max", "1"]) == 2
    assert "--k-max must be >= 2 (got 1)" in capsys.readouterr().err
    assert main(["plan-seeds", *paths, "--out", str(out), "--target", "1.5"]) == 2
    assert "--target must be a probability in (0, 1] (got 1.5)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["plan-seeds", *paths, "--out", str(out), "--phase", "final"])
    assert exit_.value.code == 2 and "invalid choice: 'final'" in capsys.readouterr().err
    assert not out.exists()

    runs = summarise(paths).runs
    with pytest.raises(ValueError, match=r"k_max must be an integer >= 2 \(got 1\)"):
        plan_seeds(runs, k_max=1)
    with pytest.raises(ValueError, match=r"unknown phase\(s\) 'final' \(phases: train, final_explore, final_greedy\)"):
        plan_seeds(runs, phases=["final"])
    with pytest.raises(EpisodeTableError, match=r"no runs in phase\(s\) final_greedy \(phases in the runs: train\)"):
        plan_seeds(runs[runs["phase"] == "train"], phases="final_greedy")
    with pytest.raises(ValueError, match=r"runs table: missing column\(s\) \['V'\]"):
        plan_seeds(runs.drop(columns="V"))
    summary_file = tmp_path / "s.parquet"
    write_summary(summarise(paths[0]), summary_file)
    with pytest.raises(EpisodeTableError, match=r"seed=0, phase=train appears in more than one input: ") as dup:
        load_runs([paths[0], summary_file])
    assert paths[0] in str(dup.value) and str(summary_file) in str(dup.value)


def test_same_seed_same_plan_other_seed_other_draws():
    rng = np.random.default_rng(6)
    runs = runs_table("x", exact_spread(np.linspace(-0.3, 0.2, 12), 0.3, 4, rng))
    a, b, c = (plan_seeds(runs, k_max=10, reps=300, seed=s) for s in (1, 1, 2))
    pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
    pd.testing.assert_frame_equal(a.needed, b.needed, check_exact=True)
    assert not np.array_equal(a.table["ci_width_Dnorm"], c.table["ci_width_Dnorm"])


def _block(text, name):
    match = re.search(rf"<!-- {name} -->\n```[a-z]*\n(.*?)```", text, re.S)
    assert match, f"docs/metrics.md has no {name} block"
    return match.group(1)


def test_the_docs_example_prints_what_the_docs_show(tmp_path, capsys, monkeypatch):
    doc = (ROOT / "docs" / "metrics.md").read_text()
    command = shlex.split(_block(doc, "seed-planning-command").strip())
    assert command[:4] == ["python", "-m", "metrics", "plan-seeds"]
    command[command.index("--out") + 1] = str(tmp_path / "plan-out")
    monkeypatch.chdir(ROOT)
    assert main(command[3:]) == 0
    assert capsys.readouterr().out == _block(doc, "seed-planning-needed")
