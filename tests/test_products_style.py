"""Algorithm looks (greyscale-readable, stable) and the `products` settings."""
import itertools

import matplotlib.colors as mcolors
import pytest

import envs
from algos import registry as algo_registry
from workflow.products import registry, settings, style


def grey(color):
    r, g, b = mcolors.to_rgb(color)
    return 0.299 * r + 0.587 * g + 0.114 * b


def test_paper_algorithms_differ_in_grey_level_line_style_and_marker():
    looks = [style.algo_style(a) for a in style.ALGO_ORDER]
    for a, b in itertools.combinations(looks, 2):
        assert abs(grey(a.color) - grey(b.color)) >= 0.1, (a, b)
        assert a.linestyle != b.linestyle and a.marker != b.marker
    assert [style.algo_label(a) for a in style.ALGO_ORDER] == ["PPO", "PPO-Lag", "FOCOPS", "P3O"]


def test_labels_come_from_the_algorithm_and_task_tables():
    for name, algo in algo_registry.ALGORITHMS.items():
        assert style.algo_label(name) == style.algo_style(name, list(algo_registry.ALGOS)).label == algo.label
        assert style.multiplier_label(name) == (algo.multiplier or "multiplier")
    assert style.multiplier_label("cpo") == "\u03bd* (cost dual of the step)"
    assert style.TASK_ORDER == list(envs.TASKS) and style.TASK_ORDER[:4] == ["goal", "circle", "push", "button"]


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
    assert settings.resolve(None) == settings.defaults()
    assert settings.resolve(None)["figure1"] is None  # Figure 1 picks its run from the results
    # Snakemake's --config passes nested values as text
    s = settings.resolve({"smoothing_window": "3", "cdf_xmax": {"figure2": "1.5"}, "decimals": {"V": "3"},
                          "sensitivity": {"ranges": {"moderate.V": ["0.2", "0.8"]}}})
    assert (s["smoothing_window"], s["cdf_xmax"]["figure2"], s["decimals"]["V"]) == (3, 1.5, 3)
    assert s["sensitivity"]["ranges"]["moderate.V"] == [0.2, 0.8]
    run = {"task": "goal", "bound": 25, "algo": "ppo_lag", "seed": 3}
    assert settings.resolve({"figure1": run})["figure1"] == run


@pytest.mark.parametrize("products, message", [
    ({"smoothin_window": 3}, "unknown key 'smoothin_window'"),
    ({"smoothing_window": 0}, "smoothing_window: expected an integer >= 1"),
    ({"multiplier_yscale": "cubic"}, "multiplier_yscale"),
    ({"cdf_xmax": {"figure2": -1}}, r"cdf_xmax.figure2: expected a number > 0"),
    ({"sensitivity": {"ranges": {"moderate.V": [1.0, 0.0]}}}, r"ranges.moderate.V: expected \[low, high\]"),
    ({"sensitivity": {"ranges": {"moderateV": [0.0, 1.0]}}}, "must be tier.metric"),
    ({"figure1": {"tsk": "goal"}}, r"products.figure1: expected null or a mapping with keys \['task'"),
    ({"figure1": {"task": "goal", "bound": 0, "algo": "ppo", "seed": 0}}, r"figure1.bound: expected a number > 0"),
    ({"dpi": 0}, r"products.dpi: expected a number > 0"),
])
def test_bad_settings_name_the_key(products, message):
    with pytest.raises(ValueError, match=message):
        settings.resolve(products)


def test_a_products_settings_join_the_defaults_and_a_clash_is_an_error():
    def check(s):
        if s["toy_bins"] < 1:
            raise ValueError(f"config products.toy_bins: expected >= 1, got {s['toy_bins']}")

    toy = registry.Product(kind=registry.FIGURE, category=registry.ALL_PHASES, caption="toy", inputs=dict,
                           build=print, settings={"toy_bins": 10, "cdf_xmax": {"toy": 1.0}}, check=check, name="toy")
    table = registry.products() + (toy,)
    s = settings.resolve({"toy_bins": 3}, table)
    assert s["toy_bins"] == 3 and s["cdf_xmax"] == {"figure2": 2.0, "figureA1": 20.0, "toy": 1.0}
    assert toy.settings_of(s) == {"font_size": 9, "dpi": 150, "toy_bins": 3, "cdf_xmax": {"toy": 1.0}}
    with pytest.raises(ValueError, match="products.toy_bins: expected >= 1, got 0"):
        settings.resolve({"toy_bins": 0}, table)
    clash = registry.Product(kind=registry.FIGURE, category=registry.ALL_PHASES, caption="toy", inputs=dict,
                             build=print, settings={"smoothing_window": 2}, name="clash")
    with pytest.raises(ValueError, match="product clash: setting 'smoothing_window' is declared by another"):
        settings.defaults(registry.products() + (clash,))
