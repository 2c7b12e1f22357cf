"""What recording episodes costs: the same loop with and without a recorder, in one run.

    python benchmarks/recorder_overhead.py [--gym-envs 16] [--gym-steps 2000]
        [--flush-every 20] [--num-envs 2048] [--jax-steps 200] [--episode-length 50] [--repeats 5]
        [--flush-rows 1000 60000] [--compare-writer OLD/recorders/writer.py] [--flush-only]

1. Gymnasium: a SyncVectorEnv of --gym-envs small pure-Python envs (next-step autoreset, cost
   in info["cost"]) stepped --gym-steps times with constant actions, bare and wrapped in
   recorders.gym.RecordVectorEpisodes (writing its Parquet files to a temporary folder), once
   with the default flush after every iterate and once with flush_every=--flush-every. The
   env is deliberately cheap (a few microseconds per step), so the ratio is the worst case: a
   real simulator's step costs far more and the recorder's cost stays the same. Two figures
   separate the parts: the recorder's own time per step (on a vector env whose step is free)
   and the time of one flush (one Parquet write; the default writes after every iterate).
2. JAX: the built-in goal task at --num-envs envs, jit(scan(vmap(env.step))) over --jax-steps
   steps with random actions, bare and with recorders.jax_recorder.record in the scan body,
   then with the host-side drain into an EpisodeWriter after each call as well (episode length
   --episode-length, so iterates complete and are written during the timed calls).

3. Flush cost against the rows already written: a writer holding --flush-rows rows (one block
   of 16-episode iterates) then flushes 40 more iterates of 16 episodes one by one; each
   flush's wall and CPU time. With --compare-writer (another checkout's recorders/writer.py,
   e.g. the commit before the part files: ``git worktree add /tmp/recorder-old COMMIT``) the
   same is measured on that writer in the same run, repeats alternating between the two.
   --flush-only runs this part alone.

Repeats alternate between the two variants (so a load change on a shared machine hits both);
each variant's figure is the median over --repeats (and the fastest run, the figure least
disturbed by other load). Ratios are with / without.
"""
from __future__ import annotations

import argparse
import os
import importlib.util
import statistics
import sys
import tempfile
import time

import gymnasium
import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the checkout

import envs  # noqa: E402
from recorders import EpisodeWriter
from recorders import jax_recorder as jr
from recorders.gym import RecordVectorEpisodes


class Walk(gymnasium.Env):
    """A walk on a line: reward = step taken, cost 1 inside [4, 6], episodes of 20..40 steps."""

    def __init__(self):
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float64)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t, self.limit = 0.0, 0, int(self.np_random.integers(20, 41))
        return np.array([self.x]), {}

    def step(self, action):
        self.x += float(action[0])
        self.t += 1
        return np.array([self.x]), float(action[0]), self.t >= self.limit, False, {"cost": float(4 <= self.x <= 6)}


class Replay(gymnasium.vector.VectorEnv):
    """A vector env whose step costs nothing (it returns the same arrays): times the recorder alone."""

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs):
        self.num_envs = num_envs
        n = num_envs
        self.out = (np.zeros((n, 1)), np.ones(n), np.zeros(n, bool), np.zeros(n, bool),
                    {"cost": np.ones(n), "_cost": np.ones(n, bool)})

    def reset(self, *, seed=None, options=None):
        return np.zeros((self.num_envs, 1)), {}

    def step(self, actions):
        return self.out


def recorder_step_us(num_envs, steps, folder) -> float:
    """Microseconds per step that RecordVectorEpisodes adds, measured on a free env (no episode ends)."""
    env = RecordVectorEpisodes(Replay(num_envs), EpisodeWriter(folder, task="replay", bound=1.0, algo="bench", seed=0))
    env.reset()
    bare = Replay(num_envs)
    times = []
    for e in (bare, env):
        start = time.perf_counter()
        for _ in range(steps):
            e.step(None)
        times.append(time.perf_counter() - start)
    return (times[1] - times[0]) / steps * 1e6


