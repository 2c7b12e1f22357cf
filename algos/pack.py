"""Train a pack of runs as one vmapped program: start or resume each member, train in chunks,
checkpoint each member into its own folder, evaluate, write each member's run folder.

Every member is a run of its own: its folder, seed stream, checkpoints and completeness
contract (algos.runfolder) are those of a run trained alone, so a member resumes alone or in
another pack, and a failed member is retrained without its finished pack-mates. A member
whose training diverges is dropped from the pack (its failure recorded by the caller); the
others go on.
"""
from __future__ import annotations

import math
import os
import platform
import shutil
import time
from typing import NamedTuple

HOST_FIELDS = ("update", "step", "ret", "cost", "length", "multiplier", "metrics", "state", "wall_time")


class Member(NamedTuple):
    config: object  # TrainConfig
    out: str  # run folder
    preset: str = ""


class HostLog:
    """One member's per-iterate results copied off the device after each chunk, as lists of arrays."""

    def __init__(self, num_envs: int, num_metrics: int, arrays: dict | None = None, num_state: int = 0):
        import numpy as np

        self.empty = {"update": (0,), "step": (0,), "ret": (0, num_envs), "cost": (0, num_envs),
                      "length": (0, num_envs), "multiplier": (0,), "metrics": (0, num_metrics),
                      "state": (0, num_state), "wall_time": (0,)}
        self.dtypes = {"update": np.int32, "step": np.int32, "length": np.int32, "wall_time": np.float64}
        if arrays is not None and "state" not in arrays:  # a checkpoint of a version without state columns
            arrays = {**arrays, "state": np.zeros((len(arrays["update"]), num_state), np.float32)}
        self.parts = {k: ([arrays[k]] if arrays is not None else []) for k in HOST_FIELDS}

    def append(self, log: dict, count: int, wall_time) -> None:
        import numpy as np

        for k in HOST_FIELDS[:-1]:
            self.parts[k].append(np.asarray(log[k][:count]))
        self.parts["wall_time"].append(wall_time)

    def arrays(self) -> dict:
        """The log so far as one array per field (and compacted to that)."""
        import numpy as np

        out = {k: np.concatenate(v) if v else np.zeros(self.empty[k], self.dtypes.get(k, np.float32))
               for k, v in self.parts.items()}
        self.parts = {k: [out[k]] for k in HOST_FIELDS}
        return out


class Progress:
    """A member's place in training: its host log, train time, restarts, kept checkpoint slot,
    and every code version that has trained it so far (a resume may cross a code change)."""

    def __init__(self, host: HostLog, train_s: float = 0.0, restarts: int = 0, keep: str | None = None,
                 code_versions: tuple = ()):
        from algos.runfolder import code_version

        self.host, self.train_s, self.restarts, self.keep = host, train_s, restarts, keep
        now = code_version()
        self.code_versions = [*code_versions] + ([now] if now not in code_versions else [])
        self.failed: str | None = None


def padded_configs(members) -> list:
    """The configs the pack program runs: the members', then copies of the last to whole
    blocks of algos.programs.PACK_WIDTH (unused padding)."""
    configs = [m.config for m in members]
    from algos.programs import pack_slots

    return configs + [configs[-1]] * (pack_slots(len(configs)) - len(configs))


def _slice(tree, i):
    import jax

    return jax.tree_util.tree_map(lambda x: x[i], tree)


def _stack(trees):
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def pack_name(members) -> str:
    from metrics.run_layout import run_id

    first = members[0].config
    return run_id(first.task, first.bound, first.algo, first.seed) + (f" +{len(members) - 1}" if len(members) > 1 else "")


def check_same_program(members) -> None:
    keys = {m.config.static_key() for m in members}
    if len(keys) > 1:
        raise ValueError("a pack's runs must share one static config (task, algorithm, shapes, schedule); "
                         f"these differ: {sorted(m.out for m in members)}")


