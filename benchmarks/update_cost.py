"""A cost model of one training update, per part: FLOPs and bytes accessed from XLA's cost
analysis of each part's program, per update and per env step, and (`--time`) CPU-ms per update.

    python benchmarks/update_cost.py [--preset cpu|paper[,...]] [--task goal] [--algo ppo_lag]
                                     [--pack N] [--set KEY=VALUE ...] [--time] [--repeats 3]
                                     [--analysis lowered|compiled] [--no-whole]

The parts of one update (algos/core.py `training_step`: its phase functions), each a small
jitted program of one iteration, counted as often as an update runs it:

* env stepping: the task's step of the N envs (x S = unrolls x unroll steps);
* acting + recording: the policy's action, its log-probability, the algorithm's shield and
  observation transform if any, the episode recorder (x S);
* normaliser + sequences: the normaliser's update and the batch cut into R*N sequences (x 1);
* advantages (GAE): `core.gae` of each critic on one minibatch (x epochs x minibatches; the core
  computes it inside the loss, with the critics as they are);
* minibatch assembly: one epoch's permutation and its minibatches' gathers (x epochs);
* forward + backward: `core.minibatch_loss` and its gradient, GAE left out (x epochs x minibatches);
* optimiser (Adam): the Adam update and the parameter step (x epochs x minibatches);
* algorithm update: the algorithm's trace, its own update after the epochs (and its own policy
  step on the whole batch where it has one, e.g. CPO's) (x 1).

The whole update is the training chunk at one update per chunk (same shapes, the log capacity of
the preset's chunk), so the parts' sum can be checked against it (the ratio line).

XLA's cost analysis counts the body of a loop once, whatever its trip count, so every `lax.scan`
(and every `fori_loop` with static bounds, which JAX lowers to a scan) is unrolled while the
programs are traced for the analysis (`unrolled_scans`), and the per-iteration parts are
multiplied by their counts here. A `lax.while_loop` with a traced bound stays a loop counted
once (the MJX contact model's line search, envs/contacts.py; CPO's conjugate gradient and line
search): those parts are undercounted by the analysis. A `cond` counts as XLA counts it (its
costliest branch). `--analysis lowered` (default) analyses the unoptimised programs (every op
reads and writes its operands: bytes are an upper bound); `compiled` the optimised ones (bytes
of fused kernels), but compiling the unrolled chunk is slow: 7 minutes on 2 busy cores at the
test's tiny sizes (4 envs, 8 rollout steps), where lowering takes 7 s.

With `--pack N` every part is vmapped over N members as a batched pack runs them (the env step
folds the members into the env batch, core.env_batch), and the whole is the batched chunk;
figures per update are the pack's (N members' updates), per env step of one member's env.

`--time` runs each part's program (its iterations as one `lax.scan` over copies of a
representative iteration's inputs, taken from a real rollout of the preset) and the chunk, on
one thread (XLA single-threaded, as a sweep job runs), and prints CPU-ms per update.
The figures are XLA's estimates, not measurements; what they are for is the split.
"""
from __future__ import annotations

import os
import sys

if "--time" in sys.argv:  # one thread, as a sweep job runs (benchmarks/run_breakdown.py)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402
from typing import Callable, NamedTuple  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax._src.lax.control_flow import loops as _loops  # noqa: E402

from algos import core  # noqa: E402
from algos.config import hyper_of, make_config, stacked_hyper  # noqa: E402
from algos.networks import apply_mlp  # noqa: E402
from algos.normalizer import normalize  # noqa: E402
from algos.trace_schema import LOSS_METRICS  # noqa: E402

PARTS = ("env stepping", "acting + recording", "normaliser + sequences", "advantages (GAE)",
         "minibatch assembly", "forward + backward", "optimiser (Adam)", "algorithm update")


@contextlib.contextmanager
def unrolled_scans():
    """Trace every `lax.scan` (and static-bound `fori_loop`) fully unrolled, so that XLA's cost
    analysis, which counts a loop body once, counts every iteration."""
    original = _loops.scan

    def scan(*args, **kwargs):
        kwargs["unroll"] = True
        return original(*args, **kwargs)

    saved = jax.lax.scan
    _loops.scan, jax.lax.scan = scan, scan
    try:
        yield
    finally:
        _loops.scan, jax.lax.scan = original, saved


