"""The largest grid the sweep's check accepts is one Snakemake plans in about a minute
(workflow.config_validation.MAX_RUNS; benchmarks/plan_scale.py measures plan times): a grid
past it is refused before planning, saying why and what to do."""
import pytest

from workflow import config_validation as cv

TINY = cv.resolve({"preset": "tiny"})  # 1 task x 2 bounds x 2 algorithms: 4 runs a seed


def grid(seeds) -> dict:
    return {"tasks": TINY["tasks"], "bounds": TINY["bounds"], "algos": TINY["algos"], "seeds": seeds}


def test_the_limit_is_ten_thousand_runs():
    assert cv.MAX_RUNS == 10_000
    assert cv.check_grid_values(grid(2_500)) is None  # 10,000 runs: planned in under a minute


@pytest.mark.parametrize("seeds", [2_501, 25_000, list(range(2_501))])
def test_a_grid_past_the_limit_is_refused_saying_why(seeds):
    runs = 4 * (seeds if isinstance(seeds, int) else len(seeds))
    with pytest.raises(cv.ConfigError) as err:
        cv.check_grid_values(grid(seeds))
    assert str(err.value) == (
        f"config key 'seeds': {runs // 4:,} seeds give a grid of {runs:,} runs (tasks x bounds x algos x seeds); "
        "more than 10,000 is refused: Snakemake would take minutes to plan it (docs/faults.md); split the grid "
        "into sweeps of fewer seeds or bounds")


def test_an_adaptive_sweep_counts_the_seeds_it_may_grow_to():
    with pytest.raises(cv.ConfigError, match="2,501 seeds give a grid of 10,004 runs"):
        cv.check_grid_values({**grid(2), "adaptive": {"max_seeds": 2_501}})
