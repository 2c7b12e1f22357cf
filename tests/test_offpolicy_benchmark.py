"""benchmarks/offpolicy_learning.py at --quick sizes (4 envs, T = 16): the table has one row per
method and phase with the episode counts the budget implies, and the throughput lines count
the gradient steps of each core exactly (SAC: updates x grad_updates_per_step; PPO: updates x
epochs x minibatches). CRAX's sac_lag is left out (--skip-crax): compiling CRAX's goal and its
trainer took longer than this test may (see the test below)."""
import re
import sys
from pathlib import Path

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
    assert "CRAX" not in out, out


def test_a_seed_count_below_one_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        offpolicy_learning.main(["--seeds", "0"])
    assert exit_.value.code == 2
    assert "--seeds 0: must be >= 1" in capsys.readouterr().err
