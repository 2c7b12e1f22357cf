"""The training loop of a pack of runs of one program: start or resume each member from its
checkpoint, train in chunks, checkpoint each member between chunks, evaluate the final policies.

Every member is a run of its own: its seed stream and checkpoints are those of a run trained
alone, so a member resumes alone or in another pack. A member whose training diverges is
dropped from the pack; the others go on. The loop returns what the job (runs.train) needs to
write the run folders and failure records: it sets no signal handlers, takes no locks and
writes nothing but checkpoints.
"""
from __future__ import annotations

import json
import math
import os
import time
from typing import Callable, NamedTuple

import numpy as np

from algos.config import stacked_hyper
from algos.programs import code_version, compile_programs, pack_slots, resolve_mode
from algos.registry import get as get_algorithm
from algos.trace_schema import DEVICE_FIELDS, HOST_FIELDS, empty_field
from metrics.atomic import write_text
from runs import checkpoint
from runs.curves import PackCurves
from runs.run_layout import CHECKPOINT_DIR, PROGRESS, config_run_id
from runs.runfolder import duration_text

# JAX is imported inside the functions that use it: `import jax, jax.numpy` takes 1.0 s
# (python -X importtime, 2 busy cores), which every importer that never trains would pay:
# workflow.train_job (the sweep's job wrapper, for runs.train.record_failure) and
# `python -m runs.train --help` or a refused option. The imports above add only
# runs.checkpoint (2.5 ms) to runs.train's import: it imports algos.config and algos.programs
# itself, and numpy comes with algos.trace_schema.


class Member(NamedTuple):
    config: object  # TrainConfig
    out: str  # run folder
    preset: str = ""


class HostLog:
    """One member's per-iterate results copied off the device after each chunk, as lists of
    arrays (the fields of algos.trace_schema.HOST_FIELDS)."""

    def __init__(self, num_envs: int, arrays: dict | None = None, num_state: int = 0):
        self.empty = {k: empty_field(k, num_envs, num_state) for k in HOST_FIELDS}
        if arrays is not None and "state" not in arrays:  # a checkpoint of a version without state columns
            arrays = {**arrays, "state": np.zeros((len(arrays["update"]), num_state), np.float32)}
        self.parts = {k: ([arrays[k]] if arrays is not None else []) for k in HOST_FIELDS}
        self.count = len(arrays["update"]) if arrays is not None else 0  # iterates logged so far

    def append(self, log: dict, count: int, wall_time) -> None:
        for k in DEVICE_FIELDS:
            self.parts[k].append(np.asarray(log[k][:count]))
        self.parts["wall_time"].append(wall_time)
        self.count += count

    def since(self, first: int) -> dict:
        """Iterates `first`.. as one array per field, copying only the newest parts that hold
        them (the curves read each chunk's rows so; the whole log is not compacted each chunk)."""
        k, start = len(self.parts["update"]), self.count
        while k > 0 and start > first:
            k -= 1
            start -= len(self.parts["update"][k])
        return {f: np.concatenate(v[k:])[max(first - start, 0):] if v[k:] else self.empty[f]
                for f, v in self.parts.items()}

    def arrays(self) -> dict:
        """The log so far as one array per field (and compacted to that)."""
        out = {k: np.concatenate(v) if v else self.empty[k] for k, v in self.parts.items()}
        self.parts = {k: [out[k]] for k in HOST_FIELDS}
        return out


class Progress:
    """A member's place in training: its host log, train time, restarts, kept checkpoint slot,
    and every code version that has trained it so far (a resume may cross a code change)."""

    def __init__(self, host: HostLog, train_s: float = 0.0, restarts: int = 0, keep: str | None = None,
                 code_versions: tuple = ()):
        self.host, self.train_s, self.restarts, self.keep = host, train_s, restarts, keep
        now = code_version()
        self.code_versions = [*code_versions] + ([now] if now not in code_versions else [])
        self.failed: str | None = None


def padded_configs(members, slots: int) -> list:
    """The configs the pack program runs: the members', then copies of the last up to the
    program's `slots` (padding: trained on nothing, its budget is 0; never written)."""
    configs = [m.config for m in members]
    return configs + [configs[-1]] * (slots - len(configs))


def _slice(tree, i):
    import jax

    return jax.tree_util.tree_map(lambda x: x[i], tree)


def _stack(trees):
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def pack_name(members) -> str:
    first = members[0].config
    return config_run_id(first) + (f" +{len(members) - 1}" if len(members) > 1 else "")


def check_same_program(members, mode: str) -> None:
    """A pack's runs share one program: one static config, the algorithm aside where a
    sequential program takes it as a runtime value (algos.programs)."""
    keys = {m.config.static_key(shared=mode == "sequential") for m in members}
    if len(keys) > 1:
        raise ValueError("a pack's runs must share one static config (task, algorithm, shapes, schedule); "
                         f"these differ: {sorted(m.out for m in members)}")


