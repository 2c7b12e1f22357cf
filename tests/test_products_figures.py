"""Figures built from a small synthetic sweep run through the metrics engine's stage 1:
valid PDF/PNG files, and the numbers they show equal the engine's."""
import glob
import hashlib
import os

import numpy as np
import pandas as pd
import pytest

import metrics
from metrics.schema import FINAL_PHASES
from metrics.summary import read_summaries
from algos import registry as algo_registry
from workflow.products import fig_final, fig_training, settings, sweep_io, synthetic
from workflow.products.catalog import figure1 as figure1_module
from workflow.products.registry import by_name

PDF_MAGIC = b"%PDF-"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    episodes, traces = synthetic.synthetic_sweep()
    runs = synthetic.write_sweep(root, episodes, traces)
    out = root / "metrics"
    summary = read_summaries([os.path.join(r["dir"], "summary.parquet") for r in runs])
    metrics.write_aggregate(metrics.aggregate(summary, reps=50, seed=0), out)
    metrics.tiers(out)
    return {"root": str(root), "runs": runs, "episodes": episodes, "traces": traces, "metrics": str(out)}


@pytest.fixture
def cfg():
    return settings.resolve(None)


def assert_figure_files(pdf, png, min_bytes=10_000):
    with open(pdf, "rb") as f:
        assert f.read(5) == PDF_MAGIC
    with open(png, "rb") as f:
        assert f.read(8) == PNG_MAGIC
    assert os.path.getsize(pdf) > min_bytes and os.path.getsize(png) > min_bytes
    assert not glob.glob(os.path.join(os.path.dirname(pdf), ".*.tmp"))  # no temp files left behind
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(png).st_mode & 0o777 == 0o666 & ~mask  # readable like any file the user writes


def build(name):
    """The build function of a product of the table."""
    return by_name()[name].build


def _paths(tmp_path, name):
    return [str(tmp_path / f"{name}.pdf"), str(tmp_path / f"{name}.png")]


def _runs(sweep, name, task=None):
    return [os.path.join(r["dir"], name) for r in sweep["runs"] if task is None or r["task"] == task]


def _figure1_inputs(sweep):
    return {name: os.path.join(sweep["metrics"], f"{name}.parquet") for name in ("run_metrics", "final_episodes")}


def test_figure1_files_and_legend_violation_rates_equal_the_engines(sweep, cfg, tmp_path):
    run = {"task": "circle", "bound": 25.0, "algo": "focops", "seed": 1}
    out = _paths(tmp_path, "figure1")
    assert build("figure1")(_figure1_inputs(sweep), out, {**cfg, "figure1": run}, {}) == run
    assert_figure_files(*out)

    summary_path = os.path.join(sweep["root"], "circle", "d25", "focops", "seed1", "summary.parquet")
    summary = read_summaries([summary_path])
    v = summary.runs.set_index("phase")["V"]
    costs = summary.final_episodes
    fig = fig_final.figure1(costs, {p: v[p] for p in FINAL_PHASES}, task="circle", bound=25.0,
                            algo="focops", seed=1)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    # V of this run by hand from the raw episodes: share of final episodes with cost > d.
    raw = sweep["episodes"]
    raw = raw[(raw.task == "circle") & (raw.bound == 25.0) & (raw.algo == "focops") & (raw.seed == 1)]
    for phase, name in (("final_explore", "with exploration noise"), ("final_greedy", "greedy")):
        by_hand = float((raw[raw.phase == phase]["cost"] > 25.0).mean())
        assert v[phase] == pytest.approx(by_hand)
        assert any(label.startswith(name) and f"V = {100 * by_hand:.0f} %" in label for label in labels), labels
    assert "bound d = 25" in labels
    # every final episode is drawn, one marker each
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == len(costs)


