"""Unit tests of the algos building blocks on hand-worked cases (no environment, no training)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import distribution as dist

from runs import checkpoint
from algos.config import PRESETS, TrainConfig, hyper_of, make_config
from algos.core import gae
from algos import registry
from algos.ppo import standardise
from algos.interface import AlgoState
from algo_steps import init_algo_state, policy_loss, update_multiplier
from algos.normalizer import init_normalizer, normalize, update_normalizer

T = 100  # episode length in the multiplier cases: d / T = 25 / 100 = 0.25 exactly


def hyper(**changes):
    return hyper_of(make_config("cpu", {"bound": 25.0, **changes}))


def step(algo, state, mean_cost, h):
    return update_multiplier(algo, state, jnp.float32(mean_cost), h, T)


# ---- multiplier / penalty updates --------------------------------------------------------

def test_ppo_lag_multiplier_rises_above_bound_and_falls_to_zero_below():
    h = hyper()  # lr 3.0, init 0
    s = init_algo_state("ppo_lag", h)
    assert float(s.multiplier) == 0.0
    s = step("ppo_lag", s, 0.75, h)  # violation 0.5 -> 0 + 3 * 0.5
    assert float(s.multiplier) == pytest.approx(1.5, abs=1e-6)
    s = step("ppo_lag", s, 0.75, h)
    assert float(s.multiplier) == pytest.approx(3.0, abs=1e-6)
    s = step("ppo_lag", s, 0.0, h)  # violation -0.25 -> 3 - 0.75
    assert float(s.multiplier) == pytest.approx(2.25, abs=1e-6)
    for _ in range(3):
        s = step("ppo_lag", s, 0.0, h)
    assert float(s.multiplier) == 0.0  # projected onto >= 0, never negative
    s = step("ppo_lag", s, 0.25, h)  # exactly at the bound: no change
    assert float(s.multiplier) == 0.0


def test_p3o_kappa_grows_on_violation_shrinks_otherwise_within_limits():
    h = hyper()  # kappa 0.01, x1.1, decay 0.9, max 50
    s = init_algo_state("p3o", h)
    assert float(s.multiplier) == pytest.approx(0.01)
    s = step("p3o", s, 0.3, h)
    assert float(s.multiplier) == pytest.approx(0.011)
    assert float(s.last_violation) == pytest.approx(0.05)  # Delta kept for the next loss
    for _ in range(200):
        s = step("p3o", s, 0.3, h)
    assert float(s.multiplier) == pytest.approx(50.0)  # capped at kappa_max
    s = step("p3o", s, 0.1, h)
    assert float(s.multiplier) == pytest.approx(45.0)
    assert float(s.last_violation) == pytest.approx(-0.15)
    for _ in range(200):
        s = step("p3o", s, 0.1, h)
    assert float(s.multiplier) == pytest.approx(0.01)  # never below the initial kappa


def test_focops_nu_moves_with_violation_and_is_clipped_to_0_100():
    h = hyper()  # nu 0.1, lr 1.0, max 100
    s = init_algo_state("focops", h)
    assert float(s.multiplier) == pytest.approx(0.1)
    s = step("focops", s, 0.75, h)
    assert float(s.multiplier) == pytest.approx(0.6)
    s = step("focops", s, 1000.0, h)
    assert float(s.multiplier) == 100.0
    s = step("focops", s, -1000.0, h)
    assert float(s.multiplier) == 0.0


def test_ppo_has_no_multiplier_to_move():
    h = hyper()
    s = step("ppo", init_algo_state("ppo", h), 10.0, h)
    assert float(s.multiplier) == 0.0


def test_bound_and_rates_are_runtime_values_of_one_compiled_update():
    update = jax.jit(lambda s, c, h: update_multiplier("ppo_lag", s, c, h, T))
    s = AlgoState(jnp.float32(0.0), jnp.float32(0.0))
    a = update(s, jnp.float32(0.75), hyper())
    b = update(s, jnp.float32(0.75), hyper(bound=50.0, lagrangian_lr=1.0))  # b = 0.5 -> 0 + 1 * 0.25
    assert float(a.multiplier) == pytest.approx(1.5) and float(b.multiplier) == pytest.approx(0.25)
    assert update._cache_size() == 1


# ---- policy losses -------------------------------------------------------------------------

RATIO = jnp.array([1.2, 0.8])
ADV = jnp.array([1.0, -1.0])  # already standardised (mean 0, std 1)


def test_ppo_clipped_surrogate_hand_case():
    h = hyper()
    loss = policy_loss("ppo", jnp.log(RATIO), ADV, jnp.zeros(2), init_algo_state("ppo", h), h)
    assert float(loss) == pytest.approx(-(1.2 * 1.0 + 0.8 * -1.0) / 2, abs=1e-6)
    big = policy_loss("ppo", jnp.log(jnp.array([2.0, 0.1])), ADV, jnp.zeros(2), init_algo_state("ppo", h), h)
    assert float(big) == pytest.approx(-(1.3 * 1.0 + 0.7 * -1.0) / 2, abs=1e-6)  # clipped at 1 +- 0.3


def test_ppo_lag_subtracts_lambda_times_cost_advantage():
    h = hyper()
    zero = policy_loss("ppo_lag", jnp.log(RATIO), ADV, ADV, AlgoState(jnp.float32(0.0), jnp.float32(0.0)), h)
    ppo = policy_loss("ppo", jnp.log(RATIO), ADV, ADV, AlgoState(jnp.float32(0.0), jnp.float32(0.0)), h)
    assert float(zero) == pytest.approx(float(ppo))
    # lambda 1 and cost advantage equal to the reward advantage: A' = 0, nothing to gain
    one = policy_loss("ppo_lag", jnp.log(RATIO), ADV, ADV, AlgoState(jnp.float32(1.0), jnp.float32(0.0)), h)
    assert float(one) == pytest.approx(0.0, abs=1e-6)


def test_p3o_penalty_hand_case():
    h = hyper()
    ratio = jnp.ones(2)
    state = AlgoState(jnp.float32(2.0), jnp.float32(0.0))
    loss = policy_loss("p3o", jnp.log(ratio), ADV, jnp.array([2.0, 0.0]), state, h)
    assert float(loss) == pytest.approx(0.0 + 2.0 * 1.0, abs=1e-6)  # L_R 0, S_C = mean([2, 0]) = 1
    state = AlgoState(jnp.float32(2.0), jnp.float32(0.5))  # previous violation Delta = 0.5
    loss = policy_loss("p3o", jnp.log(ratio), ADV, jnp.zeros(2), state, h)
    assert float(loss) == pytest.approx(2.0 * ((1 - 0.99) * 0.5 + 0.1 * 0.5), abs=1e-6)


def test_focops_loss_and_kl_factor():
    h = hyper()
    state = AlgoState(jnp.float32(1.0), jnp.float32(0.0))
    ratio = jnp.ones(2)  # KL 0: factor 1
    loss = policy_loss("focops", jnp.log(ratio), ADV, jnp.array([1.0, 3.0]), state, h)
    combined = (np.array([1.0, -1.0]) - np.array([1.0, 3.0])) / 2.0
    assert float(loss) == pytest.approx(-np.mean(combined) / 1.5, abs=1e-6)
    far = jnp.array([3.0, 0.2])  # KL far above eta = 0.02 scales the surrogate down by eta / KL
    kl = np.mean((np.array(far) - 1) - np.log(np.array(far)))
    loss = policy_loss("focops", jnp.log(far), ADV, jnp.zeros(2), state, h)
    expected = -np.mean(np.array(far) * np.array([1.0, -1.0]) / 2.0) / 1.5 * (0.02 / (kl + 1e-8))
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # a sample the new policy finds extremely unlikely (ratio underflows to 0) keeps gradients finite
    grad = jax.grad(lambda lr: policy_loss("focops", lr, ADV, jnp.zeros(2), state, h))(jnp.array([-200.0, 0.0]))
    assert np.all(np.isfinite(np.asarray(grad)))


# ---- GAE --------------------------------------------------------------------------------

def _gae(rewards, done, truncated, bootstrap=0.0, values=None):
    rewards = jnp.array([rewards], jnp.float32)
    values = jnp.zeros_like(rewards) if values is None else jnp.array([values], jnp.float32)
    vs, adv = gae(rewards, values, jnp.array([bootstrap], jnp.float32), jnp.array([done]), jnp.array([truncated]),
                  0.99, 0.95)
    return np.asarray(vs[0]), np.asarray(adv[0])


def test_gae_hand_cases():
    vs, adv = _gae([1.0, 1.0], [False, False], [False, False])
    np.testing.assert_allclose(vs, [1 + 0.99 * 0.95, 1.0], rtol=1e-6)
    np.testing.assert_allclose(adv, [1 + 0.99 * 1.0, 1.0], rtol=1e-6)
    vs, adv = _gae([1.0, 1.0], [False, False], [False, False], bootstrap=2.0)
    np.testing.assert_allclose(adv, [1 + 0.99 * vs[1], 1 + 0.99 * 2.0], rtol=1e-6)
    # termination at step 0: no bootstrap across the episode boundary
    vs, adv = _gae([1.0, 5.0], [True, False], [False, False], values=[0.0, 7.0])
    np.testing.assert_allclose(adv[0], 1.0, rtol=1e-6)
    # truncation at step 0 (time limit, CRAX/Brax): the step carries no advantage and no target change
    vs, adv = _gae([1.0, 5.0], [True, False], [True, False], values=[3.0, 7.0])
    assert adv[0] == 0.0 and vs[0] == 3.0


# ---- distribution, normaliser -------------------------------------------------------------

def test_tanh_gaussian_log_prob_matches_change_of_variables():
    mu, sigma, z = jnp.array([0.3, -0.5]), jnp.array([0.7, 1.3]), jnp.array([0.1, -1.2])
    gaussian = -0.5 * ((z - mu) / sigma) ** 2 - jnp.log(sigma) - 0.5 * jnp.log(2 * jnp.pi)
    expected = jnp.sum(gaussian - jnp.log(1 - jnp.tanh(z) ** 2))
    assert float(dist.log_prob(z, mu, sigma)) == pytest.approx(float(expected), rel=1e-5)


def test_zero_noise_sample_is_the_mode_exactly():
    mu, sigma = jnp.array([0.3, -2.0]), jnp.array([0.5, 0.9])
    key = jax.random.PRNGKey(3)
    assert np.array_equal(np.asarray(dist.sample_pre_tanh(key, mu, sigma, 0.0)), np.asarray(mu))
    noisy = dist.sample_pre_tanh(key, mu, sigma, 1.0)
    eps = jax.random.normal(key, mu.shape)
    np.testing.assert_allclose(np.asarray(noisy), np.asarray(mu + sigma * eps), rtol=1e-6)


def test_normaliser_matches_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    a, b = rng.normal(3.0, 2.0, (64, 5)), rng.normal(-1.0, 0.5, (32, 5))
    norm = update_normalizer(update_normalizer(init_normalizer(5), jnp.array(a, jnp.float32)), jnp.array(b, jnp.float32))
    both = np.concatenate([a, b])
    np.testing.assert_allclose(np.asarray(norm.mean), both.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(norm.std), both.std(0), rtol=1e-4)
    x = jnp.array(b[:3], jnp.float32)
    np.testing.assert_allclose(np.asarray(normalize(norm, x)), (b[:3] - both.mean(0)) / both.std(0), rtol=1e-4, atol=1e-4)
    assert np.array_equal(np.asarray(normalize(norm, x, enabled=False)), np.asarray(x))


# ---- config -------------------------------------------------------------------------------

def test_paper_preset_is_crax_schedule():
    cfg = make_config("paper", dict(task="goal"))
    assert cfg.policy_hidden == (32,) * 4 and cfg.critic_hidden == (256,) * 5 and cfg.activation == "swish"
    assert cfg.steps_per_update == 262_144 and cfg.unrolls_per_update == 16
    assert cfg.num_updates == 1908  # CRAX: 1908 multiplier updates for 5e8 steps
    assert cfg.env_kwargs == ()  # CRAX's sparse goal reward


def test_cpu_preset_sets_shaping_and_the_mjx_contact_model_per_task():
    assert dict(make_config("cpu", dict(task="goal")).env_kwargs) == {"reward_distance_scale": 1.0, "contact_model": "mjx"}
    assert dict(make_config("cpu", dict(task="button")).env_kwargs) == {"contact_model": "mjx"}
    assert make_config("cpu", dict(task="circle")).env_kwargs == ()  # no obstacles to touch
    cfg = make_config("cpu", dict(task="goal"), ["env.reward_distance_scale=0", "env.contact_model=simple",
                                                  "policy_hidden=8,8", "num_epochs=2"])
    assert dict(cfg.env_kwargs) == {"reward_distance_scale": 0, "contact_model": "simple"}
    assert cfg.policy_hidden == (8, 8) and cfg.num_epochs == 2


@pytest.mark.parametrize("sets, message", [
    (["algo=sac"], "algo"),
    (["bound=-1"], "bound"),
    (["num_envs=3"], "num_envs"),
    (["no_such_field=1"], "no_such_field"),
    (["num_epochs=two"], "num_epochs"),
    (["normalize_observations=maybe"], "normalize_observations"),
])
def test_bad_config_values_name_the_field(sets, message):
    with pytest.raises(ValueError, match=message):
        make_config("cpu", {}, sets)


def test_static_key_ignores_runtime_values_only():
    a = make_config("cpu", dict(bound=15.0, seed=1), ["lagrangian_lr=1.0"])
    b = make_config("cpu", dict(bound=50.0, seed=7))
    assert a.static_key() == b.static_key()
    assert make_config("cpu", dict(algo="p3o")).static_key() != b.static_key()
    assert set(PRESETS) == {"cpu", "paper"}
    assert TrainConfig().algo in ("ppo", "ppo_lag", "p3o", "focops")


# ---- checkpoints --------------------------------------------------------------------------

def test_checkpoint_round_trip_is_exact_and_refuses_other_shapes(tmp_path):
    state = {"w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3) / 7, "key": jax.random.PRNGKey(5),
             "typed": jax.random.key(9), "n": jnp.int32(4)}
    host = {"ret": np.linspace(0, 1, 10, dtype=np.float32)}
    checkpoint.save(str(tmp_path), state, host, {"config": {"a": 1}})
    checkpoint.save(str(tmp_path), state, host, {"config": {"a": 1}})  # second generation
    template = jax.eval_shape(lambda: state)
    loaded, loaded_host, meta = checkpoint.load(str(tmp_path), template)
    assert meta["generation"] == 1 and meta["config"] == {"a": 1}
    assert np.array_equal(np.asarray(loaded["w"]), np.asarray(state["w"]))
    assert np.array_equal(np.asarray(jax.random.key_data(loaded["typed"])), np.asarray(jax.random.key_data(state["typed"])))
    assert np.array_equal(loaded_host["ret"], host["ret"])
    bad = jax.eval_shape(lambda: dict(state, w=jnp.zeros((3, 3), jnp.float32)))
    with pytest.raises(ValueError, match="different configuration"):
        checkpoint.load(str(tmp_path), bad)
    assert not list(tmp_path.glob("*.tmp"))


class DummyEnv:
    """Stands in for a task where only the loss runs (no env step)."""

    reset = step = staticmethod(lambda *args: None)


def test_minibatch_loss_at_the_policy_that_collected_it():
    """At the policy that sampled the minibatch the ratio is 1: no KL, PPO's loss is minus the
    mean standardised advantage, and each critic's loss is 0.25 mean (GAE target - value)^2."""
    from algos.core import LossConstants, Transition, critic, make_learner, minibatch_loss
    from algos.networks import apply_mlp, init_params

    B, U, O, A = 4, 5, 3, 2
    keys = jax.random.split(jax.random.PRNGKey(7), 6)
    params = init_params(keys[0], O, A, (8,), (8,), True)
    obs = jax.random.normal(keys[1], (B, U + 1, O))
    mu, sigma = dist.split_output(apply_mlp(params["policy"], obs[:, :-1], "tanh"))
    z = dist.sample_pre_tanh(keys[2], mu, sigma)
    done = jax.random.bernoulli(keys[3], 0.2, (B, U))
    mb = Transition(obs, z, dist.log_prob(z, mu, sigma), jax.random.normal(keys[4], (B, U)),
                    jax.random.uniform(keys[5], (B, U)), done, jnp.zeros((B, U), bool))
    h = hyper(entropy_cost=0.0)
    # PPO's hooks with a cost critic trained beside them (as in a program PPO shares)
    learner = make_learner(TrainConfig(algo="ppo_lag", activation="tanh", normalize_observations=False),
                           DummyEnv(), batched=False)._replace(hooks=registry.get("ppo").hooks_obj)
    constants = LossConstants(init_normalizer(O), init_algo_state("ppo", h), jnp.float32(0.0), h)
    total, metrics = minibatch_loss(params, mb, constants, keys[0], learner)
    m = {name: float(value) for name, value in metrics._asdict().items()}
    assert m["approx_kl"] == 0.0
    assert m["action_std"] == pytest.approx(float(jnp.mean(sigma)), rel=1e-6)
    _, _, adv = critic(params, "value", obs, mb.reward * h.reward_scaling, mb, h, "tanh")
    assert m["policy_loss"] == pytest.approx(float(-jnp.mean(standardise(adv))), abs=1e-6)
    for name, rewards, key in (("value", mb.reward * h.reward_scaling, "value_loss"), ("cost_value", mb.cost,
                                                                                       "cost_value_loss")):
        values, vs, _ = critic(params, name, obs, rewards, mb, h, "tanh")
        assert m[key] == pytest.approx(0.25 * float(jnp.mean((vs - values[:, :-1]) ** 2)), rel=1e-6)
    assert float(total) == pytest.approx(m["policy_loss"] + m["value_loss"] + m["cost_value_loss"], rel=1e-5)
