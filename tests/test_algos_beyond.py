"""PPO-Chance, PPO-CVaR and PPO-Shield: their estimators and the shield's correction on
hand-worked cases, the multipliers' direction, and (slow) training that resumes bitwise and
feeds the hooks the rollout's ended episodes. The sweep: config/presets/beyond.yaml."""
import os

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from algos import ppo_chance, ppo_cvar, ppo_shield, registry
from runs import train
from algos.config import hyper_of, make_config
from algos.interface import UpdateStats
from algo_steps import trained_whole_and_resumed

NAN = float("nan")


def hyper(algo, sets=(), bound=4.0):
    return hyper_of(make_config("cpu", {"bound": bound, "algo": algo}, list(sets)))


def ended_stats(ended, costs):
    """UpdateStats with only the ended episodes given ([S, N] arrays)."""
    return UpdateStats(jnp.float32(0.0), jnp.float32(0.0), jnp.asarray(ended, bool),
                       jnp.asarray(costs, jnp.float32))


# ---- PPO-Chance ----------------------------------------------------------------------------

def test_violation_rate_counts_the_ended_episodes_above_the_bound():
    ended = [[True, False], [True, True], [False, True]]
    costs = [[5.0, 99.0], [3.0, 7.0], [50.0, 4.0]]  # ended: 5, 3, 7, 4; 99 and 50 did not end
    rate, n = ppo_chance.violation_rate(jnp.asarray(ended), jnp.asarray(costs), 4.0)
    assert float(n) == 4.0 and float(rate) == 0.5  # 5 and 7 exceed 4; a cost of exactly d does not
    rate, n = ppo_chance.violation_rate(jnp.zeros((2, 2), bool), jnp.ones((2, 2)), 4.0)
    assert float(n) == 0.0 and np.isnan(float(rate))


def test_chance_multiplier_rises_when_violated_falls_when_slack_and_waits_without_episodes():
    h = hyper("ppo_chance")  # alpha 0.1, lr 2, bound 4
    s = ppo_chance.ChanceState(jnp.float32(1.0), jnp.float32(NAN), jnp.float32(0.0))
    violated = ppo_chance.update(s, ended_stats([[True, True]], [[5.0, 3.0]]), h)  # rate 0.5
    assert float(violated.lam) == pytest.approx(1.0 + 2.0 * 0.4) and float(violated.rate) == 0.5
    slack = ppo_chance.update(s, ended_stats([[True, True]], [[1.0, 3.0]]), h)  # rate 0
    assert float(slack.lam) == pytest.approx(1.0 - 0.2)
    floor = ppo_chance.update(s._replace(lam=jnp.float32(0.1)), ended_stats([[True]], [[0.0]]), h)
    assert float(floor.lam) == 0.0  # projected onto lambda >= 0
    waiting = ppo_chance.update(violated, ended_stats([[False, False]], [[9.0, 9.0]]), h)
    assert float(waiting.lam) == float(violated.lam) and float(waiting.rate) == 0.5
    assert float(waiting.episodes) == 0.0
    assert float(ppo_chance.init(hyper("ppo_chance", ["chance_init=0.7"])).lam) == pytest.approx(0.7)


# ---- PPO-CVaR ------------------------------------------------------------------------------

def test_empirical_cvar_is_the_upper_tail_mean_hand_worked():
    costs = jnp.arange(1.0, 11.0).reshape(5, 2)  # 1..10
    ended = jnp.ones((5, 2), bool)
    assert float(ppo_cvar.empirical_cvar(ended, costs, 0.9)[0]) == pytest.approx(10.0)  # the top 10 %
    # tail weight 2.5 episodes: 10 + 9 + half of 8, over 2.5
    assert float(ppo_cvar.empirical_cvar(ended, costs, 0.75)[0]) == pytest.approx(23.0 / 2.5)
    assert float(ppo_cvar.empirical_cvar(ended, costs, 0.0)[0]) == pytest.approx(5.5)  # the mean
    masked = ended.at[4, 1].set(False)  # the 10 did not end: 9 episodes, weight 0.9 -> at least one
    cvar, n = ppo_cvar.empirical_cvar(masked, costs, 0.9)
    assert float(n) == 9.0 and float(cvar) == pytest.approx(9.0)
    cvar, n = ppo_cvar.empirical_cvar(jnp.zeros((5, 2), bool), costs, 0.9)
    assert float(n) == 0.0 and np.isnan(float(cvar))


