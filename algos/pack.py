"""The training loop of a pack of runs of one program: start or resume each member from its
checkpoint, train in chunks, checkpoint each member between chunks, evaluate the final policies.

Every member is a run of its own: its seed stream and checkpoints are those of a run trained
alone, so a member resumes alone or in another pack. A member whose training diverges is
dropped from the pack; the others go on. The loop returns what the job (algos.train) needs to
write the run folders and failure records: it sets no signal handlers, takes no locks and
writes nothing but checkpoints.
"""
from __future__ import annotations

import math
import os
import time
from typing import Callable, NamedTuple

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
    from algos.config import stacked_hyper
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
        name = member_name(m)
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


def member_name(m: Member) -> str:
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
    live member's checkpoint was written (`stop()`'s, `stop_after_chunks`, the `stop_at` deadline).
    """
    import jax.numpy as jnp
    import numpy as np

    from algos.config import stacked_hyper

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
                p.failed = (f"{member_name(m)}: {count} iterates completed in one chunk but the log holds {C}; "
                            f"episodes end early in this task: raise --set log_capacity=")
            elif not ok[i].all():
                p.failed = (f"{member_name(m)}: training diverged (NaN/inf multiplier or cost) at update "
                            f"{int(before[i]) + int(np.argmin(ok[i]))}; no outputs written")
            if p.failed:
                say(f"[{member_name(m)}] failed: {p.failed}")
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
        why = stop()
        if why is None and stop_after_chunks is not None and chunks_here >= stop_after_chunks:
            why = f"stop after {chunks_here} chunks"
        if why is None and stop_at is not None and time.time() + 2 * longest_chunk >= stop_at:
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

    from algos.config import stacked_hyper

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
                p.failed = f"{member_name(m)}: {phase}: some evaluation episodes did not end within T steps"
        out.append(member)
    return out


class Finished(NamedTuple):
    """A member whose training and final evaluation succeeded: what its run folder is made of."""

    member: Member
    progress: Progress
    final: dict  # phase -> {"done", "ret", "cost", "length"} of its final evaluation episodes


class Outcome(NamedTuple):
    stopped: str | None  # why training stopped early (every live member's checkpoint written); None when done
    failures: dict  # run folder -> error, for the members that failed
    finished: list  # Finished, in member order
    timing: dict  # the pack's eval_wall_s, compile_s and process_wall_s


def train_pack(members, *, env=None, stop: Callable[[], str | None], say, stop_after_chunks=None,
               stop_at=None) -> Outcome:
    """Train (or resume) every member, then evaluate those that finished. `stop()` says why to
    stop now (checkpoint and return), or None; it is asked after compiling and after each chunk."""
    from algos.programs import compile_programs, pack_slots

    check_same_program(members)
    wall_start = time.perf_counter()
    compiled = compile_programs(members[0].config, env, size=pack_slots(len(members)))
    why = stop()
    if why is not None:
        return Outcome(f"{why} while compiling", {}, [], {})
    state, progress = _start(members, compiled, say)
    state, why = train_chunks(members, compiled, state, progress, say=say, stop=stop,
                              stop_after_chunks=stop_after_chunks, stop_at=stop_at)
    failed = {m.out: p.failed for m, p in zip(members, progress) if p.failed}
    if why is not None or len(failed) == len(members):
        return Outcome(why, failed, [], {})
    eval_start = time.perf_counter()
    finals = evaluate_final(members, compiled, state, progress)
    timing = {"eval_wall_s": time.perf_counter() - eval_start, "compile_s": compiled.compile_s,
              "process_wall_s": time.perf_counter() - wall_start}
    finished = [Finished(m, p, final) for m, p, final in zip(members, progress, finals) if p.failed is None]
    return Outcome(None, {m.out: p.failed for m, p in zip(members, progress) if p.failed}, finished, timing)
