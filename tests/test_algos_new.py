"""PPO-PID, PPO-Saute, CRPO and CPO: each update rule on hand-worked cases (no environment, no
training), and the registry entries they come from. Training and resumption: tests/test_algos_zoo.py."""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import cpo, crpo, ppo_pid, ppo_saute, registry
from algos.config import hyper_of, make_config
from algos.interface import AlgoState
from algo_steps import init_algo_state, policy_loss, update_multiplier
from algos.interface import PolicyStepInputs, UpdateStats

T = 100  # episode length: d / T = 25 / 100 = 0.25 exactly


def hyper(algo="ppo_lag", sets=(), **changes):
    return hyper_of(make_config("cpu", {"bound": 25.0, "algo": algo, **changes}, list(sets)))


def step(algo, state, mean_cost, h):
    return update_multiplier(algo, state, jnp.float32(mean_cost), h, T)


def close(a, b, tol=1e-5):
    return float(a) == pytest.approx(float(b), abs=tol)


# ---- the registry ------------------------------------------------------------------------

def test_the_new_algorithms_are_registry_entries_with_crax_and_omnisafe_defaults():
    assert registry.ALGOS[:4] == registry.PAPER_ALGOS
    assert set(registry.ALGOS[4:8]) == {"ppo_pid", "ppo_saute", "crpo", "cpo"}  # then issue 34's (test_algos_beyond)
    cfg = make_config("cpu")
    assert (cfg.pid_kp, cfg.pid_ki, cfg.pid_kd, cfg.pid_integral_clip, cfg.pid_lambda_max, cfg.pid_deriv_beta,
            cfg.pid_lambda_init) == (10.0, 0.01, 0.01, 1.0, 1e6, 0.95, 0.0)
    assert (cfg.saute_gamma_budget, cfg.saute_penalty, cfg.saute_normalize_obs) == (0.0, -1.0, 1.0)
    assert cfg.crpo_eta == 0.0
    assert (cfg.cpo_target_kl, cfg.cpo_cg_iters, cfg.cpo_cg_damping, cfg.cpo_ls_steps, cfg.cpo_ls_decay) == (
        0.01, 15.0, 0.1, 20.0, 0.8)
    critics = [registry.get(a).uses_cost_critic for a in ("ppo_pid", "ppo_saute", "crpo", "cpo")]
    assert critics == [True, False, True, True]
    assert registry.label("ppo_pid") == "PPO-PID" and registry.label("mine") == "mine"
    for name in registry.ALGOS:
        hooks = registry.get(name).hooks_obj
        if registry.get(name).learner == "ppo":  # the off-policy core moves the policy itself
            assert (hooks.loss is None) != (hooks.policy_step is None), name  # one way to move the policy
        assert registry.get(name).has_multiplier == (name not in ("ppo", "sac"))


# ---- PPO-PID ------------------------------------------------------------------------------

def test_pid_terms_hand_worked():
    h = hyper("ppo_pid")  # kp 10, ki 0.01, kd 0.01, I clip 1, beta 0.95, lambda_0 0
    s = init_algo_state("ppo_pid", h)
    assert all(float(v) == 0.0 for v in s)
    s = step("ppo_pid", s, 0.75, h)  # v = 0.5: I = 0.5, D = 0.05 * 0.5, lambda = 0 + 5 + 0.005 + 0.00025
    assert close(s.integral, 0.5) and close(s.derivative, 0.025) and close(s.prev_violation, 0.5)
    assert close(s.lam, 5.00525)
    s = step("ppo_pid", s, 0.75, h)  # I clipped at 1; D = 0.95 * 0.025 + 0.05 * (0.5 - 0.5)
    assert close(s.integral, 1.0) and close(s.derivative, 0.02375)
    assert close(s.lam, 5.00525 + 5.0 + 0.01 + 0.0002375)  # increment form: added to lambda
    s = step("ppo_pid", s, 0.0, h)  # v = -0.25: I = 0.75, D = 0.0225625 - 0.0375
    assert close(s.integral, 0.75) and close(s.derivative, -0.0149375) and close(s.prev_violation, -0.25)
    assert close(s.lam, 10.0154875 - 2.5 + 0.0075 - 0.000149375, 1e-4)
    for _ in range(10):
        s = step("ppo_pid", s, 0.0, h)
    assert float(s.lam) == 0.0 and close(s.integral, -1.0)  # relu at 0, integral clipped at -1
    capped = hyper("ppo_pid", ["pid_lambda_max=6", "pid_lambda_init=2"])
    s = init_algo_state("ppo_pid", capped)
    assert close(s.lam, 2.0)
    assert close(step("ppo_pid", s, 0.75, capped).lam, 6.0)  # clipped at lambda_max