def _start(members, compiled, say) -> tuple[object, list[Progress]]:
    """The batched initial state, each member's newest usable checkpoint swapped in."""
    import jax
    import jax.numpy as jnp

    from algos import checkpoint
    from algos.core import METRIC_NAMES
    from algos.programs import stacked_hyper
    from algos.registry import get as get_algorithm
    from metrics.run_layout import CHECKPOINT_DIR

    configs = padded_configs(members)
    fresh = compiled.init(jnp.asarray([c.seed for c in configs], jnp.int32), stacked_hyper(configs))
    states, progress = [], []
    for i, m in enumerate(members):
        ckpt = os.path.join(m.out, CHECKPOINT_DIR)
        n_state = len(get_algorithm(m.config.algo).state_columns)
        host = HostLog(m.config.num_envs, len(METRIC_NAMES), num_state=n_state)
        if not checkpoint.exists(ckpt):
            states.append(_slice(fresh, i))
            progress.append(Progress(host))
            continue
        name = _member_name(m)
        try:
            state, arrays, meta = checkpoint.load(ckpt, compiled.template, checkpoint.identity_of(m.config),
                                                  warn=lambda text: say(f"[{name}] warning: {text}"))
        except checkpoint.CheckpointError as err:  # fails this member only; it rides along unused
            states.append(_slice(fresh, i))
            progress.append(Progress(host))
            progress[-1].failed = str(err)
            say(f"[{name}] failed: {err}")
            continue
        say(f"[{name}] resumed from {ckpt} at update {int(state.update)}/{m.config.num_updates} "
            f"(checkpoint generation {meta['generation']})")
        states.append(jax.device_put(state))
        progress.append(Progress(HostLog(m.config.num_envs, len(METRIC_NAMES),
                                         {k: arrays[k] for k in HOST_FIELDS if k in arrays}, n_state),
                                 float(meta["train_s"]), int(meta["restarts"]) + 1, meta["arrays"],
                                 tuple(meta.get("code_versions") or ["unknown (checkpoint predates the record)"])))
        if len(progress[-1].code_versions) > 1:
            say(f"[{name}] warning: resumed under changed code: it was trained by code "
                f"{', '.join(progress[-1].code_versions[:-1])}, now {progress[-1].code_versions[-1]}; run.json "
                "records every version and `workflow.status --outdated` lists the run")
    return _stack(states + states[-1:] * (len(configs) - len(states))), progress


def _member_name(m: Member) -> str:
    from metrics.run_layout import run_id

    return run_id(m.config.task, m.config.bound, m.config.algo, m.config.seed)


def _save(m: Member, p: Progress, state) -> None:
    from algos import checkpoint
    from metrics.run_layout import CHECKPOINT_DIR

    meta = {"config": checkpoint.identity_of(m.config), "train_s": p.train_s, "restarts": p.restarts,
            "code_versions": p.code_versions}
    p.keep = checkpoint.save(os.path.join(m.out, CHECKPOINT_DIR), state, p.host.arrays(), meta, keep=p.keep)["arrays"]