def test_cvar_multiplier_moves_with_the_tail_not_the_mean():
    h = hyper("ppo_cvar")  # level 0.9, lr 0.1, bound 4
    s = ppo_cvar.CVaRState(jnp.float32(1.0), jnp.float32(NAN))
    tail = [[0.0] * 9 + [14.0]]  # mean 1.4 < d, CVaR_0.9 = 14 > d
    violated = ppo_cvar.update(s, ended_stats([[True] * 10], tail), h)
    assert float(violated.cvar) == pytest.approx(14.0) and float(violated.lam) == pytest.approx(1.0 + 0.1 * 10)
    slack = ppo_cvar.update(s, ended_stats([[True] * 10], [[2.0] * 10]), h)
    assert float(slack.lam) == pytest.approx(1.0 - 0.1 * 2.0)
    waiting = ppo_cvar.update(violated, ended_stats([[False] * 10], tail), h)
    assert float(waiting.lam) == float(violated.lam) and float(waiting.cvar) == pytest.approx(14.0)


# ---- PPO-Shield ----------------------------------------------------------------------------

def shield_hyper(sets=()):
    return hyper("ppo_shield", sets)


def shield_state(h, seed=0, **fields):
    import jax

    return ppo_shield.init(h, jax.random.PRNGKey(seed))._replace(**fields)


def layer(g, cost, limit, actions):
    out = ppo_shield.safety_layer(jnp.asarray(g, jnp.float32), jnp.asarray(cost, jnp.float32),
                                  jnp.float32(limit), jnp.asarray(actions, jnp.float32))
    return [np.asarray(x) for x in out]


def test_the_layer_is_dalals_closed_form_inside_the_box_hand_worked():
    # g = (1, 0), c(s) = 0, C = 0.1: lambda* = (g . mu + c - C) / g . g
    taken, corrected, clipped, infeasible = layer([[1.0, 0.0]] * 3, [0.0, 0.0, 0.3], 0.1,
                                                  [[0.2, 0.3], [-0.5, 0.3], [0.9, -0.7]])
    # 0.2 > 0.1: lambda* 0.1 -> (0.1, 0.3); -0.5 meets it: untouched; c(s) 0.3: 0.3 + 0.9 > 0.1,
    # lambda* 1.1 -> (-0.2, -0.7), whose predicted cost 0.3 - 0.2 is the limit exactly
    np.testing.assert_allclose(taken, [[0.1, 0.3], [-0.5, 0.3], [-0.2, -0.7]], atol=1e-6)
    assert corrected.tolist() == [True, False, True] and not clipped.any() and not infeasible.any()


def test_where_the_closed_form_leaves_the_box_the_layer_still_meets_the_limit_hand_worked():
    # g = (1, 0.1), margin C - c = -1.05: lambda* = 1.05 / 1.01 puts a0 at -1.04, whose clip
    # (-1, -0.104) predicts -1.0104 > -1.05. The box's own solution: a0 stays at -1 from lambda 1
    # on, g . a falls at 0.01 per unit of lambda, so lambda = 1 + 0.04 / 0.01 = 5: (-1, -0.5)
    taken, corrected, clipped, infeasible = layer([[1.0, 0.1]], [0.0], -1.05, [[0.0, 0.0]])
    np.testing.assert_allclose(taken, [[-1.0, -0.5]], atol=1e-5)
    assert corrected.all() and clipped.all() and not infeasible.any()