@contextlib.contextmanager
def without_gae():
    """The core's loss with `core.gae` replaced by a stand-in of the same shapes and no scan: the
    forward + backward part without the advantages, which are a part of their own. (The core
    calls GAE inside `minibatch_loss`; this is the one way to separate them without editing it.)"""
    calls = []
    original = core.gae

    def stand_in(rewards, values, bootstrap, done, truncated, discount, lam):
        calls.append(1)
        return jax.lax.stop_gradient(rewards), jax.lax.stop_gradient(rewards * discount)

    core.gae = stand_in
    try:
        yield
    finally:
        core.gae = original
    if not calls:
        raise RuntimeError("update_cost: algos.core.minibatch_loss no longer calls core.gae; update without_gae")


class Part(NamedTuple):
    name: str
    fn: Callable  # one iteration of the part (one member)
    args: tuple  # its inputs (one member's; stacked over the pack where packed)
    count: int  # iterations per update
    no_gae: bool = False


def _cost(fn, args, analysis: str, no_gae: bool = False) -> tuple[float, float]:
    """(FLOPs, bytes accessed) of one call of jit(fn) on args, scans unrolled."""
    specs = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), args)
    with unrolled_scans(), (without_gae() if no_gae else contextlib.nullcontext()):
        lowered = jax.jit(fn).lower(*specs)
    cost = lowered.cost_analysis() if analysis == "lowered" else lowered.compile().cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    return float(cost.get("flops", 0.0)), float(cost.get("bytes accessed", 0.0))


def _cpu_time(run, args, repeats: int) -> float:
    """CPU-seconds of one call of a compiled program (after one untimed call)."""
    jax.block_until_ready(run(*args))
    start = time.process_time()
    for _ in range(repeats):
        jax.block_until_ready(run(*args))
    return (time.process_time() - start) / repeats


def _part_time(part: Part, values: tuple, repeats: int) -> float:
    """CPU-seconds of the part's `count` iterations: one `lax.scan` over `count` copies of the
    representative iteration's inputs (copies, so XLA cannot hoist the body out of the loop)."""
    tiled = jax.tree_util.tree_map(lambda x: jnp.array(np.broadcast_to(np.asarray(x), (part.count,) + np.shape(x))),
                                   values)

    def loop(xs):
        return jax.lax.scan(lambda carry, x: (carry, part.fn(*x)), None, xs)[1]

    with without_gae() if part.no_gae else contextlib.nullcontext():
        run = jax.jit(loop).lower(tiled).compile()
    return _cpu_time(run, (tiled,), repeats)


