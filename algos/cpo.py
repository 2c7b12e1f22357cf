"""CPO (Achiam, Held, Tamar and Abbeel 2017), following the paper and OmniSafe's implementation
(`omnisafe/algorithms/on_policy/second_order/cpo.py`), inside the one compiled program.

Once per update, on the whole batch, CPO replaces the SGD policy step (the SGD epochs then fit
the critics only). With theta the flattened policy parameters, rho = pi_theta / pi_behaviour,
A the reward advantages standardised over the batch and A_C the cost advantages centred over
it (OmniSafe's buffer), the reward surrogate L_R = -mean(rho A), the cost surrogate
L_C = mean(rho A_C) and KL = mean over states of KL(pi_old || pi_theta) of the joint action
distribution (the pre-tanh Gaussians: tanh is a bijection):

1. g = -grad L_R, b = grad L_C; H v = the Fisher-vector product (Hessian of KL) + damping v.
2. x = H^-1 g and p = H^-1 b by conjugate gradient (`lax.while_loop`, cpo_cg_iters steps, stop
   once the residual norm is below 1e-10); q = x.Hx, r = g.p, s = b.p; c = the constraint value.
3. The step of the paper's Theorem 2 / Appendix 10.2 with OmniSafe's case split
   (`cpo_direction`): 4 / 3 the whole trust region is feasible (b ~ 0, or c < 0 and
   B = 2 delta - c^2 / s < 0): the TRPO step sqrt(2 delta / q) x; 2 / 1 the dual
   lambda*, nu* >= 0 in closed form and the step (x - nu* p) / lambda*; 0 no feasible point in
   the trust region: the recovery step -sqrt(2 delta / s) p.
4. A backtracking line search (`lax.while_loop`, at most cpo_ls_steps trials, fraction
   decay^k): accept the first trial with KL <= delta, L_C - L_C(old) <= max(-c, 0) and, in cases
   2-4, L_R not worse; none accepted -> no step.

c is the batch's per-step violation c_bar - d/T, the same measure every other algorithm here
uses, on the scale of L_C's change (OmniSafe's EpCost - d is in episode units; docs/algos.md
says where the paper and OmniSafe differ and which this follows).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from algos import distribution as dist
from algos.ppo import standardise
from algos.interface import Hooks, PolicyStepInputs

CG_RESIDUAL_TOL = 1e-10  # OmniSafe's conjugate_gradients defaults
CG_EPS = 1e-6
EPS = 1e-8  # the 1e-8 OmniSafe adds to every denominator of the dual


class CPOState(NamedTuple):
    nu: jnp.ndarray  # nu*: the cost constraint's dual of the latest step (the trace's multiplier)
    lam: jnp.ndarray  # lambda*: the trust region's dual
    case: jnp.ndarray  # OmniSafe's optim case 0..4 of the latest step (-1 before the first)
    accept_step: jnp.ndarray  # line-search trial accepted (1-based; 0: no step taken)


class Direction(NamedTuple):
    step: jnp.ndarray  # the full step before the line search
    case: jnp.ndarray  # int32 0..4
    lam: jnp.ndarray
    nu: jnp.ndarray


def conjugate_gradient(matvec, rhs, iters, residual_tol=CG_RESIDUAL_TOL, eps=CG_EPS):
    """x ~ A^-1 rhs for a symmetric positive definite A given as `matvec`; OmniSafe's loop, in a
    `lax.while_loop` (iters may be a traced value)."""
    x = jnp.zeros_like(rhs)
    r = rhs - matvec(x)
    rdotr = r @ r

    def cond(carry):
        i, _, _, _, _, stop = carry
        return (i < iters) & ~stop

    def body(carry):
        i, x, r, p, rdotr, _ = carry
        z = matvec(p)
        alpha = rdotr / (p @ z + eps)
        x = x + alpha * p
        r = r - alpha * z
        new_rdotr = r @ r
        stop = jnp.sqrt(new_rdotr) < residual_tol
        p = jnp.where(stop, p, r + new_rdotr / (rdotr + eps) * p)
        return i + 1, x, r, p, jnp.where(stop, rdotr, new_rdotr), stop

    carry = (jnp.int32(0), x, r, r, rdotr, jnp.asarray(False))
    return jax.lax.while_loop(cond, body, carry)[1]


def project(x, low, high):
    """max(low, min(high, x)): an empty interval (low > high) gives `low`, as in Achiam's code, so
    lambda = 0 there and that branch's dual value is -inf (excluded). torch.clamp, which OmniSafe
    uses, gives `high` instead: a negative lambda."""
    return jnp.maximum(low, jnp.minimum(high, x))


def cpo_direction(g, b, c, matvec, target_kl, cg_iters) -> Direction:
    """The step maximising g.x subject to c + b.x <= 0 and x.Hx / 2 <= target_kl (approximately,
    through conjugate gradient), with OmniSafe's five cases (its _determine_case and _step_direction)."""
    delta = target_kl
    x = conjugate_gradient(matvec, g, cg_iters)
    q = x @ matvec(x)
    p = conjugate_gradient(matvec, b, cg_iters)
    r, s = g @ p, b @ p
    A = q - r ** 2 / (s + EPS)
    B = 2.0 * delta - c ** 2 / (s + EPS)
    feasible = c < 0
    case = jnp.where(feasible & (b @ b <= 1e-6), 4,
                     jnp.where(feasible & (B < 0), 3,
                               jnp.where(feasible, 2, jnp.where(B >= 0, 1, 0)))).astype(jnp.int32)
    A = jnp.where(case == 4, 0.0, A)
    B = jnp.where(case == 4, 0.0, B)
    # cases 3, 4: TRPO
    alpha = jnp.sqrt(2.0 * delta / (q + EPS))
    # cases 1, 2: the dual in closed form (lambda* from the better of f_a, f_b; then nu*). The
    # paper's Theorem 2 states it for min g'.x, i.e. with r' = -r for our ascent gradient g (as
    # Achiam's own code does, which steps along minus the loss gradient). OmniSafe puts the
    # ascent r into these formulas: with r > 0 (reward and cost gradients aligned) its nu* is 0
    # for c < 0 and its lambda* can be negative (tests/test_algos_new.py, docs/algos.md).
    rm = -r
    lam_a, lam_b = jnp.sqrt(A / B), jnp.sqrt(q / (2.0 * delta))
    rc = rm / (c + EPS)
    lam_a_star = jnp.where(feasible, project(lam_a, 0.0, rc), project(lam_a, rc, jnp.inf))
    lam_b_star = jnp.where(feasible, project(lam_b, rc, jnp.inf), project(lam_b, 0.0, rc))
    f_a = -0.5 * (A / (lam_a_star + EPS) + B * lam_a_star) - rm * c / (s + EPS)
    f_b = -0.5 * (q / (lam_b_star + EPS) + 2.0 * delta * lam_b_star)
    lam_dual = jnp.where(f_a >= f_b, lam_a_star, lam_b_star)
    nu_dual = jnp.maximum(lam_dual * c - rm, 0.0) / (s + EPS)
    # case 0: purely decrease the cost
    nu_recover = jnp.sqrt(2.0 * delta / (s + EPS))
    trpo, dual = case >= 3, (case == 1) | (case == 2)
    step = jnp.where(trpo, alpha * x, jnp.where(dual, (x - nu_dual * p) / (lam_dual + EPS), -nu_recover * p))
    lam = jnp.where(trpo, 1.0 / (alpha + EPS), jnp.where(dual, lam_dual, 0.0))
    nu = jnp.where(trpo, 0.0, jnp.where(dual, nu_dual, nu_recover))
    return Direction(step, case, lam, nu)