def test_figure1_shows_the_run_with_the_largest_noise_vs_greedy_gap_in_v(sweep, cfg, tmp_path):
    raw = sweep["episodes"]
    final = raw[raw.phase.isin(FINAL_PHASES)].assign(over=lambda d: d.cost > d.bound)
    v = final.groupby(["task", "bound", "algo", "seed", "phase"])["over"].mean().unstack("phase")
    gap = (v["final_explore"] - v["final_greedy"]).abs()
    # the runs with the largest gap, in the tie order: task table, bound, algorithm order, seed
    order = {"task": ["goal", "circle"], "algo": ["ppo", "ppo_lag", "focops", "p3o"]}
    best = sorted(gap[gap == gap.max()].index, key=lambda r: (order["task"].index(r[0]), r[1],
                                                              order["algo"].index(r[2]), r[3]))
    assert len(best) == 2  # this sweep has a tie at the top, so the tie order decides
    task, bound, algo, seed = best[0]
    shown = build("figure1")(_figure1_inputs(sweep), _paths(tmp_path, "figure1"), cfg, {})
    assert shown == {"task": task, "bound": bound, "algo": algo, "seed": seed}

    run_metrics = pd.read_parquet(_figure1_inputs(sweep)["run_metrics"])
    _, why = figure1_module.choose_run(run_metrics, None, "ppo")
    assert why == f"largest |V with noise - V greedy| of the sweep: {100 * gap.max():.0f} points"
    # a tie (every gap 0) goes to the first constrained run, not the baseline
    tied = run_metrics.assign(V=0.0)
    assert figure1_module.choose_run(tied, None, "ppo")[0] == {"task": "goal", "bound": 15.0, "algo": "ppo_lag",
                                                               "seed": 0}
    with pytest.raises(ValueError, match="products.figure1: the sweep has no run"):
        figure1_module.choose_run(run_metrics, {"task": "push", "bound": 25, "algo": "ppo", "seed": 0}, "ppo")


def test_figure1_without_a_final_phase_is_a_clear_error(tmp_path):
    costs = pd.DataFrame({"phase": ["final_explore"], "episode": [0], "cost": [1.0]})
    with pytest.raises(ValueError, match="no final_greedy episodes"):
        fig_final.figure1(costs, {"final_explore": 0.0, "final_greedy": 0.0}, task="goal", bound=25, algo="ppo",
                          seed=0)


def test_final_cost_figure_error_bars_and_annotations_equal_the_engines(sweep, cfg, tmp_path):
    out = _paths(tmp_path, "figureA_final_goal")
    inputs = {name: os.path.join(sweep["metrics"], f"{name}.parquet") for name in ("final_episodes", "condition_stats")}
    build("figureA_final_costs")(inputs, out, cfg, {"task": "goal"})
    assert_figure_files(*out)

    stats = pd.read_parquet(inputs["condition_stats"])
    fig = fig_final.figure_final_costs(pd.read_parquet(inputs["final_episodes"]), stats[stats.task == "goal"],
                                       task="goal")
    cond = pd.read_csv(os.path.join(sweep["metrics"], "conditions.csv"))
    cond = cond[(cond.task == "goal") & cond.phase.isin(FINAL_PHASES)].set_index(["bound", "algo", "phase"])
    raw = sweep["episodes"]
    raw = raw[(raw.task == "goal") & raw.phase.isin(FINAL_PHASES)]
    seed_means = raw.groupby(["bound", "algo", "phase", "seed"])["cost"].mean()
    n_bars = 0
    for ax, bound in zip(fig.axes, sorted(raw.bound.unique())):
        assert ax.get_title() == f"d = {bound:g}"
        # one annotation per box: V in percent and Dnorm+, equal to conditions.csv
        texts = sorted(t.get_text() for t in ax.texts)
        want = sorted(fig_final.annotation(r.V_mean, r.Dnorm_plus_mean) for r in cond.loc[bound].itertuples())
        assert texts == want
        for container in ax.containers:
            algo, phase = container.get_label().split("|")
            row = cond.loc[(bound, algo, phase)]
            (x, y), = container.lines[0].get_xydata()
            segment = container.lines[2][0].get_segments()[0]
            # the marker is the mean over seeds of the seed mean costs; the bar spans +- their sample std
            assert y == pytest.approx(row.C_mean) == pytest.approx(seed_means.loc[(bound, algo, phase)].mean())
            assert segment[1][1] - y == pytest.approx(row.C_std)
            assert y - segment[0][1] == pytest.approx(row.C_std)
            assert row.C_std == pytest.approx(seed_means.loc[(bound, algo, phase)].std(ddof=1))
            n_bars += 1
    assert n_bars == len(cond)  # every (bound, algo, final phase) has its error bar
    assert fig_final.annotation(1.0, 12.3581) == "V 100 %, D+ 12.358"
    assert fig_final.annotation(0.004, 0.0) == "V 0.4 %, D+ 0.000"