def train_chunks(members, compiled, state, progress, *, say, stop, stop_after_chunks=None, stop_at=None):
    """Run chunks until every live member has spent its budget, or a stop is asked for.

    Returns (state, why): why is None when done, else the reason for stopping after every
    live member's checkpoint was written (a signal, `stop_after_chunks`, the `stop_at` deadline).
    """
    import jax.numpy as jnp
    import numpy as np

    from algos.programs import stacked_hyper

    configs = padded_configs(members)
    h = stacked_hyper(configs)
    budgets = np.asarray([c.num_updates for c in configs])
    num_updates = jnp.asarray(budgets, jnp.int32)
    cfg = configs[0]
    S, C = cfg.unrolls_per_update * cfg.unroll_length, cfg.iterate_capacity
    last_save, chunks_here, longest_chunk = time.monotonic(), 0, 0.0
    rate_steps, rate_s = 0, 0.0
    name = pack_name(members)

    def live():
        return [i for i, p in enumerate(progress) if p.failed is None]

    updates = np.asarray(state.update)
    while any(updates[i] < budgets[i] for i in live()):
        before = updates
        start = time.perf_counter()
        state, log, summary = compiled.chunk(state, h, num_updates)
        counts = np.asarray(log.count)  # waits for the chunk
        seconds = time.perf_counter() - start
        updates = np.asarray(state.update)
        log_host = {k: np.asarray(getattr(log, k)) for k in HOST_FIELDS[:-1]}
        ok = np.isfinite(np.asarray(summary.multiplier)) & np.isfinite(np.asarray(summary.mean_step_cost))
        for i in live():
            m, p, count = members[i], progress[i], int(counts[i])
            if before[i] >= budgets[i]:  # done earlier; trains on unused until its pack-mates finish
                continue
            if count > C:
                p.failed = (f"{_member_name(m)}: {count} iterates completed in one chunk but the log holds {C}; "
                            f"episodes end early in this task: raise --set log_capacity=")
            elif not ok[i].all():
                p.failed = (f"{_member_name(m)}: training diverged (NaN/inf multiplier or cost) at update "
                            f"{int(before[i]) + int(np.argmin(ok[i]))}; no outputs written")
            if p.failed:
                say(f"[{_member_name(m)}] failed: {p.failed}")
                continue
            done = int(updates[i] - before[i])
            rows = log_host["update"][i, :count] - before[i]
            frac = (rows * S + log_host["step"][i, :count] + 1) / (max(done, 1) * S)
            p.host.append({k: v[i] for k, v in log_host.items()}, count, p.train_s + frac * seconds)
            p.train_s += seconds
        chunks_here += 1
        longest_chunk = max(longest_chunk, seconds)
        steps_done = int(sum(updates[i] - before[i] for i in live())) * cfg.steps_per_update
        if chunks_here > 1 or all(p.restarts == 0 for p in progress):  # a first chunk after a restart may warm up
            rate_steps, rate_s = rate_steps + steps_done, rate_s + seconds
        rate = rate_steps / rate_s if rate_s > 0 else float("nan")
        left = int(sum(max(budgets[i] - updates[i], 0) for i in live())) * cfg.steps_per_update
        eta = left / rate if rate > 0 else float("nan")
        eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if math.isfinite(eta) else "?"
        say(f"[{name}] {len(live())} runs | update {int(min(updates[live()], default=0))}/{int(budgets.max())} | "
            f"{rate:,.0f} steps/s | ETA {eta_text}")
        why = None
        if stop.signal is not None:
            why = f"signal {stop.signal}"
        elif stop_after_chunks is not None and chunks_here >= stop_after_chunks:
            why = f"stop after {chunks_here} chunks"
        elif stop_at is not None and time.time() + 2 * longest_chunk >= stop_at:
            why = f"{stop_at - time.time():.0f} s left before the stop time, less than two chunks"
        pending = [i for i in live() if updates[i] < budgets[i]]
        if pending and (why or time.monotonic() - last_save >= cfg.checkpoint_every_s):
            for i in pending:
                _save(members[i], progress[i], _slice(state, i))
            last_save = time.monotonic()
            if why:
                return state, why
    return state, None


def evaluate_final(members, compiled, state, progress):
    """Each live member's final policy on fresh layouts, with exploration noise and greedily."""
    import jax.numpy as jnp
    import numpy as np

    from algos.programs import stacked_hyper

    configs = padded_configs(members)
    seeds = jnp.asarray([c.seed for c in configs], jnp.int32)
    h = stacked_hyper(configs)
    results = {}
    for phase, scale in (("final_explore", 1.0), ("final_greedy", 0.0)):
        pending, _ = compiled.evaluate(state.params, state.normalizer, seeds, jnp.float32(scale), h)
        results[phase] = {k: np.asarray(getattr(pending, k)) for k in ("done", "ret", "cost", "length")}
    out = []
    for i, (m, p) in enumerate(zip(members, progress)):
        member = {phase: {k: v[i] for k, v in r.items()} for phase, r in results.items()}
        for phase, r in member.items():
            if p.failed is None and not r["done"].all():
                p.failed = f"{_member_name(m)}: {phase}: some evaluation episodes did not end within T steps"
        out.append(member)
    return out