def line_search(evaluate, theta, step, before, c, case, target_kl, max_steps, decay):
    """(fraction of `step` to take, accepted trial 1..max_steps or 0 for none) by OmniSafe's
    backtracking: evaluate(theta') -> (L_R, L_C, KL); before = (L_R, L_C) at theta."""
    loss_r0, loss_c0 = before

    def cond(carry):
        i, _, accepted = carry
        return (i < max_steps) & ~accepted

    def body(carry):
        i, frac, _ = carry
        loss_r, loss_c, kl = evaluate(theta + frac * step)
        finite = jnp.isfinite(loss_r) & jnp.isfinite(loss_c) & jnp.isfinite(kl)
        worse = (case > 1) & (loss_r0 - loss_r < 0)
        ok = finite & ~worse & ~(loss_c - loss_c0 > jnp.maximum(-c, 0.0)) & ~(kl > target_kl)
        return i + 1, jnp.where(ok, frac, frac * decay), ok

    i, frac, accepted = jax.lax.while_loop(cond, body, (jnp.int32(0), jnp.float32(1.0), jnp.asarray(False)))
    return jnp.where(accepted, frac, 0.0), jnp.where(accepted, i, 0)


def gaussian_kl(mu0, sigma0, mu, sigma):
    """KL(N(mu0, sigma0) || N(mu, sigma)) summed over the last (action) axis."""
    return jnp.sum(jnp.log(sigma / sigma0) + (jnp.square(sigma0) + jnp.square(mu0 - mu)) / (2.0 * jnp.square(sigma))
                   - 0.5, axis=-1)


