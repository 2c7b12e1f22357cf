"""benchmarks/update_cost.py, the cost model of one update per part, at tiny sizes: every part
has positive FLOPs and bytes, the parts add up to the whole update (the chunk of one update), and
the bound line names a part. At these sizes the parts' FLOPs were 1.00 of the whole's (bytes
1.00) with the default (lowered) analysis; about 25 s on 2 busy cores."""
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import update_cost  # noqa: E402

TINY = ["--preset", "cpu", "--set", "num_envs=4", "--set", "batch_size=4", "--set", "num_minibatches=2",
        "--set", "unroll_length=4", "--set", "num_epochs=2", "--set", "episode_length=16",
        "--set", "policy_hidden=8", "--set", "critic_hidden=8", "--set", "eval_episodes=1",
        "--set", "chunk_updates=2"]


def _number(text: str) -> float:
    return float(text.strip().rstrip("%").replace(",", ""))


def test_every_part_is_costed_and_the_parts_add_up_to_the_whole_update(capsys):
    assert update_cost.main(TINY) == 0
    out = capsys.readouterr().out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) >= 7 and not cells[0] == "part":
            rows[cells[0]] = [_number(c) for c in cells[1:5]]  # per update, per env step (not the shares)
    assert set(update_cost.PARTS) <= set(rows), out
    for name in update_cost.PARTS:
        flops_per_update, mb_per_update, flop_per_step, bytes_per_step = rows[name]
        # per update in GFLOP and MB (4 decimals: PPO-Lag's multiplier step shows as 0), per env step exact
        assert flops_per_update >= 0 and mb_per_update >= 0, (name, out)
        assert flop_per_step > 0 and bytes_per_step > 0, (name, out)
    parts = sum(rows[name][2] for name in update_cost.PARTS)  # FLOP per env step (full precision)
    assert abs(parts - rows["sum of parts"][2]) <= 0.01 * parts + len(update_cost.PARTS)
    whole = rows["whole update (chunk)"][2]
    assert 0.5 <= parts / whole <= 2.0, out
    ratio = re.search(r"sum of parts / whole update: FLOPs ([\d.]+), bytes ([\d.]+)", out)
    assert ratio and 0.5 <= float(ratio.group(1)) <= 2.0 and 0.5 <= float(ratio.group(2)) <= 2.0, out
    bound = re.search(r"^bound \(cpu\): FLOPs: (.+?) \(\d+%\); bytes: (.+?) \(\d+%\)$", out, re.M)
    assert bound and bound.group(1) in update_cost.PARTS and bound.group(2) in update_cost.PARTS, out