def build(config, pack: int):
    """(parts, generate, whole chunk, env) at `config`: each part's one-iteration function (the
    core's own phase functions, algos/core.py), the function that makes every part's
    representative inputs from a real rollout, the chunk."""
    batched = pack > 1
    env = core.make_env(config)
    learner = core.make_learner(config.static_key(shared=not batched), env, batched)  # what build_programs compiles
    cfg, hooks = learner.config, learner.hooks
    E, M = cfg.num_epochs, cfg.num_minibatches
    S, C = cfg.unrolls_per_update * cfg.unroll_length, cfg.iterate_capacity
    programs = core.build_programs(config, env, batched=batched)
    loss_and_grad = jax.value_and_grad(core.flat_loss, has_aux=True)

    # ---- the parts: the core's phases, the rollout step cut at the env step -------------------
    def act_and_record(params, norm, algo_state, transform_state, env_state, next_state, pending, log, key,
                       logged_row, h):
        """One rollout step without the env step (which gets `action`; here `next_state` is given)."""
        obs, z, mu, sigma, action, record = core.act(learner, params, norm, algo_state, transform_state, env_state,
                                                     key, h)
        return (action, record) + core.record_step(learner, next_state, transform_state, pending, log, obs, z, mu,
                                                   sigma, logged_row, h)

    def prepare(norm, rollout, ended, records, transform_state, env_obs, h):
        return core.rollout_batch(learner, norm, rollout, ended, records, transform_state, env_obs, h)

    def advantages(mb, values, h):
        """`core.gae` as `core.critic` calls it, for each critic (values [critics, B, U+1])."""
        rewards = [mb.reward * h.reward_scaling] + ([mb.cost] if learner.with_cost else [])
        return [core.gae(r, v[:, :-1], v[:, -1], mb.done, mb.truncated, h.discount, h.gae_lambda)
                for r, v in zip(rewards, values)]

    def forward_backward(params, mb, constants, key):
        return loss_and_grad(params, mb, constants, key, learner)

    def optimiser(grads, opt_state, params, h):
        return core.adam_step(params, opt_state, grads, h.learning_rate)

    def algorithm(algo_state, transform_state, stats, params, sequences, norm, rollout_norm, key, h):
        start = core.trace_values(learner, algo_state, transform_state, h)
        policy = ()
        if hooks.policy_step is not None:
            policy, algo_state, _ = core.algorithm_policy_step(learner, params, sequences, norm, rollout_norm,
                                                               algo_state, stats, jax.random.fold_in(key, 1), h)
        if hooks.update is not None:
            algo_state = hooks.update(algo_state, stats, h)
        return start, policy, algo_state, core.trace_values(learner, algo_state, transform_state, h)[0]

    def shuffle(sequences, key):
        """One epoch's order and its minibatches' rows (each SGD step gathers its own; summed here)."""
        rows, keys = core.minibatch_order(learner, key)
        return core.gather_rows(sequences, rows), keys

    # ---- every part's representative inputs, from a real rollout of the initial state ------
    def generate(state, h):
        key, k_roll, k_sgd = jax.random.split(state.key, 3)
        norm = state.normalizer
        multiplier, columns = core.trace_values(learner, state.algo_state, state.transform_state, h)
        n_state, n_metrics = len(learner.state_columns), len(LOSS_METRICS)
        N = cfg.num_envs
        log = core.IterateLog(jnp.int32(0), jnp.zeros((C, N), jnp.float32), jnp.zeros((C, N), jnp.float32),
                              jnp.zeros((C, N), jnp.int32), jnp.zeros((C,), jnp.int32), jnp.zeros((C,), jnp.int32),
                              jnp.zeros((C,), jnp.float32), jnp.zeros((C, n_metrics), jnp.float32),
                              jnp.zeros((C, n_state), jnp.float32))

        def step(carry, step_index):
            env_state, transform_state, pending, log, key = carry
            key, k_act = jax.random.split(key)
            logged_row = (state.update, step_index, multiplier, state.last_metrics, columns)
            obs, z, mu, sigma, action, record = core.act(learner, state.params, norm, state.algo_state,
                                                         transform_state, env_state, k_act, h)
            next_state = learner.env_step(env_state, action)
            transform_next, pending_next, log_next, transition, finished = core.record_step(
                learner, next_state, transform_state, pending, log, obs, z, mu, sigma, logged_row, h)
            inputs = (env_state, next_state, transform_state, pending, log, k_act, logged_row, action)
            return (next_state, transform_next, pending_next, log_next, key), (transition, finished, record, inputs)

        (env_state, transform_state, _, _, _), (rollout, ended, records, inputs) = jax.lax.scan(
            step, (state.env_state, state.transform_state, state.pending, log, k_roll), jnp.arange(S, dtype=jnp.int32))
        last = jax.tree_util.tree_map(lambda x: x[-1], inputs)  # the rollout's last step
        new_norm, sequences, stats = prepare(norm, rollout, ended, records, transform_state, env_state.obs, h)
        shuffled, keys = shuffle(sequences, jax.random.split(k_sgd, E)[0])
        mb = jax.tree_util.tree_map(lambda x: x[0], shuffled)
        obs = normalize(new_norm, mb.obs, learner.normalize)
        values = jnp.stack([apply_mlp(state.params[name], obs, learner.activation)[..., 0]
                            for name in ("value", "cost_value")[:1 + learner.with_cost]])
        loss_multiplier = jnp.float32(0.0) if hooks.multiplier is None else hooks.multiplier(state.algo_state, h)
        constants = core.LossConstants(new_norm, state.algo_state, loss_multiplier, h)
        (_, _), grads = forward_backward(state.params, mb, constants, keys[0])
        ln_env, ln_next, ln_transform, ln_pending, ln_log, ln_key, ln_row, ln_action = last
        return dict(
            env=(ln_env, ln_action),
            act=(state.params, norm, state.algo_state, ln_transform, ln_env, ln_next, ln_pending, ln_log, ln_key,
                 ln_row),
            prep=(norm, rollout, ended, records, transform_state, env_state.obs),
            gae=(mb, values), shuffle=(sequences, k_sgd), grad=(state.params, mb, constants, keys[0]),
            adam=(grads, state.opt_state, state.params),
            algo=(state.algo_state, transform_state, stats, state.params, sequences, new_norm, norm, k_sgd))

    fns = {"env stepping": (learner.env_step, "env", S, False),
           "acting + recording": (act_and_record, "act", S, False),
           "normaliser + sequences": (prepare, "prep", 1, False),
           "advantages (GAE)": (advantages, "gae", E * M, False),
           "minibatch assembly": (shuffle, "shuffle", E, False),
           "forward + backward": (forward_backward, "grad", E * M, True),
           "optimiser (Adam)": (optimiser, "adam", E * M, False),
           "algorithm update": (algorithm, "algo", 1, False)}
    needs_h = {name for name in fns if name not in ("env stepping", "minibatch assembly", "forward + backward")}
    return fns, needs_h, generate, programs, env


