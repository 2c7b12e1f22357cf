"""PPO-PID, PPO-Saute, CRPO and CPO train through runs.train and resume bitwise from a checkpoint.

One tiny run per algorithm (4 envs, T = 64, 6 updates in chunks of 2), each on another
built-in task so that the four tasks are all covered: one compiled program per algorithm (with
the tasks' one-point contact model, which compiles in a fraction of the MJX solve's time).
Every (algorithm, task) pair at this budget: docs/algos.md gives the command and its outcome.
"""

import numpy as np
import pytest

from algos import registry
from algos.config import make_config
from algo_steps import trained_whole_and_resumed

pytestmark = pytest.mark.slow
TASK_OF = {"ppo_pid": "goal", "ppo_saute": "circle", "crpo": "push", "cpo": "button"}


def config(algo):
    return make_config("cpu", dict(task=TASK_OF[algo], algo=algo, bound=1.0, seed=2, total_steps=6 * 2048,
                                   num_envs=4, episode_length=64, eval_episodes=4),
                       ["chunk_updates=2", "env.contact_model=simple"])  # the quick-to-compile contacts


@pytest.mark.parametrize("algo", list(TASK_OF))
def test_trains_and_resumes_bitwise(algo, tmp_path):
    cfg = config(algo)
    ep_a, tr_a = trained_whole_and_resumed(cfg, str(tmp_path))

    spec = registry.get(algo)
    assert list(tr_a.columns[-len(spec.state_columns):] if spec.state_columns else []) == list(spec.state_columns)
    after = tr_a[tr_a["update"] > 0]  # logged once at least one update had moved the state
    assert len(after) and np.isfinite(after[["multiplier", *spec.state_columns]].to_numpy()).all()
    assert np.isfinite(after.value_loss).all() and np.isfinite(after.policy_loss).all()
    assert np.isfinite(after.cost_value_loss).all() == spec.uses_cost_critic
    m = tr_a.multiplier.to_numpy()
    if algo == "ppo_pid":
        assert (m >= 0).all() and (np.abs(tr_a.pid_integral) <= 1.0).all()
    elif algo == "crpo":
        assert set(np.unique(m)) <= {0.0, 1.0}
    elif algo == "ppo_saute":
        assert ((m >= 0) & (m <= 3)).all() and (tr_a.saute_violations >= 0).all()
    elif algo == "cpo":
        assert set(np.unique(after.cpo_case)) <= {0.0, 1.0, 2.0, 3.0, 4.0} and (m >= 0).all()
        assert (after.approx_kl < 0.1).all()  # the trust region (0.01 on the joint KL) held
    for phase in ("final_explore", "final_greedy"):
        assert (ep_a.phase == phase).sum() == cfg.eval_episodes


def test_cpo_leaves_the_policy_to_its_own_step_and_the_critics_to_sgd():
    import jax.numpy as jnp

    from algos.config import hyper_of
    from algos.programs import compile_programs

    cfg = make_config("cpu", dict(task="circle", algo="cpo", bound=1.0, seed=0, total_steps=2048, num_envs=4,
                                  episode_length=64, eval_episodes=4), ["chunk_updates=1", "cpo_ls_steps=0"])
    compiled = compile_programs(cfg)
    h = hyper_of(cfg)
    state = compiled.init(jnp.int32(0), h)
    after, _, _ = compiled.chunk(state, h, jnp.int32(1))
    # no line-search trial allowed: the policy step is refused, and SGD must not move the policy either
    def flat(params):
        return np.concatenate([np.ravel(v) for layer in params["policy"] for v in layer.values()])

    assert np.array_equal(flat(state.params), flat(after.params))
    assert not np.array_equal(np.asarray(state.params["value"][0]["w"]), np.asarray(after.params["value"][0]["w"]))
    assert float(after.algo_state.accept_step) == 0.0
