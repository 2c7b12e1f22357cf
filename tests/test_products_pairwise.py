"""The pairwise-comparison table and heat map on a synthetic sweep run through the engine: the
table holds the engine's numbers for the sweep's bootstrap settings, the figure draws them."""
import json
import os

import pandas as pd
import pytest

import metrics
from metrics.pairwise import probability_of_improvement
from workflow.products import settings, synthetic
from workflow.products.registry import by_name


@pytest.fixture(scope="module")
def stage2(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    runs = synthetic.write_sweep(root / "runs", *synthetic.synthetic_sweep(seeds=(0, 1)))
    summary = metrics.read_summaries([os.path.join(r["dir"], "summary.parquet") for r in runs])
    metrics.write_aggregate(metrics.aggregate(summary, reps=150, seed=4), root / "metrics")
    return {"run_metrics": str(root / "metrics" / "run_metrics.parquet"),
            "aggregate": str(root / "metrics" / "aggregate.json")}


def test_table_holds_the_engines_numbers_with_the_sweeps_bootstrap(stage2, tmp_path):
    out = {ext: str(tmp_path / f"t.{ext}") for ext in ("csv", "md", "tex", "html")}
    table = by_name()["table_pairwise"].build(stage2, out, settings.resolve(None), {})
    assert json.load(open(stage2["aggregate"]))["reps"] == 150
    want = probability_of_improvement(pd.read_parquet(stage2["run_metrics"]), reps=150, seed=4)
    got = pd.read_csv(out["csv"])
    merged = got.merge(want, on=["phase", "algo", "other", "metric"], suffixes=("", "_want"))
    assert len(merged) == len(want) == 3 * 4 * 3 * 3  # phases x ordered pairs of 4 algorithms x metrics
    for col in ("p", "ci_low", "ci_high"):
        assert (merged[col] - merged[f"{col}_want"]).abs().max() < 1e-12
    # the synthetic P3O stays under the bound and PPO ignores it: P3O is surely safer on V in every phase
    p3o = got[(got["algo"] == "p3o") & (got["other"] == "ppo") & (got["metric"] == "V")]
    assert (p3o["ci_low"] > 0.5).all()
    assert "**" in open(out["md"]).read() and len(table.rows) == 3 * 12


def test_heat_map_is_drawn_from_the_same_numbers(stage2, tmp_path, monkeypatch):
    """Each panel (phase x metric) shows metrics.pairwise's P(row safer than column) as its image
    and as its cell labels, starred where the engine's interval excludes 0.5."""
    import numpy as np

    from workflow.products.catalog import figure_pairwise as product
    from workflow.products.pairwise import SAFETY_METRICS
    from workflow.products.style import algo_label

    drawn = []
    save = product.save_figure
    monkeypatch.setattr(product, "save_figure", lambda fig, paths, s: (drawn.append(fig), save(fig, paths, s)))
    outs = [str(tmp_path / "f.pdf"), str(tmp_path / "f.png")]
    by_name()["figure_pairwise"].build(stage2, outs, settings.resolve(None), {})
    assert open(outs[0], "rb").read(5) == b"%PDF-" and open(outs[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    want = probability_of_improvement(pd.read_parquet(stage2["run_metrics"]), reps=150, seed=4)
    (fig,) = drawn
    phases = list(dict.fromkeys(want["phase"]))
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == len(phases) * len(SAFETY_METRICS) == 9
    algo_of = {algo_label(a): a for a in want["algo"].unique()}
    stars = 0
    for k, ax in enumerate(panels):
        phase, metric = phases[k // 3], SAFETY_METRICS[k % 3]
        rows = [algo_of[t.get_text()] for t in ax.get_yticklabels()]
        assert [algo_of[t.get_text()] for t in ax.get_xticklabels()] == rows and len(rows) == 4
        here = want[(want["phase"] == phase) & (want["metric"] == metric)].set_index(["algo", "other"])
        image = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
        labels = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
        assert len(labels) == 4 * 3  # every ordered pair, nothing on the diagonal
        for i, x in enumerate(rows):
            for j, y in enumerate(rows):
                if i == j:
                    assert np.isnan(image[i, j]) and (i, j) not in labels
                    continue
                cell = here.loc[(x, y)]
                assert image[i, j] == pytest.approx(cell["p"], abs=1e-12), (phase, metric, x, y)
                sure = cell["ci_low"] > 0.5 or cell["ci_high"] < 0.5
                assert labels[(i, j)] == f"{cell['p']:.2f}" + ("*" if sure else ""), (phase, metric, x, y)
                stars += sure
    assert stars > 0  # the synthetic sweep has sure differences (P3O vs PPO on V, above)


def test_a_sweep_of_one_algorithm_gets_a_heat_map_that_says_there_is_no_pair(tmp_path, monkeypatch):
    """One algorithm (a sweep of PPO-Lag alone) has no pairs: the table is empty and the figure
    says so instead of failing the sweep."""
    from workflow.products.catalog import figure_pairwise as product
    from workflow.products.pairwise import NO_PAIRS

    root = tmp_path / "sweep"
    runs = synthetic.write_sweep(root / "runs", *synthetic.synthetic_sweep(algos=("ppo_lag",), seeds=(0, 1)))
    summary = metrics.read_summaries([os.path.join(r["dir"], "summary.parquet") for r in runs])
    metrics.write_aggregate(metrics.aggregate(summary, reps=20, seed=4), root / "metrics")
    inputs = {"run_metrics": str(root / "metrics" / "run_metrics.parquet"),
              "aggregate": str(root / "metrics" / "aggregate.json")}
    drawn = []
    save = product.save_figure
    monkeypatch.setattr(product, "save_figure", lambda fig, paths, s: (drawn.append(fig), save(fig, paths, s)))
    outs = [str(tmp_path / "f.pdf"), str(tmp_path / "f.png")]
    by_name()["figure_pairwise"].build(inputs, outs, settings.resolve(None), {})
    (fig,) = drawn
    assert [t.get_text() for ax in fig.axes for t in ax.texts] == [NO_PAIRS]
    assert open(outs[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