def test_pid_uses_ppo_lags_loss_with_its_lambda():
    h = hyper("ppo_pid")
    ratio, adv, cost_adv = jnp.array([1.2, 0.8, 1.0]), jnp.array([1.0, -1.0, 0.5]), jnp.array([0.3, 2.0, -1.0])
    state = ppo_pid.PIDState(jnp.float32(0.7), jnp.float32(0.1), jnp.float32(0.2), jnp.float32(0.3))
    pid = policy_loss("ppo_pid", jnp.log(ratio), adv, cost_adv, state, h)
    lag = policy_loss("ppo_lag", jnp.log(ratio), adv, cost_adv, AlgoState(jnp.float32(0.7), jnp.float32(0.0)), h)
    assert float(pid) == float(lag)


# ---- PPO-Saute ----------------------------------------------------------------------------

class Step(NamedTuple):  # the fields of envs.EnvState the transform reads
    reward: jnp.ndarray
    cost: jnp.ndarray
    done: jnp.ndarray
    truncated: jnp.ndarray


def env_step(cost, reward=0.5, done=False, truncated=False):
    return Step(jnp.array([reward], jnp.float32), jnp.array([cost], jnp.float32), jnp.array([done]),
                jnp.array([truncated]))


def test_saute_budget_and_reward_hand_worked():
    h = hyper("ppo_saute", ["discount=0.5"], bound=2.0)  # gamma_budget 0: the discount, 0.5
    t = ppo_saute.init_transform(1, h)
    obs = jnp.zeros((1, 3))
    assert float(t.budget[0]) == 2.0 and float(ppo_saute.observe(t, obs, h)[0, -1]) == 1.0
    t, r = ppo_saute.step(t, env_step(1.5), h)  # (2 - 1.5) / 0.5 = 1
    assert float(t.budget[0]) == 1.0 and float(r[0]) == 0.5 and float(ppo_saute.observe(t, obs, h)[0, -1]) == 0.5
    t, r = ppo_saute.step(t, env_step(0.0), h)  # 2
    t, r = ppo_saute.step(t, env_step(0.0), h)  # 4
    t, r = ppo_saute.step(t, env_step(0.0), h)  # 8, stored clipped at 3 d = 6
    assert float(t.budget[0]) == 6.0 and float(ppo_saute.observe(t, obs, h)[0, -1]) == 2.0  # shown clipped at 2
    t, r = ppo_saute.step(t, env_step(7.0), h)  # (6 - 7) / 0.5 = -2 < 0: violated, reward -1, budget 0
    assert float(t.budget[0]) == 0.0 and float(r[0]) == -1.0 and float(t.violations[0]) == 1.0
    t, r = ppo_saute.step(t, env_step(0.0), h)  # 0 / 0.5 = 0: not below zero, the task's reward
    assert float(t.budget[0]) == 0.0 and float(r[0]) == 0.5
    t, r = ppo_saute.step(t, env_step(0.1, reward=2.0), h)  # -0.2: violated again
    assert float(r[0]) == -1.0 and float(t.violations[0]) == 2.0
    # the time limit ends the episode: full budget shown and (default) restored; the episode is recorded
    t, r = ppo_saute.step(t, env_step(0.0, done=True, truncated=True), h)
    assert float(t.budget[0]) == 2.0 and float(t.shown[0]) == 2.0 and float(t.violations[0]) == 0.0
    assert float(t.last_budget[0]) == 0.0 and float(t.last_violations[0]) == 2.0
    assert [float(v) for v in ppo_saute.trace((), t, h)] == [0.0, 2.0]
    raw = hyper("ppo_saute", ["saute_normalize_obs=0"], bound=2.0)
    assert float(ppo_saute.observe(t, obs, raw)[0, -1]) == 2.0  # the budget itself