def _start(members, compiled, configs, h, say) -> tuple[object, list[Progress]]:
    """The batched initial state, each member's newest usable checkpoint swapped in."""
    import jax
    import jax.numpy as jnp

    fresh = compiled.init(jnp.asarray([c.seed for c in configs], jnp.int32), h)
    states, progress = [], []
    for i, m in enumerate(members):
        ckpt = os.path.join(m.out, CHECKPOINT_DIR)
        n_state = len(get_algorithm(m.config.algo).state_columns)
        host = HostLog(m.config.num_envs, num_state=n_state)
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
        progress.append(Progress(HostLog(m.config.num_envs, {k: arrays[k] for k in HOST_FIELDS if k in arrays},
                                         n_state),
                                 float(meta["train_s"]), int(meta["restarts"]) + 1, meta["arrays"],
                                 tuple(meta.get("code_versions") or ["unknown (checkpoint predates the record)"])))
        if len(progress[-1].code_versions) > 1:
            say(f"[{name}] warning: resumed under changed code: it was trained by code "
                f"{', '.join(progress[-1].code_versions[:-1])}, now {progress[-1].code_versions[-1]}; run.json "
                "records every version and `workflow.status --outdated` lists the run")
    return _stack(states + states[-1:] * (len(configs) - len(states))), progress


def member_name(m: Member) -> str:
    return config_run_id(m.config)


def _save(m: Member, p: Progress, state) -> None:
    """The member's checkpoint from its slice of the pack's state (on the host)."""
    meta = {"config": checkpoint.identity_of(m.config), "train_s": p.train_s, "restarts": p.restarts,
            "code_versions": p.code_versions}
    p.keep = checkpoint.save(os.path.join(m.out, CHECKPOINT_DIR), state, p.host.arrays(), meta, keep=p.keep)["arrays"]


PROGRESS_EVERY_S = 20.0  # a sequential pack ends a call about this often, to report progress


def _updates_per_call(mode: str, chunk_updates: int, seconds_per_update: float | None) -> int:
    """Updates the next chunk call may run. A batched pack runs whole chunks (a member past its
    budget still computes with its pack-mates, so a shorter call would waste work). A
    sequential pack skips the updates past its call's limit at no cost, so it ends a call
    every PROGRESS_EVERY_S to report progress: the first call runs one update to time it. Where
    calls end does not change any result (the state carries over whole)."""
    if mode == "batched":
        return chunk_updates
    if seconds_per_update is None:
        return 1
    return max(1, min(chunk_updates, int(PROGRESS_EVERY_S / max(seconds_per_update, 1e-9))))


def train_chunks(members, compiled, configs, h, state, progress, *, say, stop, stop_after_chunks=None,
                 stop_at=None, curves=None):
    """Run chunks until every live member has spent its budget, or a stop is asked for.
    `configs`, `h`: the program's slots' configs (padded_configs) and their stacked runtime values.

    Returns (state, why): why is None when done, else the reason for stopping after every
    live member's checkpoint was written (`stop()`'s, `stop_after_chunks`, the `stop_at` deadline).
    After each chunk call it prints a progress line, writes each member's progress.json and
    gives `curves` (runs.curves.PackCurves, or None) the members' new iterates.
    """
    import jax
    import jax.numpy as jnp

    budgets = np.asarray([m.config.num_updates for m in members] + [0] * (len(configs) - len(members)))
    cfg = configs[0]
    S, C = cfg.rollout_steps, cfg.iterate_capacity
    last_save, calls_here, longest_call = time.monotonic(), 0, 0.0
    rate_steps, rate_s, seconds_per_update = 0, 0.0, None
    name = pack_name(members)

    def live():
        return [i for i, p in enumerate(progress) if p.failed is None]

    updates = np.asarray(state.update)
    while any(updates[i] < budgets[i] for i in live()):
        before = updates
        per_call = _updates_per_call(compiled.mode, cfg.chunk_updates, seconds_per_update)
        limit = jnp.asarray(np.minimum(budgets, before + per_call), jnp.int32)
        start = time.perf_counter()
        state, log, summary = compiled.chunk(state, h, limit)
        counts = np.asarray(log.count)  # waits for the chunk
        seconds = time.perf_counter() - start
        updates = np.asarray(state.update)
        log_host = {k: np.asarray(getattr(log, k)) for k in DEVICE_FIELDS}
        ok = np.isfinite(np.asarray(summary.multiplier)) & np.isfinite(np.asarray(summary.mean_step_cost))
        for i in live():
            m, p, count = members[i], progress[i], int(counts[i])
            if before[i] >= budgets[i]:  # done earlier; waits (or, batched, computes unused) for its pack-mates
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
        if curves is not None:
            curves.update(progress)
        calls_here += 1
        longest_call = max(longest_call, seconds)
        pack_updates = int(sum(updates[i] - before[i] for i in live()))
        most_updates = int(max((updates[i] - before[i] for i in live()), default=0))
        if most_updates:
            seconds_per_update = seconds / most_updates
        if calls_here > 1 or all(p.restarts == 0 for p in progress):  # a first call after a restart may warm up
            rate_steps, rate_s = rate_steps + pack_updates * cfg.steps_per_update, rate_s + seconds
        rate = rate_steps / rate_s if rate_s > 0 else float("nan")
        left = int(sum(max(budgets[i] - updates[i], 0) for i in live())) * cfg.steps_per_update
        total = int(sum(budgets[i] for i in live())) * cfg.steps_per_update
        eta = left / rate if rate > 0 else float("nan")
        say(f"[{name}] {len(live())} runs | update {int(min(updates[live()], default=0))}/{int(budgets.max())} | "
            f"{(total - left) / 1e6:,.2f}M/{total / 1e6:,.2f}M steps | {rate:,.0f} steps/s | ETA {duration_text(eta)}")
        for i in live():
            write_progress(members[i].out, int(updates[i]), int(budgets[i]), rate / max(len(live()), 1), eta)
        why = stop()
        if why is None and stop_after_chunks is not None and calls_here >= stop_after_chunks:
            why = f"stop after {calls_here} chunks"
        if why is None and stop_at is not None and time.time() + 2 * longest_call >= stop_at:
            why = f"{stop_at - time.time():.0f} s left before the stop time, less than two chunks"
        pending = [i for i in live() if updates[i] < budgets[i]]
        if pending and (why or time.monotonic() - last_save >= cfg.checkpoint_every_s):
            host_state = jax.device_get(state)  # the whole pack in one transfer, sliced on the host
            for i in pending:
                _save(members[i], progress[i], _slice(host_state, i))
            last_save = time.monotonic()
            if why:
                return state, why
    return state, None