def write_run_folder(m: Member, p: Progress, final: dict, timing: dict, pack_size: int) -> None:
    """episodes.parquet and trace.parquet, then run.json (which records their row counts)."""
    import jax
    import numpy as np

    from algos import runfolder
    from algos.core import METRIC_NAMES
    from algos.registry import get as get_algorithm
    from metrics import episode_table, run_layout

    config = m.config
    algorithm = get_algorithm(config.algo)
    arrays = p.host.arrays()
    N, S = config.num_envs, config.unrolls_per_update * config.unroll_length
    J = len(arrays["update"])
    iterations = np.arange(J)
    meta_run = (config.task, config.bound, config.algo, config.seed)
    blocks = [episode_table.episode_rows(*meta_run, "train", iterations, arrays["ret"], arrays["cost"],
                                         arrays["length"])]
    for phase, r in final.items():
        blocks.append(episode_table.episode_rows(*meta_run, phase, [max(J - 1, 0)], r["ret"][None],
                                                 r["cost"][None], r["length"][None]))
    steps = arrays["update"].astype(np.int64) * S + arrays["step"] + 1
    trace = {
        "iteration": iterations, "update": arrays["update"].astype(np.int64), "env_steps": steps * N,
        "wall_time": arrays["wall_time"],
        "multiplier": (arrays["multiplier"].astype(np.float64) if algorithm.has_multiplier
                       else np.full(J, np.nan)),
        **{name: arrays["metrics"][:, i].astype(np.float64) for i, name in enumerate(METRIC_NAMES)},
        "mean_return": arrays["ret"].mean(axis=1).astype(np.float64) if J else np.zeros(0),
        "mean_cost": arrays["cost"].mean(axis=1).astype(np.float64) if J else np.zeros(0),
        # the algorithm's own state at the same points (its registry entry's state_columns)
        **{name: arrays["state"][:, i].astype(np.float64) for i, name in enumerate(algorithm.state_columns)},
    }
    episodes = episode_table.episodes_table(blocks)
    trace = runfolder.trace_table(trace, algorithm.state_columns)
    files = {}
    for name, table in ((run_layout.EPISODES, episodes), (run_layout.TRACE, trace)):
        runfolder.write_parquet(os.path.join(m.out, name), table)
        files[name] = runfolder.file_record(os.path.join(m.out, name), table.num_rows)
    env_steps = config.num_updates * config.steps_per_update
    device = jax.devices()[0]
    runfolder.write_json(os.path.join(m.out, run_layout.RUN_JSON), {
        "config": config.to_dict(), "preset": m.preset, "complete": True,
        "files": files, "code_version": p.code_versions[-1], "code_versions": p.code_versions,
        "env_steps": env_steps, "iterates": J, "updates": config.num_updates,
        # the pack's wall times: its members trained together, so a run's share is 1 / pack_size
        "pack_size": pack_size, "train_wall_s": p.train_s, **timing, "restarts": p.restarts,
        "steps_per_s": env_steps / p.train_s if p.train_s > 0 else None,
        "final": {phase: {"mean_return": float(np.mean(r["ret"])), "mean_cost": float(np.mean(r["cost"]))}
                  for phase, r in final.items()},
        "device": {"platform": device.platform, "kind": device.device_kind, "count": jax.device_count(),
                   "host": platform.node(), "cpus": os.cpu_count()},
        "versions": _versions(),
    })
    shutil.rmtree(os.path.join(m.out, run_layout.CHECKPOINT_DIR), ignore_errors=True)


def _versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for package in ("jax", "jaxlib", "optax", "numpy", "saferl-eval"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = None
    return out


def train_pack(members, *, env=None, stop, say, stop_after_chunks=None, stop_at=None):
    """Train (or resume) every member; returns (why, failures): why is None when training
    finished (every member without a failure has its run folder), else why it stopped early
    (checkpoints written); failures maps a member's folder to its error."""
    from algos.programs import compile_programs, pack_slots

    check_same_program(members)
    wall_start = time.perf_counter()
    compiled = compile_programs(members[0].config, env, size=pack_slots(len(members)))
    if stop.signal is not None:
        return f"signal {stop.signal} while compiling", {}
    failures = {}
    state, progress = _start(members, compiled, say)
    state, why = train_chunks(members, compiled, state, progress, say=say, stop=stop,
                              stop_after_chunks=stop_after_chunks, stop_at=stop_at)
    if why is not None:
        return why, failures | {m.out: p.failed for m, p in zip(members, progress) if p.failed}
    if all(p.failed for p in progress):
        return None, failures | {m.out: p.failed for m, p in zip(members, progress)}
    eval_start = time.perf_counter()
    finals = evaluate_final(members, compiled, state, progress)
    timing = {"eval_wall_s": time.perf_counter() - eval_start, "compile_s": compiled.compile_s,
              "process_wall_s": time.perf_counter() - wall_start}
    for m, p, final in zip(members, progress, finals):
        if p.failed is None:
            write_run_folder(m, p, final, timing, len(members))
            J = len(p.host.arrays()["update"])
            say(f"[{_member_name(m)}] done: {J} iterates, {m.config.num_updates * m.config.steps_per_update:,} "
                f"steps in {p.train_s:.1f} s train (pack of {len(members)}; +{compiled.compile_s:.1f} s compile, "
                f"{timing['eval_wall_s']:.1f} s eval) -> {m.out}")
        else:
            failures[m.out] = p.failed
    return None, failures