def test_saute_crax_carry_over_and_explicit_budget_discount():
    h = hyper("ppo_saute", ["saute_carry_budget=1", "saute_gamma_budget=0.8"], bound=2.0)
    t = ppo_saute.init_transform(1, h)
    t, _ = ppo_saute.step(t, env_step(1.2), h)  # (2 - 1.2) / 0.8 = 1
    assert close(t.budget[0], 1.0)
    t, _ = ppo_saute.step(t, env_step(0.2, done=True, truncated=True), h)  # CRAX: kept across the time limit
    assert close(t.budget[0], 1.0) and float(t.shown[0]) == 2.0  # ... while the observation shows d
    t, _ = ppo_saute.step(t, env_step(0.2, done=True, truncated=False), h)  # a termination resets it
    assert float(t.budget[0]) == 2.0


def test_saute_trains_ppo_on_one_more_observation():
    spec = registry.get("ppo_saute")
    assert spec.hooks_obj.transform.extra_obs == 1 and spec.hooks_obj.loss is ppo_saute.ppo_loss
    h = hyper("ppo_saute")
    ratio, adv = jnp.array([1.2, 0.8]), jnp.array([1.0, -1.0])
    t = ppo_saute.init_transform(4, h)
    assert float(policy_loss("ppo_saute", jnp.log(ratio), adv, jnp.zeros(2), (), h, t)) == float(
        policy_loss("ppo", jnp.log(ratio), adv, jnp.zeros(2), init_algo_state("ppo", h), h))


# ---- CRPO ---------------------------------------------------------------------------------

def test_crpo_switches_objective_on_the_previous_updates_violation():
    h = hyper("crpo")
    s = init_algo_state("crpo", h)
    assert float(s.regime) == 1.0  # starts on the reward
    s = step("crpo", s, 0.26, h)  # violation 0.01 > eta 0: cost step next
    assert float(s.regime) == 0.0
    s = step("crpo", s, 0.25, h)  # exactly at the bound: reward step
    assert float(s.regime) == 1.0
    tolerant = hyper("crpo", ["crpo_eta=0.05"])
    assert float(step("crpo", s, 0.29, tolerant).regime) == 1.0  # 0.04 <= eta
    assert float(step("crpo", s, 0.31, tolerant).regime) == 0.0


def test_crpo_loss_is_one_objective_at_a_time():
    h = hyper("crpo")
    ratio, adv, cost_adv = jnp.array([1.2, 0.8]), jnp.array([1.0, -1.0]), jnp.array([3.0, -1.0])
    reward = policy_loss("crpo", jnp.log(ratio), adv, cost_adv, crpo.CRPOState(jnp.float32(1.0)), h)
    assert close(reward, -(1.2 * 1.0 + 0.8 * -1.0) / 2)  # PPO's surrogate
    cost = policy_loss("crpo", jnp.log(ratio), adv, cost_adv, crpo.CRPOState(jnp.float32(0.0)), h)
    # standardised A_C = [1, -1]; maximise -A_C: -mean(min(rho * [-1, 1], clip(rho) * [-1, 1]))
    assert close(cost, -(-1.2 + 0.8) / 2)
    ratio = jnp.array([2.0, 0.1])  # clipping applies to the cost objective too
    cost = policy_loss("crpo", jnp.log(ratio), adv, cost_adv, crpo.CRPOState(jnp.float32(0.0)), h)
    assert close(cost, -(-2.0 + 0.1) / 2)  # min(2 * -1, 1.3 * -1) and min(0.1 * 1, 0.7 * 1)
    assert float(crpo.trace(crpo.CRPOState(jnp.float32(0.0)), (), h)[0]) == 1.0  # traced: a cost step


# ---- CPO ----------------------------------------------------------------------------------