def write_progress(out: str, update: int, updates: int, steps_per_s: float, eta_s: float) -> None:
    """The run's progress.json (read by workflow.status while the run trains; removed with the
    checkpoint once the run folder is complete)."""
    finite = (lambda x: float(x) if math.isfinite(x) else None)
    write_text(os.path.join(out, PROGRESS), json.dumps(
        {"update": update, "updates": updates, "fraction": update / max(updates, 1),
         "steps_per_s": finite(steps_per_s), "eta_s": finite(eta_s), "time": time.time()}))


def evaluate_final(members, compiled, configs, h, state, progress):
    """Each live member's final policy on fresh layouts, with exploration noise and greedily."""
    import jax.numpy as jnp

    seeds = jnp.asarray([c.seed for c in configs], jnp.int32)
    results = {}
    for phase, scale in (("final_explore", 1.0), ("final_greedy", 0.0)):
        pending, _ = compiled.evaluate(state, seeds, jnp.float32(scale), h)
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
    timing: dict  # the pack's eval_wall_s, compile_s, process_wall_s, and how it ran: pack_mode, program_slots,
    # program_source ("compiled", or "loaded" from the compiled-program cache)


def train_pack(members, *, env=None, stop: Callable[[], str | None], say, stop_after_chunks=None,
               stop_at=None, planned: int = 0, tensorboard: bool = True) -> Outcome:
    """Train (or resume) every member, then evaluate those that finished. `stop()` says why to
    stop now (checkpoint and return), or None; it is asked after compiling and after each chunk.
    `planned`: the size of the pack these members belong to (a batched program holds it whole,
    so that a member's results do not depend on how many of its pack-mates still train).
    `tensorboard`: write each member's curves into its folder as it trains (runs.curves)."""
    wall_start = time.perf_counter()
    mode = resolve_mode(members[0].config.pack_mode)
    check_same_program(members, mode)
    slots = pack_slots(len(members), mode, planned)
    # these two lines are the phases the sweep's console shows (workflow.console)
    say(f"[{pack_name(members)}] compiling: {len(members)} runs, a {mode} program of {slots} slots")
    compiled = compile_programs(members[0].config, env, size=slots, mode=mode)
    why = stop()
    if why is not None:
        return Outcome(f"{why} while compiling", {}, [], {})
    configs = padded_configs(members, slots)  # the program's slots, computed once
    h = stacked_hyper(configs)
    state, progress = _start(members, compiled, configs, h, say)
    say(f"[{pack_name(members)}] training: programs {compiled.source} in {compiled.compile_s:.1f} s")
    curves = PackCurves(members, progress) if tensorboard else None
    state, why = train_chunks(members, compiled, configs, h, state, progress, say=say, stop=stop,
                              stop_after_chunks=stop_after_chunks, stop_at=stop_at, curves=curves)
    failed = {m.out: p.failed for m, p in zip(members, progress) if p.failed}
    if why is not None or len(failed) == len(members):
        if curves is not None:
            curves.close()
        return Outcome(why, failed, [], {})
    eval_start = time.perf_counter()
    finals = evaluate_final(members, compiled, configs, h, state, progress)
    timing = {"eval_wall_s": time.perf_counter() - eval_start, "compile_s": compiled.compile_s,
              "process_wall_s": time.perf_counter() - wall_start, "pack_mode": mode, "program_slots": slots,
              "program_source": compiled.source}
    finished = [Finished(m, p, final) for m, p, final in zip(members, progress, finals) if p.failed is None]
    if curves is not None:
        curves.finish(finished)
    return Outcome(None, {m.out: p.failed for m, p in zip(members, progress) if p.failed}, finished, timing)