def test_where_no_action_meets_the_limit_the_layer_leaves_the_action_alone():
    # c(s) 1.5, C 0.1: the least cost in the box is 1.5 - 1.1 > 0.1; g = 0: nothing moves the cost
    actions = [[0.3, -0.2], [0.9, 0.9]]
    taken, corrected, clipped, infeasible = layer([[1.0, 0.1], [0.0, 0.0]], [1.5, 0.5], 0.1, actions)
    np.testing.assert_array_equal(taken, np.asarray(actions, np.float32))
    assert infeasible.all() and not corrected.any() and not clipped.any()


def linear_cost_task(rng, n, obs_size=6, cost_scale=0.3):
    """A toy task whose cost is linear in the action: c(s') = c(s) + g(s) . a with the known
    g(s) = (0.5 + 0.3 s_0, -0.4 + 0.2 s_1) (s: the observation, standard normal)."""
    obs = rng.normal(size=(n, obs_size)).astype(np.float32)
    g = np.stack([0.5 + 0.3 * obs[:, 0], -0.4 + 0.2 * obs[:, 1]], axis=-1).astype(np.float32)
    cost = rng.uniform(0.0, cost_scale, size=n).astype(np.float32)
    return obs, g, cost


def trained_on_the_toy(h, updates=6, seed=0):
    """The shield's model after `updates` warm-up updates on the toy's uniformly random actions."""
    rng = np.random.default_rng(seed)
    s = shield_state(h)
    for _ in range(updates):
        obs, g, cost = linear_cost_task(rng, 16 * 64)
        action = rng.uniform(-1, 1, size=(16 * 64, 2)).astype(np.float32)
        record = ppo_shield.StepRecord(*(jnp.asarray(x).reshape((16, 64) + x.shape[1:]) for x in (
            action, cost, np.zeros(len(cost), bool), np.zeros(len(cost), np.float32),
            np.zeros(len(cost), bool), np.zeros(len(cost), bool))))
        next_cost = cost + np.sum(g * action, axis=-1)
        stats = UpdateStats(jnp.float32(0.05), jnp.float32(0.05 - 0.02), jnp.zeros((16, 64), bool),
                            jnp.zeros((16, 64)), jnp.asarray(obs).reshape(16, 64, -1), None,
                            jnp.asarray(next_cost).reshape(16, 64), record)  # d/T = 0.02
        s = ppo_shield.update(s, stats, h)
    return s


@pytest.fixture(scope="module")
def toy_shield():
    h = shield_hyper(["shield_fit_steps=200", "shield_lr=0.01", "shield_warmup_updates=6"])
    return h, trained_on_the_toy(h)


def test_the_model_learns_the_toys_known_g(toy_shield):
    h, s = toy_shield
    obs, g, _ = linear_cost_task(np.random.default_rng(1), 2000)
    learned = np.asarray(ppo_shield.cost_gradient(s.model, s.norm, jnp.asarray(obs), 2))
    assert np.mean(np.abs(learned - g)) < 0.05 * np.mean(np.abs(g))  # within 5 % of |g|
    assert float(s.model_loss) < 1e-3  # the last warm-up update's error before its fit