def solve_2d(H, g, b, c, delta):
    """max g.x s.t. x.Hx / 2 <= delta, c + b.x <= 0 in closed form (2-D): y = H^(1/2) x turns the
    trust region into the disc |y| <= R = sqrt(2 delta); the answer is the trust region's own
    maximiser when feasible, else the better end of the chord b'.y = -c, else (no feasible
    point) the recovery step along -b'."""
    w, V = np.linalg.eigh(H)
    half, inv_half = V @ np.diag(np.sqrt(w)) @ V.T, V @ np.diag(1 / np.sqrt(w)) @ V.T
    g2, b2, R = inv_half @ g, inv_half @ b, np.sqrt(2 * delta)
    y = R * g2 / np.linalg.norm(g2)
    if c + b2 @ y <= 0:
        return inv_half @ y
    nb = np.linalg.norm(b2)
    dist_line = -c / nb  # signed distance of the line b'.y = -c from the origin along b'
    if abs(dist_line) > R:
        return inv_half @ (-R * b2 / nb)
    foot, along = dist_line * b2 / nb, np.array([-b2[1], b2[0]]) / nb
    half_chord = np.sqrt(R ** 2 - dist_line ** 2)
    ends = [foot + half_chord * along, foot - half_chord * along]
    best = max(ends, key=lambda e: g2 @ e)
    assert np.allclose(half @ (inv_half @ best), best)
    return inv_half @ best


H_CASES = [np.eye(2), np.array([[4.0, 1.0], [1.0, 2.0]])]


@pytest.mark.parametrize("H", H_CASES)
@pytest.mark.parametrize("c, expected_case", [(-10.0, 3), (-0.05, 2), (0.05, 1), (3.0, 0)])
def test_cpo_step_on_a_quadratic_with_a_linear_constraint_is_the_closed_form(H, c, expected_case):
    g, b, delta = np.array([1.0, 0.0]), np.array([1.0, 1.0]) / np.sqrt(2), 0.5
    Hj = jnp.asarray(H, jnp.float32)
    d = cpo.cpo_direction(jnp.asarray(g, jnp.float32), jnp.asarray(b, jnp.float32), jnp.float32(c),
                          lambda v: Hj @ v, jnp.float32(delta), jnp.float32(10))
    assert int(d.case) == expected_case
    np.testing.assert_allclose(np.asarray(d.step), solve_2d(H, g, b, c, delta), atol=2e-4)
    x = np.asarray(d.step)
    assert x @ H @ x / 2 <= delta * (1 + 1e-4)  # on or inside the trust region
    if expected_case in (1, 2):  # the constraint is active, with a positive dual
        assert abs(c + b @ x) < 1e-4 and float(d.nu) > 0
    if expected_case == 3:
        assert float(d.nu) == 0.0


def test_cpo_plain_trpo_step_when_the_cost_gradient_vanishes():
    Hj = jnp.asarray(H_CASES[1], jnp.float32)
    d = cpo.cpo_direction(jnp.array([1.0, 0.0]), jnp.zeros(2), jnp.float32(-1.0), lambda v: Hj @ v, 0.5, 10)
    x = np.linalg.solve(H_CASES[1], [1.0, 0.0])
    assert int(d.case) == 4
    np.testing.assert_allclose(np.asarray(d.step), np.sqrt(2 * 0.5 / (x @ H_CASES[1] @ x)) * x, rtol=1e-5)


def test_conjugate_gradient_solves_and_is_one_compiled_loop():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(5, 5))
    A = m @ m.T + 5 * np.eye(5)
    rhs = rng.normal(size=5)
    solve = jax.jit(lambda r, n: cpo.conjugate_gradient(lambda v: jnp.asarray(A, jnp.float32) @ v, r, n))
    # OmniSafe's 1e-6 in the denominators limits the accuracy near convergence (float32)
    np.testing.assert_allclose(np.asarray(solve(jnp.asarray(rhs, jnp.float32), 15)), np.linalg.solve(A, rhs),
                               atol=5e-5)
    one = np.asarray(solve(jnp.asarray(rhs, jnp.float32), 1))  # one step: along the residual
    alpha = rhs @ rhs / (rhs @ A @ rhs + cpo.CG_EPS)
    np.testing.assert_allclose(one, alpha * rhs, rtol=1e-5)
    assert solve._cache_size() == 1  # the iteration count is a runtime value