def test_final_cost_panel_titles_clear_the_longest_annotations(sweep):
    """The rotated V / D+ texts above the boxes end below each panel's title, however long."""
    episodes = pd.read_parquet(os.path.join(sweep["metrics"], "final_episodes.parquet"))
    stats = pd.read_parquet(os.path.join(sweep["metrics"], "condition_stats.parquet"))
    stats = stats[stats.task == "goal"].assign(V_mean=0.413, Dnorm_plus_mean=12.3456)  # "V 41.3 %, D+ 12.346"
    fig = fig_final.figure_final_costs(episodes, stats, task="goal")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        title = ax.title.get_window_extent(renderer)
        assert ax.texts and all(t.get_window_extent(renderer).y1 < title.y0 for t in ax.texts)


def test_seed_band_is_the_mean_and_std_over_seeds_of_the_moving_average():
    df = pd.DataFrame({"seed": [0, 0, 0, 1, 1, 1], "iteration": [0, 1, 2, 0, 1, 2],
                       "R": [1.0, 3.0, 5.0, 3.0, 5.0, 7.0]})
    band = fig_training.seed_band(df, "R", "iteration", window=2)
    # seed 0 smoothed: 1, 2, 4; seed 1: 3, 4, 6 -> means 2, 3, 5; sample std sqrt(2) each
    assert band["mean"].tolist() == [2.0, 3.0, 5.0]
    assert band["std"].to_numpy() == pytest.approx([np.sqrt(2)] * 3)
    one_seed = fig_training.seed_band(df[df.seed == 0], "R", "iteration", window=1)
    assert one_seed["std"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="window must be >= 1"):
        fig_training.seed_band(df, "R", "iteration", window=0)


def test_training_curves_plot_the_engines_per_iterate_metrics(sweep, cfg, tmp_path):
    out = _paths(tmp_path, "figureA_curves_circle")
    summaries = _runs(sweep, "summary.parquet", "circle")
    build("figureA_training_curves")({"summaries": summaries, "traces": _runs(sweep, "trace.parquet", "circle")}, out,
                                     cfg, {"task": "circle"})
    assert_figure_files(*out)

    iterates = read_summaries(summaries).iterates
    iterates = iterates[iterates.phase == "train"].merge(sweep["traces"], on=["task", "bound", "algo", "seed", "iteration"])
    fig = fig_training.figure_training_curves(iterates, task="circle", window=1)
    cost_ax = fig.axes[2]  # row 2 (cost), first bound
    line = next(l for l in cost_ax.get_lines() if l.get_label() == "PPO-Lag")
    expected = (iterates[(iterates.bound == 15.0) & (iterates.algo == "ppo_lag")]
                .groupby("env_steps")["C"].mean())
    assert line.get_xdata().tolist() == expected.index.tolist()
    assert line.get_ydata() == pytest.approx(expected.to_numpy())
    assert cost_ax.get_ylabel().startswith("episode cost C")
    assert any(l.get_label() == "bound d" and l.get_ydata()[0] == 15.0 for l in cost_ax.get_lines())


def test_multiplier_figure_overlays_the_bounds_per_task_and_algorithm(sweep, cfg, tmp_path):
    out = _paths(tmp_path, "figureA2")
    build("figureA2_multipliers")({"traces": _runs(sweep, "trace.parquet")}, out, cfg, {})
    assert_figure_files(*out)
    traces = sweep_io.read_traces(_runs(sweep, "trace.parquet"))
    fig = fig_training.figure_multipliers(traces)
    # rows: tasks (paper order); columns: algorithms with a multiplier, PPO-Lag first; PPO has none
    assert len(fig.axes) == 2 * 3
    assert [ax.get_title() for ax in fig.axes[:3]] == ["PPO-Lag", "FOCOPS", "P3O"]
    # each panel's y axis names its algorithm's multiplier as the algorithm table does, the task left of each row
    for row, task in enumerate(["Goal", "Circle"]):
        for ax, algo in zip(fig.axes[3 * row:3 * row + 3], ["ppo_lag", "focops", "p3o"]):
            want = algo_registry.ALGORITHMS[algo].multiplier
            assert ax.get_ylabel() == (f"{task}\n{want}" if ax is fig.axes[3 * row] else want)
    for ax in fig.axes:
        assert [l.get_label() for l in ax.get_lines()] == ["d = 15", "d = 25"]  # every bound in one panel
    ax = fig.axes[0]  # goal, PPO-Lag
    for line, band, bound in zip(ax.get_lines(), ax.collections, (15.0, 25.0)):
        t = traces[(traces.task == "goal") & (traces.bound == bound) & (traces.algo == "ppo_lag")]
        stats = t.groupby("env_steps")["multiplier"].agg(["mean", "std"])
        assert line.get_ydata() == pytest.approx(stats["mean"].to_numpy())
        # the shading spans mean +- 1 sample std over seeds
        ys = band.get_paths()[0].vertices[:, 1]
        assert ys.max() == pytest.approx((stats["mean"] + stats["std"]).max())
        assert ys.min() == pytest.approx((stats["mean"] - stats["std"]).min())