def test_after_warm_up_the_shields_actions_meet_the_limit_wherever_an_action_can(toy_shield):
    import jax

    h, s = toy_shield
    assert int(s.updates) == 6 and float(s.limit) == pytest.approx(0.02)  # C = d/T
    assert np.isnan(float(s.corrected)) and float(s.lam) == 0.0  # warm-up: no layer, lambda waits
    rng = np.random.default_rng(2)
    obs, g_true, cost = linear_cost_task(rng, 4000, cost_scale=1.2)
    mu = rng.uniform(-1, 1, size=(4000, 2)).astype(np.float32)
    taken, record = ppo_shield.act(s, jnp.asarray(obs), jnp.asarray(mu), h, jnp.asarray(cost),
                                   jax.random.PRNGKey(0))
    taken, record = np.asarray(taken), jax.tree_util.tree_map(np.asarray, record)
    g = np.asarray(ppo_shield.cost_gradient(s.model, s.norm, jnp.asarray(obs), 2))
    limit = float(s.limit)
    feasible = cost - np.abs(g).sum(-1) <= limit
    assert np.abs(taken).max() <= 1.0
    # every kind of state occurs: met already, corrected inside the box, at the box, infeasible
    assert record.corrected.sum() > 100 and record.clipped.sum() > 20 and (~feasible).sum() > 100
    assert ((cost + np.sum(g * mu, -1) <= limit) & feasible).sum() > 100
    # feasible: the predicted cost of the action taken meets the limit, and so does the true one
    # up to the model's error; the action moved no further than the nearest one that meets it
    predicted = cost + np.sum(g * taken, -1)
    assert np.all(predicted[feasible] <= limit + 1e-5)
    assert np.all((cost + np.sum(g_true * taken, -1))[feasible] <= limit + 0.1)
    assert np.mean((cost + np.sum(g_true * taken, -1))[feasible] <= limit + 0.02) > 0.95
    np.testing.assert_array_equal(taken[~record.corrected], mu[~record.corrected])
    # the stated rule where none does: the policy's action, untouched
    assert record.infeasible.tolist() == (~feasible).tolist()
    np.testing.assert_array_equal(taken[~feasible], mu[~feasible])
    # the closed form where the clip does not bind: a* = mu - lambda* g
    inside = record.corrected & ~record.clipped
    lam = (np.sum(g * mu, -1) + cost - limit) / np.sum(g * g, -1)
    np.testing.assert_allclose(taken[inside], (mu - lam[:, None] * g)[inside], atol=1e-5)
    np.testing.assert_allclose(record.size, np.linalg.norm(taken - mu, axis=-1), atol=1e-6)


def test_the_warm_up_acts_at_random_then_the_layer_and_the_multiplier_take_over(toy_shield):
    import jax

    h, s = toy_shield
    obs, _, cost = linear_cost_task(np.random.default_rng(3), 512)
    mu = jnp.zeros((512, 2))
    warm = s._replace(updates=jnp.int32(5))  # the last warm-up update: uniform actions over the box
    taken, _ = ppo_shield.act(warm, jnp.asarray(obs), mu, h, jnp.asarray(cost), jax.random.PRNGKey(4))
    taken = np.asarray(taken)
    assert np.abs(taken).max() <= 1.0 and taken.std() > 0.5 and abs(taken.mean()) < 0.1
    # after the warm-up the multiplier moves (PPO-Lag's step) and the layer's statistics show
    after = trained_on_the_toy(h, updates=7)
    assert float(after.lam) == pytest.approx(3.0 * 0.03)  # shield_lagrangian_lr 3, c - d/T = 0.03
    assert 0.0 <= float(after.corrected) <= 1.0 and np.isfinite(float(after.infeasible))
    # the policy loss is 0 in the warm-up, PPO-Lag's after
    from algos.interface import LossInputs

    x = LossInputs(ratio=jnp.ones(4) * 1.1, log_ratio=jnp.log(jnp.ones(4) * 1.1), adv=jnp.arange(4.0),
                   cost_adv=jnp.ones(4), multiplier=jnp.float32(0.5), state=warm)
    assert float(ppo_shield.loss(x, h)) == 0.0
    from algos.ppo_lag import ppo_lag_loss

    assert float(ppo_shield.loss(x._replace(state=s), h)) == pytest.approx(float(ppo_lag_loss(x, h)))


