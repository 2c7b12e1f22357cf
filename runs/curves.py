"""Training curves where researchers already look: TensorBoard event files in each run folder,
written while the run trains, and (when a sweep asks for it) a W&B run per run (runs.wandb_runs).

Every value comes from the host log the pack loop already copies off the device after each
chunk (runs.pack.HostLog; its fields and the trace's columns: algos.trace_schema), so the
curves cost no device round trip. The step of every point is the iterate's index, as in
trace.parquet's `iteration` and episodes.parquet's train rows.

A run folder's curve is always what its host log holds: opening a run (fresh, resumed from its
checkpoint, or retrained) replaces the event files an earlier attempt left, which may hold
iterates past the checkpoint (work lost to a kill), with the host log's iterates so far; each
chunk then appends its new ones. So a resumed curve has no gap and no duplicate for any reader.
A chunk's iterates are written in one go, in the training loop's thread: one event per
iterate with all its values, flushed once (a writer thread and an event per value cost several
times more CPU on a 2-core node; docs/cluster.md gives the measured cost).
`tensorboard --logdir <sweep folder>` names each run by its folder: runs/{task}/d{bound}/{algo}/seed{seed}.
"""
from __future__ import annotations

import glob
import itertools
import os
import socket
import struct
import time

import numpy as np

from algos.trace_schema import trace_columns

EVENTS_GLOB = "events.out.tfevents.*"  # the event files' names (TensorBoard's own pattern)
# trace columns that are not curves of their own: the step, its position, or given as train/ tags
_NOT_CURVES = ("iteration", "update", "env_steps", "wall_time", "multiplier", "mean_return", "mean_cost")
_writers = itertools.count()  # distinct event file names for writers opened in the same second


def iterate_scalars(arrays: dict, config, algorithm) -> dict[str, np.ndarray]:
    """Tag -> one value per logged iterate, from a run's host log (HostLog.arrays()).

    train/return, train/cost, train/length: means over the iterate's training episodes (one per
    env); train/V: the share of them with cost above the bound (strictly, as metrics.summary);
    train/multiplier (algorithms with one), state/<column> (the algorithm's state columns),
    loss/<name> (the update's logged losses, whatever algos.trace_schema logs), train/steps_per_s
    (env steps per second of training since the previous iterate)."""
    cols = trace_columns(arrays, config.rollout_steps, config.num_envs,
                         algorithm.has_multiplier, algorithm.state_columns)
    J = len(cols["iteration"])
    steps, wall = cols["env_steps"].astype(np.float64), cols["wall_time"]
    d_steps = np.diff(steps, prepend=0.0)
    d_wall = np.diff(wall, prepend=0.0)
    out = {
        "train/return": cols["mean_return"],
        "train/cost": cols["mean_cost"],
        "train/length": arrays["length"].mean(axis=1).astype(np.float64) if J else np.zeros(0),
        "train/V": (arrays["cost"].astype(np.float64) > float(config.bound)).mean(axis=1) if J else np.zeros(0),
        "train/steps_per_s": np.divide(d_steps, d_wall, out=np.full(J, np.nan), where=d_wall > 0),
    }
    if algorithm.has_multiplier:
        out["train/multiplier"] = cols["multiplier"]
    for name in algorithm.state_columns:
        out[f"state/{name}"] = cols[name]
    for name in cols:
        if name not in _NOT_CURVES and name not in algorithm.state_columns:
            out[f"loss/{name}"] = cols[name]
    return out


def final_scalars(final: dict, bound: float) -> dict[str, float]:
    """`<phase>/return`, `/cost`, `/V` of each final phase (final_explore: with exploration
    noise, final_greedy: greedy) from runs.pack.evaluate_final's episodes of one run."""
    out = {}
    for phase, r in final.items():
        cost = np.asarray(r["cost"], np.float64)
        out[f"{phase}/return"] = float(np.mean(r["ret"], dtype=np.float64))
        out[f"{phase}/cost"] = float(cost.mean())
        out[f"{phase}/V"] = float(np.mean(cost > float(bound)))
    return out


def event_files(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(glob.escape(folder), EVENTS_GLOB)))


