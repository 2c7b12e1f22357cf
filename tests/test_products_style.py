"""Algorithm looks (greyscale-readable, stable) and the `products` settings."""
import itertools

import matplotlib.colors as mcolors
import pytest

from workflow.products import settings, style


def grey(color):
    r, g, b = mcolors.to_rgb(color)
    return 0.299 * r + 0.587 * g + 0.114 * b


def test_paper_algorithms_differ_in_grey_level_line_style_and_marker():
    looks = [style.algo_style(a) for a in style.ALGO_ORDER]
    for a, b in itertools.combinations(looks, 2):
        assert abs(grey(a.color) - grey(b.color)) >= 0.1, (a, b)
        assert a.linestyle != b.linestyle and a.marker != b.marker
    assert [style.algo_label(a) for a in style.ALGO_ORDER] == ["PPO", "PPO-Lag", "FOCOPS", "P3O"]


def test_tier_colours_darken_monotonically_in_greyscale():
    levels = [grey(c) for c in style.TIER_COLORS]
    assert all(x - y >= 0.08 for x, y in zip(levels, levels[1:])), levels


def test_unknown_algorithms_get_stable_distinct_looks():
    algos = ["ppo", "zeta", "alpha"]
    a = style.algo_style("alpha", algos)
    z = style.algo_style("zeta", algos)
    assert a != z and a.label == "alpha"
    assert style.algo_style("alpha", list(reversed(algos))) == a  # independent of input order
    assert style.ordered_algos(["zeta", "p3o", "alpha", "ppo"]) == ["ppo", "p3o", "alpha", "zeta"]


def test_tasks_in_paper_order_with_either_spelling():
    assert style.ordered_tasks(["push", "zz", "goal", "circle"]) == ["goal", "circle", "push", "zz"]
    assert style.ordered_tasks(["safe_button_point", "safe_goal_point"]) == ["safe_goal_point", "safe_button_point"]
    assert style.task_label("safe_circle_point") == "Circle"


def test_settings_defaults_and_overrides():
    s = settings.resolve({"smoothing_window": 3, "cdf_xmax": {"figure2": 1.5}})
    assert s["smoothing_window"] == 3 and s["cdf_xmax"] == {"figure2": 1.5, "figureA1": 20.0}
    assert s["baseline"] == "ppo" and s["sensitivity"]["ranges"]["moderate.V"] == [0.0, 1.0]
    assert settings.resolve(None) == settings.DEFAULTS
    # Snakemake's --config passes nested values as text
    s = settings.resolve({"smoothing_window": "3", "cdf_xmax": {"figure2": "1.5"}, "decimals": {"V": "3"},
                          "sensitivity": {"ranges": {"moderate.V": ["0.2", "0.8"]}}})
    assert (s["smoothing_window"], s["cdf_xmax"]["figure2"], s["decimals"]["V"]) == (3, 1.5, 3)
    assert s["sensitivity"]["ranges"]["moderate.V"] == [0.2, 0.8]
    assert settings.resolve({"figure1": {"task": "goal", "seed": "2"}})["figure1"]["seed"] == 2
    assert settings.resolve({"figure1": {"seed": 3}})["figure1"] == {"task": "circle", "bound": 25, "algo": "ppo_lag",
                                                                    "seed": 3}


@pytest.mark.parametrize("products, message", [
    ({"smoothin_window": 3}, "unknown key 'smoothin_window'"),
    ({"smoothing_window": 0}, "smoothing_window: expected an integer >= 1"),
    ({"multiplier_yscale": "cubic"}, "multiplier_yscale"),
    ({"cdf_xmax": {"figure2": -1}}, r"cdf_xmax.figure2: expected a number > 0"),
    ({"sensitivity": {"ranges": {"moderate.V": [1.0, 0.0]}}}, r"ranges.moderate.V: expected \[low, high\]"),
    ({"sensitivity": {"ranges": {"moderateV": [0.0, 1.0]}}}, "must be tier.metric"),
    ({"figure1": {"tsk": "goal"}}, "products.figure1: unknown key 'tsk'"),
    ({"figure1": {"bound": 0}}, r"figure1.bound: expected a number > 0"),
])
def test_bad_settings_name_the_key(products, message):
    with pytest.raises(ValueError, match=message):
        settings.resolve(products)


def test_figure1_run_falls_back_to_what_the_sweep_has():
    s = settings.resolve(None)
    assert settings.figure1_run(s, ["goal", "circle"], [15, 25, 50], ["ppo", "ppo_lag"], 3) == \
        {"task": "circle", "bound": 25, "algo": "ppo_lag", "seed": 0}
    assert settings.figure1_run(s, ["push"], [10.0, 30.0], ["ppo", "p3o"], [7, 8]) == \
        {"task": "push", "bound": 30.0, "algo": "p3o", "seed": 7}