def test_the_models_init_is_the_runs_seed(tmp_path):
    import jax

    from algos.core import build_programs

    def model(seed):
        cfg = make_config("cpu", dict(task="circle", algo="ppo_shield", bound=1.0, seed=seed, num_envs=2,
                                      episode_length=64, eval_episodes=2), ["env.contact_model=simple"])
        state = jax.jit(build_programs(cfg, shared=False).init)(jnp.int32(seed), hyper_of(cfg))
        return [np.asarray(x) for x in jax.tree_util.tree_leaves(state.algo_state.model)]

    first, again, other = model(3), model(3), model(4)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other))  # another seed, another init


# ---- training (slow) -----------------------------------------------------------------------

TASK_OF = {"ppo_chance": "circle", "ppo_cvar": "goal", "ppo_shield": "circle"}


def config(algo, sets=()):
    return make_config("cpu", dict(task=TASK_OF[algo], algo=algo, bound=1.0, seed=2, total_steps=6 * 2048,
                                   num_envs=4, episode_length=64, eval_episodes=4),
                       ["chunk_updates=2", "env.contact_model=simple",
                        *(["shield_warmup_updates=2"] if algo == "ppo_shield" else []), *sets])


def tables(out):
    episodes = pd.read_parquet(os.path.join(out, "episodes.parquet"))
    trace = pd.read_parquet(os.path.join(out, "trace.parquet")).drop(columns="wall_time")
    return episodes, trace


def costs_by_update(episodes, trace):
    """{update: the costs (float32) of the training episodes that ended during its rollout}: an
    episode's iterate is logged with the update whose rollout completed it (trace.update)."""
    train = episodes[episodes.phase == "train"]
    update = train.iteration.map(trace.set_index("iteration")["update"])
    return {int(u): rows.cost.to_numpy(np.float32) for u, rows in train.groupby(update)}


def upper_tail_mean(costs, level):
    """CVaR_level by its definition: the mean of the costliest (1 - level) n episodes, the one on
    the boundary counted by its fraction (at least one episode's weight)."""
    ranked, n = np.sort(costs.astype(np.float64))[::-1], len(costs)
    w = min(max((1.0 - level) * n, 1.0), n)
    whole = int(np.floor(w))
    return (ranked[:whole].sum() + (w - whole) * (ranked[whole] if whole < n else 0.0)) / w


def check_estimates_against_the_episodes(algo, episodes, trace):
    """The trace's row of update u shows the algorithm's state after update u - 1's hook, which
    saw the episodes that ended in update u - 1's rollout: recompute each estimate (and the
    multiplier's step) from those episodes of the run's own table."""
    h = hyper_of(config(algo))
    costs = costs_by_update(episodes, trace)
    first = trace.groupby("update").first()
    assert sorted(costs) == list(first.index) and len(costs) == 6
    # 4 envs x 512 rollout steps per update, T = 64: 32 episodes end in each, all logged
    assert {len(c) for c in costs.values()} == {32}
    name = {"ppo_chance": "chance_rate", "ppo_cvar": "cvar_estimate"}[algo]
    assert np.isnan(first.loc[0, name])  # no episode has ended before the first update
    estimates = []
    for u in list(costs)[1:]:
        c, lam_before, lam = costs[u - 1], np.float32(first.loc[u - 1, "multiplier"]), first.loc[u, "multiplier"]
        if algo == "ppo_chance":
            rate = np.float32((c > np.float32(h.bound)).sum()) / np.float32(len(c))
            assert first.loc[u, "chance_rate"] == rate and first.loc[u, "chance_episodes"] == len(c), u
            step = float(h.chance_lr) * (rate - float(h.chance_alpha))
            estimates.append(rate)
        else:
            cvar = upper_tail_mean(c, float(h.cvar_level))
            assert first.loc[u, "cvar_estimate"] == pytest.approx(cvar, rel=1e-5), u
            step = float(h.cvar_lr) * (cvar - float(h.bound))
            estimates.append(cvar)
        assert lam == pytest.approx(max(0.0, float(lam_before) + step), rel=1e-5, abs=1e-6), u
    # the run's estimates move between updates, so a check one update off would not pass
    assert len(set(estimates)) > 1, estimates