def test_trace_outside_a_run_folder_without_keys_is_a_clear_error(tmp_path):
    path = tmp_path / "trace.parquet"
    pd.DataFrame({"iteration": [0], "multiplier": [0.0]}).to_parquet(path)
    with pytest.raises(ValueError, match="expected a file of a run folder.*no task/bound/algo/seed columns"):
        sweep_io.read_traces([str(path)])
    pd.DataFrame({"iteration": [0]}).to_parquet(path)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['multiplier'\]"):
        sweep_io.read_traces([str(path)])


def test_figures_are_byte_identical_when_rebuilt(sweep, cfg, tmp_path):
    digests = []
    for i in range(2):
        out = _paths(tmp_path, f"again{i}")
        build("figureA2_multipliers")({"traces": _runs(sweep, "trace.parquet", "goal")}, out, cfg, {})
        digests.append([hashlib.sha256(open(p, "rb").read()).hexdigest() for p in out])
    assert digests[0] == digests[1]


def test_final_cost_boxes_show_the_bulk_and_count_the_outliers_cut_off():
    """A few huge episode costs (500 against a bulk under 80) no longer set the y axis: it ends
    above every whisker and error bar, and each box's outliers beyond it are counted at the top."""
    rng = np.random.default_rng(0)
    rows, stats = [], []
    for algo, scale in (("ppo", 20.0), ("ppo_lag", 2.0)):
        for phase in FINAL_PHASES:
            for seed in range(3):
                costs = rng.exponential(scale, 50)
                if algo == "ppo" and seed == 0:
                    costs[:3] = 500.0
                rows += [{"task": "goal", "bound": 25.0, "algo": algo, "phase": phase, "seed": seed, "cost": c}
                         for c in costs]
    costs = pd.DataFrame(rows)
    for (algo, phase), g in costs.groupby(["algo", "phase"]):
        means = g.groupby("seed")["cost"].mean()
        stats.append({"bound": 25.0, "algo": algo, "phase": phase, "C_mean": means.mean(), "C_std": means.std(),
                      "V_mean": 0.1, "Dnorm_plus_mean": 0.2})
    fig = fig_final.figure_final_costs(costs, pd.DataFrame(stats), task="goal")
    ax = fig.axes[0]
    top = ax.get_ylim()[1]
    whisker_tops = []  # matplotlib's upper whisker: the largest cost within Q3 + 1.5 IQR
    for _, g in costs.groupby(["algo", "phase"]):
        q1, q3 = np.percentile(g.cost, [25, 75])
        whisker_tops.append(g.cost[g.cost <= q3 + 1.5 * (q3 - q1)].max())
    assert max(whisker_tops) <= top < 100  # the bulk fills the panel; 500 is off it
    counted = [t.get_text() for t in ax.texts if t.get_gid() == "outliers"]
    assert len(counted) == 2 and all(text.endswith("up to 500") for text in counted)
    # the counts are every cost of the PPO boxes above the axis
    want = sorted(int(((costs.algo == "ppo") & (costs.phase == p) & (costs.cost > top)).sum()) for p in FINAL_PHASES)
    assert sorted(int(text.split()[0]) for text in counted) == want and min(want) >= 3
    import matplotlib.pyplot as plt

    plt.close(fig)
