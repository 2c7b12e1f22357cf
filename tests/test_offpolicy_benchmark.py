"""benchmarks/offpolicy_learning.py at --quick sizes (4 envs, T = 16): the table has one row per
method and phase with the episode counts the budget implies, and the throughput lines count
the gradient steps of each core exactly (SAC: updates x grad_updates_per_step; PPO: updates x
epochs x minibatches). CRAX's sac_lag is left out (--skip-crax): at --quick sizes its trainer
and evaluation took 12 minutes here (nearly all compilation of CRAX's MJX goal on a loaded
2-core CPU); its parts of this script's own (episode sums, the replication drop-in) are tested
on their own below."""
import re
import sys
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import offpolicy_learning  # noqa: E402

ROW = re.compile(r"^\| (?P<method>[^|]+?) \| (?P<phase>\w+) \| (?P<episodes>\d+) \| (?P<ret>-?[\d.]+) \| "
                 r"(?P<cost>-?[\d.]+) \| (?P<v>[\d.]+) \|$", re.M)


def rows(out: str) -> dict:
    return {(m["method"], m["phase"]): (int(m["episodes"]), float(m["ret"]), float(m["cost"]), float(m["v"]))
            for m in ROW.finditer(out)}


@pytest.mark.slow
def test_quick_run_prints_every_method_and_phase_and_counts_gradient_steps(capsys):
    # 128 steps of 4 envs at T = 16: two episodes of every env, so two logged iterates, and
    # the `train` row is the last one (4 episodes)
    assert offpolicy_learning.main(["--quick", "--skip-crax", "--seeds", "1", "--total-steps", "128",
                                    "--bound", "0.5"]) == 0
    out = capsys.readouterr().out
    table = rows(out)
    assert set(table) == {("uniform random", "random"),
                          *((m, p) for m in ("SAC-Lag", "PPO-Lag") for p in ("train", "final_explore", "final_greedy"))}, out
    assert all(episodes == 4 for episodes, *_ in table.values()), out
    for episodes, ret, cost, v in table.values():
        assert cost >= 0 and 0 <= v <= 1 and (v == 0 or cost > 0), out  # V > 0 needs a costly episode
    assert "goal, bound 0.5, seeds 1, 128 env steps per run;" in out, out
    # SAC: 128 / 4 = 32 updates of 1 gradient step; PPO: 128 / 32 = 4 updates of 1 epoch x 2 minibatches
    throughput = {m["method"]: (float(m["env"].replace(",", "")), float(m["grad"].replace(",", "")), m["counts"])
                  for m in re.finditer(r"^  (?P<method>\S+) +env steps/s +(?P<env>[\d,]+) +gradient steps/s +"
                                       r"(?P<grad>[\d,.]+) +\((?P<counts>[^)]*) in [\d.]+ s\)$", out, re.M)}
    assert throughput["SAC-Lag"][2] == "128 env steps, 32 gradient steps", out
    assert throughput["PPO-Lag"][2] == "128 env steps, 8 gradient steps", out
    ratio = re.search(r"^SAC-Lag / PPO-Lag: env steps/s ([\d.]+), gradient steps/s ([\d.]+)$", out, re.M)
    assert ratio, out
    sac, ppo = throughput["SAC-Lag"], throughput["PPO-Lag"]
    assert float(ratio.group(1)) == pytest.approx(sac[0] / ppo[0], rel=0.01)
    assert float(ratio.group(2)) == pytest.approx(sac[1] / ppo[1], rel=0.01)
    for method in ("uniform random", "SAC-Lag", "PPO-Lag"):
        assert re.search(rf"^  {re.escape(method)} +\d+\.\d s( \([\d.]+ s training\))?$", out, re.M), out
    assert "SAC-Lag (CRAX)" not in out, out  # --skip-crax


def test_a_seed_count_below_one_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        offpolicy_learning.main(["--seeds", "0"])
    assert exit_.value.code == 2
    assert "--seeds 0: must be >= 1" in capsys.readouterr().err


class ToyState(NamedTuple):
    obs: jnp.ndarray
    t: jnp.ndarray


def test_episode_sums_count_each_episode_once_up_to_its_end():
    """Reward 1 and cost t per step; env 0 ends at its 3rd step, env 1 runs on: steps after an
    end (the auto-reset's next episode) count for nothing."""
    ends = jnp.array([3, 99])

    def reset(keys):
        return ToyState(jnp.zeros((keys.shape[0], 1)), jnp.zeros(keys.shape[0], jnp.int32))

    def step(state, action):
        t = state.t + 1
        done = t == ends
        return ToyState(state.obs, jnp.where(done, 0, t)), jnp.ones(2), t.astype(jnp.float32), done.astype(jnp.float32)

    ret, cost = offpolicy_learning.episode_sums(reset, step, lambda obs, key: jnp.zeros((2, 2)), 2, 5,
                                                jax.random.PRNGKey(0))
    assert ret.tolist() == [3.0, 5.0] and cost.tolist() == [1 + 2 + 3, 1 + 2 + 3 + 4 + 5]


def test_replication_stacks_every_leaf_along_a_device_axis():
    devices = jax.local_devices()[:1]
    out = offpolicy_learning.device_put_replicated({"a": jnp.arange(3.0), "b": jnp.float32(2.0)}, devices)
    assert out["a"].shape == (1, 3) and out["a"][0].tolist() == [0.0, 1.0, 2.0]
    assert out["b"].shape == (1,) and float(out["b"][0]) == 2.0
    assert set(out["a"].devices()) == set(devices)