@pytest.mark.slow
@pytest.mark.parametrize("algo", list(TASK_OF))
def test_trains_and_resumes_bitwise(algo, tmp_path):
    ep_a, tr_a = trained_whole_and_resumed(config(algo), str(tmp_path))
    spec = registry.get(algo)
    assert list(tr_a.columns[-len(spec.state_columns):]) == list(spec.state_columns)
    after = tr_a[tr_a["update"] > 0]
    assert len(after)
    if algo in ("ppo_chance", "ppo_cvar"):
        assert (after.multiplier > 0).any()  # bound 1: violated, the multiplier rose
        check_estimates_against_the_episodes(algo, ep_a, tr_a)
    else:  # 2 warm-up updates (config): no layer, the multiplier waits; then the layer acts
        warm, shielded = tr_a[tr_a["update"] <= 2], tr_a[tr_a["update"] > 2]
        assert warm.shield_corrected.isna().all() and (warm.multiplier == 0).all() and len(shielded)
        assert (shielded.shield_corrected > 0).any() and shielded.shield_infeasible.between(0, 1).all()
        assert np.isfinite(after.shield_model_loss).all() and (tr_a.multiplier >= 0).all()


@pytest.mark.slow
def test_an_inactive_shield_is_ppo_lag_and_an_active_one_changes_the_rollout():
    """The act hook is the only way the shield reaches the env: without a warm-up and with a
    limit no prediction can exceed it is PPO-Lag bit for bit; with its limit it steers the rollout. PPO-Lag runs in its
    own program here: a sequential run shares one with PPO, P3O and FOCOPS (algos.programs),
    which XLA fuses otherwise, so the last bits differ from the shield's program."""
    import jax

    from algos.core import build_programs

    base = dict(task="circle", bound=1.0, seed=2, total_steps=4 * 2048, num_envs=4, episode_length=64,
                eval_episodes=4)
    sets = ["chunk_updates=4", "env.contact_model=simple"]
    runs = {"lag": make_config("cpu", dict(base, algo="ppo_lag"), sets),
            "off": make_config("cpu", dict(base, algo="ppo_shield"), sets + ["shield_budget_scale=1e9",
                                                                          "shield_warmup_updates=0"]),
            "on": make_config("cpu", dict(base, algo="ppo_shield"), sets + ["shield_warmup_updates=1"])}
    out = {}
    for name, cfg in runs.items():
        programs, h = build_programs(cfg, shared=False), hyper_of(cfg)
        state = jax.jit(programs.init)(jnp.int32(cfg.seed), h)
        state, log, _ = jax.jit(programs.chunk)(state, h, jnp.int32(cfg.num_updates))
        assert int(state.update) == cfg.num_updates == 4 and int(log.count) >= 2
        out[name] = (np.asarray(log.ret), np.asarray(log.cost), jax.tree_util.tree_leaves(state.params["policy"]))
    (lag_ret, lag_cost, lag_policy), (off_ret, off_cost, off_policy), (_, on_cost, _) = out["lag"], out["off"], out["on"]
    np.testing.assert_array_equal(lag_ret, off_ret)
    np.testing.assert_array_equal(lag_cost, off_cost)
    for a, b in zip(lag_policy, off_policy):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(lag_cost, on_cost)


def test_the_beyond_preset_runs_them_beside_ppo_lag_on_the_default_grid():
    from workflow import config_validation as cv

    beyond, default = cv.resolve({"preset": "beyond"}), cv.resolve({})
    assert beyond["algos"] == ["ppo_lag", "ppo_chance", "ppo_cvar", "ppo_shield"]
    assert {k: v for k, v in beyond.items() if k not in ("algos", "specs", "preset")} == {
        k: v for k, v in default.items() if k not in ("algos", "specs", "preset")}
    assert len(beyond["specs"]) == 4 * 3 * 4 * 2


