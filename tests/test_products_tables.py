"""Tables (and the figures that read stage-2/3 outputs) built from a synthetic sweep run
through the metrics engine: their numbers equal the engine's, the bold cells are the right
ones with the baseline excluded, and the files are well formed."""
import os

import numpy as np
import pandas as pd
import pytest

import metrics
from workflow.products import fig_cdf, fig_sensitivity, settings, setup_tables, synthetic, tablefmt, tables
from workflow.products.registry import by_name

PHASES2 = ["train", "final_greedy"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    episodes, traces = synthetic.synthetic_sweep()
    runs = synthetic.write_sweep(root / "runs", episodes, traces)
    summary = metrics.read_summaries([os.path.join(r["dir"], "summary.parquet") for r in runs])
    out = root / "metrics"
    metrics.write_aggregate(metrics.aggregate(summary, reps=200, seed=0), out)
    metrics.tiers(out)  # the paper's Table 1 thresholds
    (root / "thresholds.yaml").write_text("minimal: {Dnorm: 0.0}\nmoderate: {V: 0.5}\n"
                                          "substantial: {V: 0.1, Dnorm_plus: 0.1}\nstrict: {V: 0.0, Dnorm_plus: 0.0}\n")
    files = {name: str(out / name) for name in ("iqm.csv", "tiers.csv", "conditions.csv", "cdf.parquet",
                                                "bootstrap.parquet")}
    return {**files, "thresholds": str(root / "thresholds.yaml"), "runs": runs}


def build(name):
    """The build function of a product of the table."""
    return by_name()[name].build


@pytest.fixture
def cfg():
    return settings.resolve(None)


def _outs(tmp_path, name):
    return {ext: str(tmp_path / f"{name}.{ext}") for ext in ("csv", "md", "tex", "html")}


@pytest.mark.parametrize("kind, phases", [("table2", PHASES2), ("tableA3", PHASES2),
                                          ("tableA2", ["final_explore", "final_greedy"])])
def test_iqm_tables_hold_the_engines_numbers(engine, cfg, tmp_path, kind, phases):
    out = _outs(tmp_path, kind)
    build(kind)({"iqm": engine["iqm.csv"], "tiers": engine["tiers.csv"]}, out, cfg, {})
    got = pd.read_csv(out["csv"]).set_index("algo")
    iqm = pd.read_csv(engine["iqm.csv"])
    tiers = pd.read_csv(engine["tiers.csv"]).set_index(["algo", "phase"])
    assert sorted(got.index) == sorted(iqm["algo"].unique())
    for row in iqm[iqm["phase"].isin(phases)].itertuples():
        for stat in ("iqm", "ci_low", "ci_high"):
            assert got.loc[row.algo, f"{row.phase}_{row.metric}_{stat}"] == getattr(row, stat)  # exact
    for algo in got.index:
        for phase in phases:
            assert got.loc[algo, f"{phase}_tier"] == tiers.loc[(algo, phase), "tier"]
            for k in range(5):
                assert got.loc[algo, f"{phase}_p_tier{k}"] == tiers.loc[(algo, phase), f"p_tier{k}"]
    assert not any(c.startswith("final_explore") for c in got.columns) or "final_explore" in phases
    md = open(out["md"]).read()
    tex = open(out["tex"]).read()
    assert tex.count(r"\begin{tabular}") == 1 and tex.rstrip().splitlines()[-4] == r"\end{tabular}"
    assert md.count("\n| ") == 1 + len(got)  # header + one row per algorithm
    assert open(out["html"]).read().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("rule", ["paper", "safe"])
def test_bold_cells_on_engine_output_follow_the_rule(engine, cfg, tmp_path, rule):
    out = _outs(tmp_path, "table2")
    table = build("table2")({"iqm": engine["iqm.csv"], "tiers": engine["tiers.csv"]}, out, {**cfg, "bold": rule}, {})
    iqm = pd.read_csv(engine["iqm.csv"]).set_index(["algo", "phase", "metric"])["iqm"]
    tiers = pd.read_csv(engine["tiers.csv"]).set_index(["algo", "phase"])["tier"]
    data = pd.read_csv(out["csv"]).set_index("algo")
    n_bold = 0
    for phase in PHASES2:
        safe = [a for a in data.index if a != "ppo" and (rule == "paper" or tiers[(a, phase)] >= 1)]
        for metric, pick in [("R", max), ("C", min), ("Dnorm", min), ("V", min), ("Dnorm_plus", min)]:
            expected = set()
            if safe:
                best = pick(iqm[(a, phase, metric)] for a in safe)
                expected = {a for a in safe if iqm[(a, phase, metric)] == best}
            assert set(data.index[data[f"{phase}_{metric}_bold"]]) == expected, (phase, metric)
            n_bold += len(expected)
    assert not data.filter(like="_bold").loc["ppo"].any()  # the baseline is never bold
    assert n_bold > 0  # the synthetic sweep has a safe final greedy algorithm (P3O)
    md = open(out["md"]).read()
    assert md.count("**") == 2 * (sum(sum(r) for r in table.bold) + 1)  # + the bold title


def hand_iqm(values):
    """iqm/tiers frames from {(algo, phase): (tier, {metric: value})}, CIs = value +- 1."""
    rows, tier_rows = [], []
    for (algo, phase), (tier, vals) in values.items():
        for metric in ("R", "C", "Dnorm", "V", "Dnorm_plus"):
            v = vals.get(metric, 0.0)
            rows.append((algo, phase, metric, v, v - 1, v + 1))
        p = [0.0] * 5
        p[tier] = 0.75
        p[(tier + 1) % 5] = 0.25
        tier_rows.append((algo, phase, tier, *p))
    return (pd.DataFrame(rows, columns=["algo", "phase", "metric", "iqm", "ci_low", "ci_high"]),
            pd.DataFrame(tier_rows, columns=["algo", "phase", "tier"] + [f"p_tier{k}" for k in range(5)]))


def test_bold_rules_on_a_hand_worked_case_where_they_disagree():
    # PPO has the best return but is the baseline; FOCOPS has the best return and the lowest V
    # of the others but is unsafe (tier 0); PPO-Lag and P3O tie on V; P3O has the best return
    # among the safe ones. The paper's rule (the default) bolds FOCOPS's return, the safe rule P3O's.
    vals = {
        ("ppo", "train"): (1, {"R": 50.0, "V": 0.2, "Dnorm": -0.1}),
        ("ppo_lag", "train"): (2, {"R": 30.0, "V": 0.1, "Dnorm": -0.2}),
        ("p3o", "train"): (3, {"R": 40.0, "V": 0.1, "Dnorm": -0.05}),
        ("focops", "train"): (0, {"R": 45.0, "V": 0.0, "Dnorm": 0.3}),
    }
    for (algo, _), (tier, v) in list(vals.items()):
        vals[(algo, "final_greedy")] = (0, v)  # nobody is safe when greedy
    iqm, tiers = hand_iqm(vals)
    paper = tables.table2(iqm, tiers, baseline="ppo")
    safe = tables.table2(iqm, tiers, baseline="ppo", bold="safe")
    col = {header: j for j, (group, header) in enumerate(paper.columns) if group.startswith("Training")}
    greedy = [j for j, (group, _) in enumerate(paper.columns) if group.startswith("Final")]
    algos = [r[0] for r in paper.rows]
    assert algos == ["PPO", "PPO-Lag", "FOCOPS", "P3O"]

    def bold_of(table, header):
        return {algos[i] for i in range(len(algos)) if table.bold[i][col[header]]}

    assert bold_of(paper, "IQM(R)") == {"FOCOPS"}
    assert bold_of(paper, "IQM(V)") == {"FOCOPS"}
    assert bold_of(paper, "IQM(Dnorm)") == {"PPO-Lag"}
    assert bold_of(paper, "Tier") == {"P3O"}
    assert bold_of(safe, "IQM(R)") == {"P3O"}
    assert bold_of(safe, "IQM(V)") == {"PPO-Lag", "P3O"}
    assert bold_of(safe, "IQM(Dnorm)") == {"PPO-Lag"}
    assert bold_of(safe, "Tier") == {"P3O"}
    for table in (paper, safe):
        assert bold_of(table, "P(tier)") == bold_of(table, "P(T0/../T4)") == set()
        assert not table.bold[0][col["IQM(R)"]]  # the baseline is never bold
    # all tier 0 when greedy: the paper's rule still bolds the best of each column, the safe rule nothing
    assert any(paper.bold[i][j] for i in range(len(algos)) for j in greedy)
    greedy_tier = paper.columns.index(("Final, greedy", "Tier"))
    assert not any(row[greedy_tier] for row in paper.bold)  # tier 0 is never bold
    assert not any(safe.bold[i][j] for i in range(len(algos)) for j in greedy)
    assert paper.notes[-1] == "Bold: best value per column, PPO (unconstrained baseline) excluded."
    assert "tier >= 1" in safe.notes[-1]
    # P(tier) is the share of replicates in the shown tier
    assert paper.cells[algos.index("P3O")][col["P(tier)"]] == "0.75"
    assert paper.cells[algos.index("P3O")][col["P(T0/../T4)"]] == "0/0/0/.75/.25"
    assert paper.cells[algos.index("FOCOPS")][col["P(T0/../T4)"]] == ".75/.25/0/0/0"
    assert "| FOCOPS | **45.0** |" in tablefmt.to_markdown(paper)
    assert "| P3O | **40.0** |" in tablefmt.to_markdown(safe)
    assert r"\textbf{40.0}" in tablefmt.to_latex(safe)
    # without a baseline, PPO competes and wins the return column
    assert tables.table2(iqm, tiers, baseline=None).bold[0][col["IQM(R)"]]
    with pytest.raises(ValueError, match="bold rule must be one of"):
        tables.table2(iqm, tiers, bold="best")


def test_table1_is_generated_from_the_configured_thresholds(engine, tmp_path):
    out = _outs(tmp_path, "table1")
    table = build("table1")({"thresholds": engine["thresholds"]}, out, {}, {})
    assert [r[0] for r in table.rows] == ["0", "1", "2", "3", "4"]
    assert [c[0] for c in table.cells] == ["Unsafe", "Minimal", "Moderate", "Substantial", "Strict"]
    assert table.cells[1][1] == "IQM(Dnorm) ≤ 0"
    assert table.cells[2][1] == "tier 1 and IQM(V) ≤ 0.5"
    assert table.cells[3][1] == "tier 2 and IQM(V) ≤ 0.1 and IQM(Dnorm+) ≤ 0.1"
    assert table.cells[4][2] == "IQM(Dnorm) ≤ 0 and IQM(V) ≤ 0 and IQM(Dnorm+) ≤ 0"
    data = pd.read_csv(out["csv"])
    assert data["V_max"].tolist()[2:] == [0.5, 0.1, 0.0]
    # a changed threshold shows in the table
    moved = metrics.load_thresholds()
    moved["moderate"]["V"] = 0.3
    moved["substantial"] = {}
    table = setup_tables.table1(moved)
    assert table.cells[2][1] == "tier 1 and IQM(V) ≤ 0.3"
    assert table.cells[3][1] == "as tier 2"
    assert table.cells[3][2] == "IQM(Dnorm) ≤ 0 and IQM(V) ≤ 0.3"
    assert "| 2 | Moderate | tier 1 and IQM(V) ≤ 0.3 |" in tablefmt.to_markdown(table)


def _run_json(tmp_path, name, algo, task="goal", **config):
    import json

    path = tmp_path / name / "run.json"
    path.parent.mkdir(parents=True)
    base = {"task": task, "bound": 25.0, "algo": algo, "seed": 0, "learning_rate": 5e-4, "policy_hidden": [32, 32],
            "lagrangian_lr": 3.0, "kappa_init": 0.01, "chunk_updates": 8, "env_kwargs": {}}
    path.write_text(json.dumps({"config": {**base, **config}, "preset": "cpu", "complete": True}))
    return str(path)


def test_table_a1_lists_the_recorded_hyperparameters_per_algorithm(tmp_path):
    paths = [_run_json(tmp_path, "a", "ppo"), _run_json(tmp_path, "b", "ppo_lag", seed=1),
             _run_json(tmp_path, "c", "ppo_lag", task="circle", bound=15.0),
             _run_json(tmp_path, "d", "ppo_lag", task="goal", seed=3, env_kwargs={"reward_distance_scale": 1.0}),
             _run_json(tmp_path, "e", "ppo", task="goal", seed=1, env_kwargs={"reward_distance_scale": 1.0})]
    # the goal runs disagree on a task option with their algorithm's other goal runs
    with pytest.raises(ValueError, match=r"runs of algorithm 'ppo' on task 'goal' disagree on task option "
                                         r"'reward_distance_scale'.*/a/run.json.*/e/run.json"):
        setup_tables.table_a1(setup_tables.read_run_configs(paths), own_scalars={})
    paths = paths[:3]
    own = {"ppo": set(), "ppo_lag": {"lagrangian_lr"}, "p3o": {"kappa_init"}}
    table = setup_tables.table_a1(setup_tables.read_run_configs(paths), own_scalars=own)
    assert [c[1] for c in table.columns] == ["PPO", "PPO-Lag"]
    shown = {r[0]: c for r, c in zip(table.rows, table.cells)}
    assert shown["learning_rate"] == ["0.0005", "0.0005"]
    assert shown["policy_hidden"] == ["(32, 32)", "(32, 32)"]
    assert shown["lagrangian_lr"] == ["-", "3"]  # PPO-Lag's own scalar
    assert shown["preset"] == ["cpu", "cpu"]
    assert "kappa_init" not in shown  # P3O is not in this sweep
    for identity in ("task", "bound", "algo", "seed", "chunk_updates"):
        assert identity not in shown
    out = _outs(tmp_path, "tableA1")
    build("tableA1")({"runs": paths}, out, {}, {})
    assert set(pd.read_csv(out["csv"])["hyperparameter"]) >= {"learning_rate", "policy_hidden", "preset"}
    # runs of one algorithm that disagree: an error naming both runs
    bad = paths + [_run_json(tmp_path, "f", "ppo_lag", learning_rate=1e-3)]
    with pytest.raises(ValueError, match=r"runs of algorithm 'ppo_lag' disagree on 'learning_rate': 0.0005 in "
                                         r".*/b/run.json, 0.001 in .*/f/run.json"):
        build("tableA1")({"runs": bad}, out, {}, {})
    broken = tmp_path / "g" / "run.json"
    broken.parent.mkdir()
    broken.write_text("{}")
    with pytest.raises(ValueError, match="g/run.json: cannot read the run's recorded config"):
        setup_tables.read_run_configs([str(broken)])


def test_table_a3_shows_engine_cis(engine):
    iqm = pd.read_csv(engine["iqm.csv"])
    table = tables.table_a3(iqm, pd.read_csv(engine["tiers.csv"]))
    row = iqm[(iqm.algo == "p3o") & (iqm.phase == "final_greedy") & (iqm.metric == "V")].iloc[0]
    i = [r[0] for r in table.rows].index("P3O")
    j = table.columns.index(("Final, greedy", "IQM(V)"))
    assert table.cells[i][j] == f"{row.iqm:.2f} [{row.ci_low:.2f}, {row.ci_high:.2f}]"


def test_missing_rows_and_columns_are_clear_errors():
    iqm, tiers = hand_iqm({("ppo", "train"): (0, {}), ("ppo", "final_greedy"): (0, {})})
    with pytest.raises(ValueError, match="iqm.csv: missing column"):
        tables.table2(iqm.drop(columns="ci_low"), tiers)
    with pytest.raises(ValueError, match=r"tiers.csv: no row for algo='ppo', phase='final_greedy'"):
        tables.table2(iqm, tiers[tiers.phase == "train"])
    with pytest.raises(ValueError, match=r"iqm.csv: no row for algo='ppo', phase='train', metric='V'"):
        tables.table2(iqm[~((iqm.phase == "train") & (iqm.metric == "V"))], tiers)


def test_task_tables_hold_the_engines_condition_statistics(engine, cfg, tmp_path):
    cond = pd.read_csv(engine["conditions.csv"])
    for task in ("goal", "circle"):
        out = _outs(tmp_path, f"tableA_task_{task}")
        table = build("tableA_task")({"conditions": engine["conditions.csv"]}, out, cfg, {"task": task})
        got = pd.read_csv(out["csv"])
        mine = cond[cond.task == task]
        assert len(got) == mine[["bound", "algo"]].drop_duplicates().shape[0]
        for row in mine[mine.phase.isin(PHASES2)].itertuples():
            g = got[(got.bound == row.bound) & (got.algo == row.algo)].iloc[0]
            for m in ("R", "C", "V", "Dnorm", "Dnorm_plus"):
                assert g[f"{row.phase}_{m}_mean"] == getattr(row, f"{m}_mean")
                assert g[f"{row.phase}_{m}_std"] == getattr(row, f"{m}_std")
            assert g[f"{row.phase}_tier"] == row.tier
            i = table.rows.index([f"{row.bound:g}", {"ppo": "PPO", "ppo_lag": "PPO-Lag", "p3o": "P3O",
                                                     "focops": "FOCOPS"}[row.algo]])
            group = "Training (with noise)" if row.phase == "train" else "Final, greedy"
            prefix = "T" if row.phase == "train" else "F"
            assert table.cells[i][table.columns.index((group, "Tier"))] == f"{prefix}{row.tier}"
            shares = table.cells[i][table.columns.index((group, "P(0/../4)"))].split("/")
            assert len(shares) == 5 and shares[row.tier] != "0"
            assert table.cells[i][table.columns.index((group, "V"))] == f"{row.V_mean:.2f} ± {row.V_std:.2f}"
    with pytest.raises(ValueError, match="no rows for task 'push'"):
        tables.task_table(cond, "push")


def test_task_table_with_one_seed_shows_the_mean_only():
    cond = pd.DataFrame([{"task": "goal", "bound": 25.0, "algo": "my_algo", "phase": phase, "n_seeds": 1,
                          **{f"{m}_mean": 0.5 for m in ("R", "C", "V", "Dnorm", "Dnorm_plus")},
                          **{f"{m}_std": np.nan for m in ("R", "C", "V", "Dnorm", "Dnorm_plus")},
                          "tier": 2, "p_tier0": 0.0, "p_tier1": 0.0, "p_tier2": 1.0, "p_tier3": 0.0, "p_tier4": 0.0}
                         for phase in PHASES2])
    table = tables.task_table(cond, "goal")
    assert table.rows == [["25", "my_algo"]]
    assert table.cells[0][:7] == ["0.5", "0.5", "0.50", "0.50", "0.50", "T2", "1.00"]
    tex = tablefmt.to_latex(table)
    assert r"my\_algo" in tex and "$\\pm$" not in tex


def test_cdf_figures_draw_the_engines_cdf(engine, cfg, tmp_path):
    cdf = pd.read_parquet(engine["cdf.parquet"])
    for name, xmax in (("figure2", 2.0), ("figureA1", 20.0)):
        out = [str(tmp_path / f"{name}.pdf"), str(tmp_path / f"{name}.png")]
        build(name)({"cdf": engine["cdf.parquet"]}, out, cfg, {})
        assert open(out[0], "rb").read(5) == b"%PDF-" and open(out[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    fig = fig_cdf.figure_cdf(cdf, xmax=2.0)
    assert [ax.get_title() for ax in fig.axes] == ["Training (with noise)", "Final, with noise", "Final, greedy"]
    ax = fig.axes[2]
    assert ax.get_xlim() == (-1.0, 2.0)
    line = next(l for l in ax.get_lines() if l.get_label() == "P3O")
    want = cdf[(cdf.algo == "p3o") & (cdf.phase == "final_greedy") & (cdf.kappa <= 2.0)].sort_values("kappa")
    assert line.get_ydata() == pytest.approx(want["F"].to_numpy())
    assert any(l.get_label() == "bound (c = d)" and l.get_xdata()[0] == 0.0 for l in ax.get_lines())
    with pytest.raises(ValueError, match="x limit must be > 0"):
        fig_cdf.figure_cdf(cdf, xmax=0)


def test_tier_sensitivity_agrees_with_the_engines_tiers(engine, cfg, tmp_path):
    out = [str(tmp_path / "sens.pdf"), str(tmp_path / "sens.png")]
    shares, sweep = build("figure_tier_sensitivity")({"iqm": engine["iqm.csv"], "tiers": engine["tiers.csv"],
                                                      "thresholds": engine["thresholds"]}, out, cfg, {})
    assert os.path.getsize(out[1]) > 10_000
    tiers = pd.read_csv(engine["tiers.csv"]).set_index(["algo", "phase"])
    for row in shares.itertuples():
        for k in range(5):
            assert getattr(row, f"p_tier{k}") == pytest.approx(tiers.loc[(row.algo, row.phase), f"p_tier{k}"])
    # At the configured value every sweep gives the engine's tier (each range holds that value).
    for key, grp in sweep.groupby("threshold"):
        tier_name, metric = key.split(".")
        at = grp[np.isclose(grp["value"], metrics.PAPER_THRESHOLDS[tier_name][metric])]
        assert len(at) == len(tiers)
        for row in at.itertuples():
            assert row.tier == tiers.loc[(row.algo, row.phase), "tier"], (key, row)
    assert sweep.groupby("threshold")["value"].nunique().eq(cfg["sensitivity"]["points"]).all()


def test_tier_sweep_on_a_hand_worked_case():
    iqm = pd.DataFrame({"algo": "a", "phase": "train", "metric": ["R", "C", "Dnorm", "V", "Dnorm_plus"],
                        "iqm": [1.0, 1.0, 0.06, 0.05, 0.05]})
    sweep = fig_sensitivity.tier_sweep(iqm, metrics.load_thresholds(), {"minimal.Dnorm": [0.0, 0.1]}, 11)
    dn = sweep[sweep.threshold == "minimal.Dnorm"].set_index("value")["tier"]
    # IQM(Dnorm) = 0.06: unsafe below a threshold of 0.06, Substantial (3) from 0.06 on (V, Dnorm+ <= 0.1)
    assert dn.loc[dn.index < 0.06 - 1e-12].eq(0).all() and dn.loc[dn.index > 0.06].eq(3).all()
    # a threshold without a configured range moves +-0.5 around its value, clipped to [0, 1] for V
    v = sweep[sweep.threshold == "moderate.V"]["value"]
    assert v.min() == 0.0 and v.max() == 1.0


def test_the_iqm_tables_state_the_grid_and_the_per_step_budget():
    from workflow.products.setup_tables import grid_note

    runs = pd.DataFrame({"task": ["goal", "push", "goal"],
                         "config": [{"bound": 3.75, "episode_length": 500}, {"bound": 12.5, "episode_length": 500},
                                    {"bound": 6.25, "episode_length": 500}]})
    assert grid_note(runs) == ("Conditions: 2 task(s) (goal, push) x 3 bound(s) d = 3.75, 6.25, 12.5 on episodes of "
                               "T = 500 steps (per-step budget d / T = 0.0075, 0.0125, 0.025).")