def _pack(fn, pack: int):
    return jax.vmap(fn) if pack > 1 else fn


def analyse(config, pack: int = 1, timed: bool = False, repeats: int = 3, analysis: str = "lowered",
            log=print, whole: bool = True) -> dict:
    """Rows {part: (flops, bytes, seconds or None) per update}, the whole update's, and the bound parts."""
    # the whole at one update per chunk, with the preset's log capacity (the parts' shapes)
    config = dataclasses.replace(config, chunk_updates=1, log_capacity=config.iterate_capacity)
    fns, needs_h, generate, programs, env = build(config, pack)
    if pack > 1:
        h = stacked_hyper([config] * pack)
        seeds, budget = jnp.arange(pack, dtype=jnp.int32), jnp.full((pack,), 10**9, jnp.int32)
    else:
        h, seeds, budget = hyper_of(config), jnp.int32(config.seed), jnp.int32(10**9)
    init = _pack(programs.init, pack)
    gen = _pack(generate, pack)
    start = time.perf_counter()
    if timed:
        state = jax.jit(init)(seeds, h)
        inputs = jax.jit(gen)(state, h)
    else:
        state = jax.eval_shape(init, seeds, h)
        inputs = jax.eval_shape(gen, state, h)
    rows = {}
    for name, (fn, key, count, no_gae) in fns.items():
        with_h = name in needs_h
        args = inputs[key] + ((h,) if with_h else ())
        part_fn = _pack(fn, pack)
        t0 = time.perf_counter()
        flops, nbytes = _cost(part_fn, args, analysis, no_gae)
        seconds = None
        if timed:
            seconds = _part_time(Part(name, part_fn, args, count, no_gae), args, repeats)
        rows[name] = (flops * count, nbytes * count, seconds)
        log(f"  [{name}: x{count}, analysed in {time.perf_counter() - t0:.1f} s]", file=sys.stderr)
    t0 = time.perf_counter()
    chunk = _pack(programs.chunk, pack)
    whole_flops, whole_bytes = _cost(chunk, (state, h, budget), analysis) if whole else (None, None)
    if whole:
        log(f"  [whole update (chunk of 1): analysed in {time.perf_counter() - t0:.1f} s]", file=sys.stderr)
    whole_seconds = None
    if timed:
        updates = 4
        timed_cfg = dataclasses.replace(config, chunk_updates=updates)
        chunk_t = _pack(core.build_programs(timed_cfg, env, batched=pack > 1).chunk, pack)
        run = jax.jit(chunk_t).lower(state, h, budget).compile()
        whole_seconds = _cpu_time(lambda s: run(s, h, budget)[1].count, (state,), repeats) / updates
    return dict(rows=rows, whole=(whole_flops, whole_bytes, whole_seconds), seconds=time.perf_counter() - start)


def bound_parts(rows: dict) -> dict:
    """The part with the largest share of FLOPs, of bytes and (where timed) of time."""
    out = {"FLOPs": max(rows, key=lambda n: rows[n][0]), "bytes": max(rows, key=lambda n: rows[n][1])}
    if all(r[2] is not None for r in rows.values()):
        out["time"] = max(rows, key=lambda n: rows[n][2])
    return out