class EventFile:
    """One TensorBoard event file, written by this process as the run trains: each call of
    `write` is a chunk's iterates, one event per step holding all its values, and reaches the
    file at once (no writer thread, no queue). Records are TensorBoard's (TFRecord framing with
    tensorboardX's checksum; crc32c, when installed, makes that checksum native)."""

    def __init__(self, folder: str):
        from tensorboardX.proto.event_pb2 import Event  # imported only when curves are written
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.record_writer import masked_crc32c

        self._event, self._summary, self._crc = Event, Summary, masked_crc32c
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}"
                                         f".{os.getpid()}.{next(_writers):06d}")
        self._file = open(self.path, "ab")
        self._record(Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

    def _record(self, event) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._file.write(header + struct.pack("<I", self._crc(header)) + data + struct.pack("<I", self._crc(data)))

    def write(self, first_step: int, scalars: dict[str, np.ndarray]) -> None:
        """Steps first_step.. with each tag's values (the tags' arrays are as long as the steps);
        a non-finite value is left out of its step."""
        tags = list(scalars)
        values = np.stack([np.asarray(scalars[t], np.float64) for t in tags], axis=1) if tags else np.zeros((0, 0))
        finite = np.isfinite(values)
        now, Value = time.time(), self._summary.Value
        for row, (vals, ok) in enumerate(zip(values.tolist(), finite.tolist())):
            summary = self._summary(value=[Value(tag=t, simple_value=v) for t, v, k in zip(tags, vals, ok) if k])
            self._record(self._event(wall_time=now, step=first_step + row, summary=summary))
        self.flush()

    def flush(self, durable: bool = False) -> None:
        """To the operating system, where TensorBoard reads it; `durable`: to the disk too (an
        fsync, which costs ms of wall time: at the end, not after each chunk)."""
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self.flush(durable=True)
        self._file.close()


class RunEvents:
    """One run's event file: the run's host log so far (replacing the event files of earlier
    attempts once it is on disk), then each chunk's new iterates."""

    def __init__(self, out: str, config, algorithm, host):
        self.config, self.algorithm = config, algorithm
        self.written = 0
        earlier = event_files(out)
        self.file = EventFile(out)
        self.extend(host)
        if earlier:  # only once the host log is on disk may the earlier files go
            self.file.flush(durable=True)
            for path in earlier:  # a crash before this leaves duplicates for a moment, never a gap
                os.remove(path)

    def extend(self, host) -> None:
        """Write the iterates of `host` (the run's runs.pack.HostLog) not written yet. Reads the
        new rows and the one before them (train/steps_per_s is a difference from it)."""
        if host.count > self.written:
            before = min(self.written, 1)
            scalars = iterate_scalars(host.since(self.written - before), self.config, self.algorithm)
            self.file.write(self.written, {tag: v[before:] for tag, v in scalars.items()})
            self.written = host.count

    def finish(self, final: dict) -> None:
        """The final phases' scalars at the last iterate (their episodes' iteration), then close."""
        scalars = final_scalars(final, self.config.bound)
        self.file.write(max(self.written - 1, 0), {tag: np.asarray([v]) for tag, v in scalars.items()})
        self.close()

    def close(self) -> None:
        self.file.close()


class PackCurves:
    """The event files of a pack's members: runs.pack.train_pack opens it once the members have
    started (fresh or from their checkpoints), updates it after each chunk, and finishes it with
    the final evaluation (or closes it when training stops early)."""

    def __init__(self, members, progress):
        from algos.registry import get as get_algorithm

        self.events = {m.out: RunEvents(m.out, m.config, get_algorithm(m.config.algo), p.host)
                       for m, p in zip(members, progress) if p.failed is None}
        self.members = members

    def update(self, progress) -> None:
        """After a chunk: each live member's new iterates (a failed member's curve ends where it failed)."""
        for m, p in zip(self.members, progress):
            if m.out in self.events:
                if p.failed is None:
                    self.events[m.out].extend(p.host)
                else:
                    self.events.pop(m.out).close()

    def finish(self, finished) -> None:
        """Each finished member's final phases (runs.pack.Finished), then every file closed."""
        for f in finished:
            if f.member.out in self.events:
                self.events.pop(f.member.out).finish(f.final)
        self.close()

    def close(self) -> None:
        for events in self.events.values():
            events.close()
        self.events = {}