def test_cpo_line_search_backtracks_until_kl_cost_and_reward_hold():
    theta, step = jnp.zeros(2), jnp.array([2.0, 0.0])  # KL(theta) = |theta|^2 / 2: the full step has KL 2

    def evaluate(t):
        return -t[0], t[1], 0.5 * jnp.sum(t ** 2)

    frac, accepted = cpo.line_search(evaluate, theta, step, (0.0, 0.0), -1.0, 2, 0.5, 20, 0.8)
    k = int(np.ceil(np.log(0.25) / np.log(0.64)))  # first k with 2 * 0.8^(2k) <= 0.5
    assert int(accepted) == k + 1 and close(frac, 0.8 ** k)
    # a step that worsens the reward surrogate is refused in cases 2-4, allowed in recovery (0, 1)
    assert int(cpo.line_search(evaluate, theta, -step, (0.0, 0.0), -1.0, 2, 100.0, 20, 0.8)[1]) == 0
    assert int(cpo.line_search(evaluate, theta, -step, (0.0, 0.0), 1.0, 1, 100.0, 20, 0.8)[1]) == 1
    # the cost surrogate may rise by at most max(-c, 0)
    up = jnp.array([0.0, 1.0])
    assert int(cpo.line_search(evaluate, theta, up, (0.0, 0.0), -0.5, 2, 100.0, 20, 0.8)[1]) == 5  # 0.8^4 <= 0.5
    assert int(cpo.line_search(evaluate, theta, up, (0.0, 0.0), 0.5, 1, 100.0, 3, 0.8)[1]) == 0  # none of 3
    assert float(cpo.line_search(evaluate, theta, up, (0.0, 0.0), 0.5, 1, 100.0, 3, 0.8)[0]) == 0.0


def _tiny_batch(seed=0, S=6, U=4, O=3, A=2):
    from algos import distribution as dist
    from algos.networks import apply_mlp, init_mlp

    k = jax.random.split(jax.random.PRNGKey(seed), 5)
    params = init_mlp(k[0], (O, 8, 2 * A))
    obs = jax.random.normal(k[1], (S, U, O))

    def dist_fn(p, o):
        return dist.split_output(apply_mlp(p, o, "tanh"))

    mu, sigma = dist_fn(params, obs)
    z = dist.sample_pre_tanh(k[2], mu, sigma)
    return params, dist_fn, obs, z, dist.log_prob(z, mu, sigma), jax.random.normal(k[3], (S, U)), \
        jax.random.normal(k[4], (S, U))