def _fmt(x: float) -> str:
    """Thousands separated, small values with three significant digits (never a bare 0 for a few FLOPs)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def report(preset: str, config, pack: int, result: dict, out=print) -> None:
    rows, (wf, wb, wt) = result["rows"], result["whole"]
    steps = pack * config.steps_per_update
    timed = wt is not None
    tf, tb = sum(r[0] for r in rows.values()), sum(r[1] for r in rows.values())
    tt = sum(r[2] for r in rows.values()) if timed else None
    head = (f"| {'part':<24} | {'GFLOP/update':>12} | {'MB/update':>10} | {'FLOP/env step':>13} | "
            f"{'bytes/env step':>14} | {'FLOP share':>10} | {'byte share':>10} |")
    out(head + (f" {'CPU-ms/update':>13} | {'time share':>10} |" if timed else ""))
    out("|" + "|".join("-" * (len(c) + 0) for c in head.split("|")[1:-1]) + "|"
        + ("---------------|------------|" if timed else ""))

    def line(name, f, b, t, share=True):
        text = (f"| {name:<24} | {f / 1e9:12.4f} | {b / 1e6:10.2f} | {_fmt(f / steps):>13} | {_fmt(b / steps):>14} | "
                + (f"{f / tf:10.1%} | {b / tb:10.1%} |" if share else f"{'':>10} | {'':>10} |"))
        if timed:
            text += f" {1e3 * t:13.2f} | " + (f"{t / tt:10.1%} |" if share else f"{'':>10} |")
        out(text)

    for name, (f, b, t) in rows.items():
        line(name, f, b, t)
    line("sum of parts", tf, tb, tt, share=False)
    if wf is not None:
        line("whole update (chunk)", wf, wb, wt, share=False)
        ratio = f"sum of parts / whole update: FLOPs {tf / wf:.2f}, bytes {tb / wb:.2f}"
        if timed:
            ratio += f", CPU time {tt / wt:.2f}; whole update {wt / steps:.3g} CPU-s per env step of the pack"
        out(ratio)
    bound = bound_parts(rows)
    shares = {"FLOPs": (0, tf), "bytes": (1, tb), "time": (2, tt)}
    out(f"bound ({preset}): " + "; ".join(f"{what}: {name} ({rows[name][shares[what][0]] / shares[what][1]:.0%})"
                                          for what, name in bound.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cpu", help="trainer preset(s), comma-separated")
    parser.add_argument("--task", default="goal")
    parser.add_argument("--algo", default="ppo_lag")
    parser.add_argument("--pack", type=int, default=1, help="members of a batched pack (1: one run)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="trainer config override")
    parser.add_argument("--time", action="store_true", help="also time each part (CPU-ms per update)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per part with --time")
    parser.add_argument("--no-whole", action="store_true",
                        help="skip the whole update's cost analysis (the slow part with --analysis compiled)")
    parser.add_argument("--analysis", choices=("compiled", "lowered"), default="lowered",
                        help="cost analysis of the optimised (compiled) or the unoptimised (lowered) programs")
    args = parser.parse_args(argv)
    if args.time and "intra_op_parallelism_threads=1" not in os.environ.get("XLA_FLAGS", ""):
        print("update_cost: --time without single-threaded XLA (call main from the command line for one thread)",
              file=sys.stderr)
    device = jax.devices()[0]
    for preset in args.preset.split(","):
        config = make_config(preset, dict(task=args.task, algo=args.algo), args.set)
        print(f"{args.task} {args.algo} preset {preset}, pack {args.pack}: {config.num_envs} envs, "
              f"{config.steps_per_update:,} env steps per update per member ({config.unrolls_per_update} unrolls x "
              f"{config.unroll_length} steps; {config.num_epochs} epochs x {config.num_minibatches} minibatches of "
              f"{config.batch_size} sequences); policy {config.policy_hidden}, critics {config.critic_hidden}; "
              f"XLA cost analysis ({args.analysis}) on {device.platform}, {os.cpu_count()} CPUs")
        result = analyse(config, args.pack, args.time and not args.no_whole, args.repeats, args.analysis,
                         log=lambda *a, **k: print(*a, **k, flush=True), whole=not args.no_whole)
        report(preset, config, args.pack, result)
        print(f"({result['seconds']:.0f} s to analyse{' and time' if args.time else ''})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
