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


def test_heat_map_is_drawn_from_the_same_numbers(stage2, tmp_path):
    outs = [str(tmp_path / "f.pdf"), str(tmp_path / "f.png")]
    pairs = by_name()["figure_pairwise"].build(stage2, outs, settings.resolve(None), {})
    assert all(os.path.getsize(p) > 1000 for p in outs)
    assert set(pairs["metric"]) == {"V", "Dnorm", "Dnorm_plus"}