def test_cpo_fisher_vector_product_is_the_kl_hessian():
    from jax.flatten_util import ravel_pytree

    params, dist_fn, obs, *_ = _tiny_batch()
    theta0, unravel = ravel_pytree(params)
    mu0, sigma0 = dist_fn(params, obs)

    def kl(theta):
        mu, sigma = dist_fn(unravel(theta), obs)
        return jnp.mean(cpo.gaussian_kl(mu0, sigma0, mu, sigma))

    v = jax.random.normal(jax.random.PRNGKey(9), theta0.shape)
    fvp = jax.jit(lambda t, u: jax.jvp(jax.grad(kl), (t,), (u,))[1])(theta0, v)
    hessian = jax.jit(jax.hessian(kl))(theta0)
    np.testing.assert_allclose(np.asarray(fvp), np.asarray(hessian @ v), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("violation", [-0.5, 0.5])
def test_cpo_policy_step_stays_in_the_trust_region_and_respects_the_cost(violation):
    params, dist_fn, obs, z, logp, adv, cost_adv = _tiny_batch()
    h = hyper("cpo")
    stats = UpdateStats(jnp.float32(0.0), jnp.float32(violation))
    run = jax.jit(lambda *a: cpo.policy_step(PolicyStepInputs(a[0], dist_fn, *a[1:6], cpo.init(h), stats, a[6]), h))
    new, state, metrics = run(params, obs, z, logp, adv, cost_adv, jax.random.PRNGKey(1))
    mu0, sigma0 = dist_fn(params, obs)
    mu, sigma = dist_fn(new, obs)
    assert float(jnp.mean(cpo.gaussian_kl(mu0, sigma0, mu, sigma))) <= 0.01 + 1e-6
    assert int(state.accept_step) >= 1  # a step was taken ...
    from algos import distribution as dist
    ratio = jnp.exp(dist.log_prob(z, mu, sigma) - logp)
    cost_change = float(jnp.mean(ratio * (cost_adv - cost_adv.mean())) - jnp.mean(cost_adv - cost_adv.mean()))
    assert cost_change <= max(-violation, 0.0) + 1e-6  # ... that the line search's cost test allows
    assert np.isfinite(np.asarray(metrics)).all()


def omnisafe_dual(q, r, s, c, delta):
    """OmniSafe's cases 1-2 (its cpo.py _step_direction) restated: r = g.H^-1 b with g the ascent
    gradient, torch.clamp's empty-interval rule (the upper end); returns (lambda*, nu*)."""
    A, B = q - r ** 2 / (s + 1e-8), 2 * delta - c ** 2 / (s + 1e-8)
    clamp = lambda x, lo, hi: min(max(x, lo), hi)  # noqa: E731 (torch: min > max gives max)
    la, lb, rc = np.sqrt(A / B), np.sqrt(q / (2 * delta)), r / (c + 1e-8)
    la, lb = (clamp(la, 0.0, rc), clamp(lb, rc, np.inf)) if c < 0 else (clamp(la, rc, np.inf), clamp(lb, 0.0, rc))
    f_a = -0.5 * (A / (la + 1e-8) + B * la) - r * c / (s + 1e-8)
    f_b = -0.5 * (q / (lb + 1e-8) + 2 * delta * lb)
    lam = la if f_a >= f_b else lb
    return lam, max(lam * c - r, 0.0) / (s + 1e-8)


@pytest.mark.parametrize("c", [-0.05, 0.05])
def test_omnisafes_dual_misses_the_constraint_where_the_papers_meets_it(c):
    """Why CPO here follows the paper's signs (docs/algos.md): with reward and cost gradients
    aligned (r > 0), OmniSafe's dual gives nu* ~ 0 and a lambda* < 0 or the unconstrained step."""
    g, b, delta = np.array([1.0, 0.0]), np.array([1.0, 1.0]) / np.sqrt(2), 0.5  # H = I: x = g, p = b
    q, r, s = g @ g, g @ b, b @ b
    lam, nu = omnisafe_dual(q, r, s, c, delta)
    omnisafe_step = (g - nu * b) / (lam + 1e-8)
    assert nu < 1e-6  # no correction along the cost gradient
    assert lam < 0 or c + b @ omnisafe_step > 0.5  # backwards, or far outside the constraint
    ours = cpo.cpo_direction(jnp.asarray(g, jnp.float32), jnp.asarray(b, jnp.float32), jnp.float32(c),
                             lambda v: v, jnp.float32(delta), jnp.float32(10))
    assert float(ours.nu) > 0 and abs(c + b @ np.asarray(ours.step)) < 1e-4


def test_the_zoo_sweep_preset_has_all_eight_and_the_default_stays_the_papers_four():
    from workflow import config_validation as cv

    zoo, default = cv.resolve({"preset": "zoo"}), cv.resolve({})
    assert zoo["algos"] == list(registry.ALGOS[:8]) and default["algos"] == list(registry.PAPER_ALGOS)
    assert {k: v for k, v in zoo.items() if k not in ("algos", "specs", "preset")} == {
        k: v for k, v in default.items() if k not in ("algos", "specs", "preset")}
    assert len(zoo["specs"]) == 4 * 3 * 8 * 2


def test_a_runs_identity_ignores_other_algorithms_scalars():
    """Adding an algorithm (its scalars become config fields) leaves runs trained before valid."""
    from runs import checkpoint, runfolder

    lag = make_config("cpu", {"algo": "ppo_lag"})
    before = {k: v for k, v in lag.to_dict().items() if k not in registry.foreign_scalars("ppo_lag")}
    assert "pid_kp" not in before and "lagrangian_lr" in before
    assert runfolder.config_difference(before, lag.to_dict()) == []
    assert runfolder.config_difference(before, make_config("cpu", {"algo": "ppo_lag"}, ["pid_kp=3"]).to_dict()) == []
    assert runfolder.config_difference(before, make_config("cpu", {"algo": "ppo_lag"},
                                                           ["lagrangian_lr=1"]).to_dict()) == ["lagrangian_lr"]
    assert "pid_kp" not in checkpoint.identity_of(lag) and "pid_kp" in checkpoint.identity_of(
        make_config("cpu", {"algo": "ppo_pid"}))
    assert runfolder.config_difference(before, make_config("cpu", {"algo": "ppo_pid"}).to_dict())[0] == "algo"