def time_gym(num_envs, steps, flush_every, folder) -> tuple[float, int]:
    """(seconds, iterates recorded); flush_every None: no recorder."""
    env = gymnasium.vector.SyncVectorEnv([Walk for _ in range(num_envs)])
    writer = None
    if flush_every is not None:
        writer = EpisodeWriter(folder, task="walk", bound=5.0, algo="bench", seed=0, flush_every=flush_every)
        env = RecordVectorEpisodes(env, writer)
    actions = np.full((num_envs, 1), 0.3)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    seconds = time.perf_counter() - start
    env.close()
    return seconds, writer.iterations if writer else 0


def flush_ms(tmp, num_envs, flushes=50) -> float:
    """Median milliseconds per EpisodeWriter flush of one small iterate (the fixed cost of a Parquet write)."""
    writer = EpisodeWriter(f"{tmp}/flush", task="walk", bound=5.0, algo="bench", seed=0)
    block = np.ones((1, num_envs))
    times = []
    for _ in range(flushes):
        start = time.perf_counter()
        writer.append_iterates(block, block, block.astype(int))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def load_writer(path):
    """EpisodeWriter of another checkout's recorders/writer.py (imported under another name)."""
    spec = importlib.util.spec_from_file_location("compared_recorder_writer", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.EpisodeWriter


def flush_costs(writer_cls, folder, rows_before, episodes=16, flushes=40) -> tuple[list, list]:
    """(wall ms, CPU ms) of each of ``flushes`` one-iterate flushes after ``rows_before`` rows."""
    writer = writer_cls(folder, task="walk", bound=5.0, algo="bench", seed=0)
    k = max(rows_before // episodes, 1)
    writer.append_iterates(np.ones((k, episodes)), np.ones((k, episodes)), np.ones((k, episodes), int))
    block = np.ones((1, episodes))
    wall, cpu = [], []
    for _ in range(flushes):
        w0, c0 = time.perf_counter(), time.process_time()
        writer.append_iterates(block, block, block.astype(int))
        wall.append((time.perf_counter() - w0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return wall, cpu


def flush_report(args, tmp):
    writers = {"this writer": EpisodeWriter}
    if args.compare_writer:
        writers[f"compared ({args.compare_writer})"] = load_writer(args.compare_writer)
    for rows in args.flush_rows:
        results = {name: ([], []) for name in writers}
        for r in range(args.repeats):
            for name, cls in writers.items():  # alternating
                wall, cpu = flush_costs(cls, f"{tmp}/flush-{rows}-{r}-{len(results[name][0])}-{hash(name)}", rows)
                results[name][0].extend(wall)
                results[name][1].extend(cpu)
        for name, (wall, cpu) in results.items():
            print(f"flush of one 16-episode iterate after {rows:,} rows, {name}: median {statistics.median(wall):.2f} ms "
                  f"wall, {statistics.median(cpu):.2f} ms CPU; mean {statistics.mean(wall):.2f} ms wall; max "
                  f"{max(wall):.1f} ms ({len(wall)} flushes)")


def jax_programs(env, num_envs, steps, capacity):
    def act(key):
        return jax.random.uniform(key, (num_envs, 2), minval=-1.0, maxval=1.0)

    @jax.jit
    def bare(state, key):
        def body(s, k):
            return jax.vmap(env.step)(s, act(k)), None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    @jax.jit
    def recorded(state, rec, key):
        def body(carry, k):
            s, rec = carry
            s = jax.vmap(env.step)(s, act(k))
            return (s, jr.record(rec, s.done, s.finished_return, s.finished_cost, s.finished_length)), None

        return jax.lax.scan(body, (state, rec), jax.random.split(key, steps))[0]

    return bare, recorded


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gym-envs", type=int, default=16)
    parser.add_argument("--gym-steps", type=int, default=2000)
    parser.add_argument("--flush-every", type=int, default=20, help="the batched-flush variant's flush_every")
    parser.add_argument("--num-envs", type=int, default=2048)
    parser.add_argument("--jax-steps", type=int, default=200)
    parser.add_argument("--episode-length", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--flush-rows", type=int, nargs="+", default=[1000, 60000],
                        help="rows written before the timed flushes")
    parser.add_argument("--compare-writer", default=None, help="another checkout's recorders/writer.py")
    parser.add_argument("--flush-only", action="store_true", help="only the flush-cost part")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        flush_report(args, tmp)
        if args.flush_only:
            return
        variants = (None, 1, args.flush_every)  # no recorder, the default flush per iterate, batched flushes
        times = {v: [] for v in variants}
        for r in range(args.repeats):
            for v in variants:
                seconds, iterates = time_gym(args.gym_envs, args.gym_steps, v, f"{tmp}/gym{r}-{v}")
                times[v].append(seconds)
        bare = statistics.median(times[None])
        print(f"gymnasium SyncVectorEnv, {args.gym_envs} envs x {args.gym_steps} steps ({iterates} iterates): "
              f"without recorder {bare:.3f} s ({bare / args.gym_steps * 1e6:.0f} us per vector step)")
        for v in variants[1:]:
            rec = statistics.median(times[v])
            per_step = (rec - bare) / args.gym_steps * 1e6
            print(f"  with recorder, flush_every={v}: {rec:.3f} s, ratio {rec / bare:.3f} "
                  f"(+{per_step:.1f} us per vector step, +{per_step / args.gym_envs:.2f} us per env step); "
                  f"fastest runs: ratio {min(times[v]) / min(times[None]):.3f}")

        for n in (args.gym_envs, args.num_envs):
            print(f"  recorder alone (a vector env whose step is free, no episode ending): "
                  f"{recorder_step_us(n, 20000, f'{tmp}/replay{n}'):.1f} us per vector step of {n} envs")
        print(f"  one flush (a new part file, default after every iterate): "
              f"{flush_ms(tmp, args.gym_envs):.2f} ms for an iterate of {args.gym_envs} episodes")

        env = envs.make("goal", episode_length=args.episode_length)
        n, steps = args.num_envs, args.jax_steps
        capacity = steps // args.episode_length + 1
        bare_fn, recorded_fn = jax_programs(env, n, steps, capacity)
        state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), n))
        recorder = jr.init_recorder(n, capacity)
        writer = EpisodeWriter(f"{tmp}/jax", task="goal", bound=5.0, algo="bench", seed=0)
        start = time.perf_counter()
        jax.block_until_ready(bare_fn(state, jax.random.PRNGKey(1)))
        compile_bare = time.perf_counter() - start
        start = time.perf_counter()
        _, warm = jax.block_until_ready(recorded_fn(state, recorder, jax.random.PRNGKey(1)))
        compile_rec = time.perf_counter() - start
        jr.drain(warm, EpisodeWriter(f"{tmp}/warm-up", task="goal", bound=5.0, algo="bench", seed=0))  # first write
        times = {"bare": [], "scan": [], "drain": []}
        s_bare, s_rec = state, state
        for r in range(args.repeats):
            key = jax.random.PRNGKey(2 + r)
            start = time.perf_counter()
            s_bare = jax.block_until_ready(bare_fn(s_bare, key))
            times["bare"].append(time.perf_counter() - start)
            start = time.perf_counter()
            s_rec, recorder = jax.block_until_ready(recorded_fn(s_rec, recorder, key))
            middle = time.perf_counter()
            recorder = jr.drain(recorder, writer)  # host side: rows to Parquet
            times["scan"].append(middle - start)
            times["drain"].append(time.perf_counter() - middle)
        bare, scan = statistics.median(times["bare"]), statistics.median(times["scan"])
        totals = [a + b for a, b in zip(times["scan"], times["drain"])]
        total = statistics.median(totals)
        print(f"JAX goal task, {n} envs x {steps} steps per call (T = {args.episode_length}; "
              f"{writer.iterations} iterates of {n} episodes recorded over {args.repeats} calls): "
              f"without {n * steps / bare:,.0f} steps/s ({bare:.3f} s per call)")
        print(f"  with record() in the scan: {scan:.3f} s, ratio {scan / bare:.3f}; plus the host-side drain "
              f"(median {statistics.median(times['drain']) * 1e3:.0f} ms per call): {total:.3f} s, "
              f"ratio {total / bare:.3f}; first call incl. compile {compile_bare:.1f} s vs {compile_rec:.1f} s")
        print(f"  fastest call of each: without {min(times['bare']):.3f} s, with record() {min(times['scan']):.3f} s "
              f"(ratio {min(times['scan']) / min(times['bare']):.3f}), with drain {min(totals):.3f} s "
              f"(ratio {min(totals) / min(times['bare']):.3f})")


if __name__ == "__main__":
    main()