def test_beyond_pairs_compares_each_algorithm_with_ppo_lag_on_the_same_runs(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("beyond_pairs", os.path.join(
        os.path.dirname(__file__), "..", "benchmarks", "beyond_pairs.py"))
    pairs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pairs)
    rows = []
    for algo, v, r in [("ppo_lag", [0.5, 0.2], [10.0, 4.0]), ("ppo_cvar", [0.1, 0.3], [8.0, 6.0])]:
        for seed in (0, 1):
            for phase in ("train", "final_greedy"):
                rows.append(dict(task="circle", bound=3.75, algo=algo, seed=seed, phase=phase, n_episodes=100,
                                 R=r[seed], V=v[seed], Dnorm_plus=v[seed] / 2))
    rows.append(dict(task="goal", bound=3.75, algo="ppo_cvar", seed=0, phase="train", n_episodes=100, R=0.0,
                     V=0.0, Dnorm_plus=0.0))  # no PPO-Lag run to pair with: left out
    path = tmp_path / "run_metrics.parquet"
    pd.DataFrame(rows).to_parquet(path)
    table = pairs.paired(pd.read_parquet(path), "ppo_lag").set_index("figure")
    violations = table.loc["train violations"]
    assert (violations["pairs"], violations["median"], violations["reference median"]) == (2, 20.0, 35.0)
    assert (violations["better in"], violations["worse in"]) == (1, 1)  # 10 < 50, 30 > 20
    ret = table.loc["final_greedy R"]
    assert (ret["better in"], ret["worse in"]) == (1, 1)  # 6 > 4 better, 8 < 10 worse
    assert pairs.main([str(path)]) == 0 and "final_greedy Dnorm_plus" in capsys.readouterr().out
    assert pairs.main([str(path), "--reference", "ppo"]) == 2
    assert "no runs of the reference algo 'ppo'" in capsys.readouterr().err
    assert pairs.main([str(tmp_path / "missing.parquet")]) == 2


def test_the_final_evaluation_acts_through_the_shield_as_deployed():
    """Both evaluation phases send the policy's action through the layer: with no limit binding
    (C = inf) the episodes are the unshielded ones bit for bit; with C < 0 every step is corrected
    (or infeasible) and the episodes differ."""
    import jax

    from algos import core

    cfg = make_config("cpu", dict(task="circle", algo="ppo_shield", bound=1.0, seed=0, num_envs=2,
                                  episode_length=32, eval_episodes=4), ["env.contact_model=simple"])
    h, env = hyper_of(cfg), core.make_env(cfg)
    learner = core.make_learner(cfg.static_key(), env)
    bare = learner._replace(hooks=learner.hooks._replace(act=None))
    state = jax.jit(lambda: core.init(learner, env.action_size, env.observation_size, jnp.int32(0), h))()
    past_warm_up = state.algo_state._replace(updates=jnp.int32(1000))

    programs = {lrn: jax.jit(lambda s, scale, lrn=lrn: core.evaluate(lrn, s, jnp.int32(5), scale, h))
                for lrn in (learner, bare)}  # one compile each: the limit and the noise scale are arguments

    def returns(lrn, limit, scale):
        st = state._replace(algo_state=past_warm_up._replace(limit=jnp.float32(limit)))
        pending, _ = programs[lrn](st, jnp.float32(scale))
        return np.asarray(pending.ret), np.asarray(pending.cost)

    for scale in (0.0, 1.0):
        free, unshielded = returns(learner, np.inf, scale), returns(bare, np.inf, scale)
        np.testing.assert_array_equal(free[0], unshielded[0])
        np.testing.assert_array_equal(free[1], unshielded[1])
        assert not np.array_equal(returns(learner, -1.0, scale)[0], unshielded[0])