def policy_step(x: PolicyStepInputs, h):
    theta0, unravel = ravel_pytree(x.params)
    mu0, sigma0 = jax.lax.stop_gradient(x.dist(x.params, x.obs))
    adv = standardise(x.adv)
    cost_adv = x.cost_adv - jnp.mean(x.cost_adv)

    def policy(theta):
        mu, sigma = x.dist(unravel(theta), x.obs)
        log_ratio = dist.log_prob(x.raw_action, mu, sigma) - x.log_prob
        return mu, sigma, log_ratio

    def loss_reward(theta):
        return -jnp.mean(jnp.exp(policy(theta)[2]) * adv)

    def loss_cost(theta):
        return jnp.mean(jnp.exp(policy(theta)[2]) * cost_adv)

    def kl(theta):
        mu, sigma, _ = policy(theta)
        return jnp.mean(gaussian_kl(mu0, sigma0, mu, sigma))

    def evaluate(theta):
        mu, sigma, log_ratio = policy(theta)
        ratio = jnp.exp(log_ratio)
        return -jnp.mean(ratio * adv), jnp.mean(ratio * cost_adv), jnp.mean(gaussian_kl(mu0, sigma0, mu, sigma))

    loss_r0, grad_r = jax.value_and_grad(loss_reward)(theta0)
    loss_c0, b = jax.value_and_grad(loss_cost)(theta0)
    grad_kl = jax.grad(kl)

    def fisher(v):
        return jax.jvp(grad_kl, (theta0,), (v,))[1] + h.cpo_cg_damping * v

    c = x.stats.violation
    direction = cpo_direction(-grad_r, b, c, fisher, h.cpo_target_kl, h.cpo_cg_iters)
    frac, accepted = line_search(evaluate, theta0, direction.step, (loss_r0, loss_c0), c, direction.case,
                                 h.cpo_target_kl, h.cpo_ls_steps, h.cpo_ls_decay)
    theta = theta0 + frac * direction.step
    mu, sigma, log_ratio = policy(theta)
    ratio = jnp.exp(log_ratio)
    metrics = (-jnp.mean(ratio * adv), jnp.mean(dist.entropy(x.key, mu, sigma)), jnp.mean((ratio - 1.0) - log_ratio))
    state = CPOState(direction.nu.astype(jnp.float32), direction.lam.astype(jnp.float32),
                     direction.case.astype(jnp.float32), jnp.asarray(accepted, jnp.float32))
    return unravel(theta), state, metrics


def init(h) -> CPOState:
    zero = jnp.float32(0.0)
    return CPOState(zero, zero, jnp.float32(-1.0), zero)


def trace(s: CPOState, transform_state, h):
    return s.nu, s.lam, s.case, s.accept_step


HOOKS = Hooks(init=init, trace=trace, policy_step=policy_step)
