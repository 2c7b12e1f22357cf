"""The controller's console while packs train: a line when a pack starts compiling and when it
starts training, then one at least every HEARTBEAT_S per running pack (its runs, update, env
steps/s, ETA), whatever the load. The full output of each pack stays in its log,
<results>/logs/train/<pack>.log.

The trainer writes its phases and progress to that log (runs.pack); a thread of the controller
(`watch`, started by the Snakefile's onstart) follows the logs of the training jobs Snakemake
runs (it learns them from Snakemake's job events) and relays them. Between the trainer's own
lines (a long chunk, a long compile, a job queued on a cluster) it says what the pack is doing
and for how long. Local and cluster jobs alike: it reads only the logs, on the shared folder.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field

HEARTBEAT_S = 25.0  # a running pack is heard from at least this often (the issue asks for 30 s)
PROGRESS_EVERY_S = 10.0  # the trainer's progress lines are relayed at most this often per pack
POLL_S = 1.0

_COMPILING = re.compile(r"^\[[^\]]+\] compiling: (?P<what>.*)$")
_TRAINING = re.compile(r"^\[[^\]]+\] training: (?P<what>.*)$")
_PROGRESS = re.compile(r"^\[[^\]]+\] (?P<what>\d+ runs \| update .*)$")
_STOPPED = re.compile(r"^\[runs\.train\] (?P<what>.*checkpoints written, exiting \d+)$")
_FAILED = re.compile(r"^\[(?P<run>[^\]]+)\] failed: (?P<what>.*)$")


@dataclass
class Pack:
    """What the console knows of one running training job."""

    rule: str
    log: str
    offset: int  # where this job's lines begin: the log's size when the job started, or 0 in a new log
    inode: int | None  # the log file's when the job started (Snakemake then replaces it: a new log)
    started: float
    phase: str = "starting"
    phase_since: float = 0.0
    progress: str = ""
    progress_at: float = 0.0
    said_at: float = 0.0
    said_progress_at: float = -1e9
    partial: str = field(default="", repr=False)


def lines_to_say(pack: Pack, lines: list[str], now: float) -> list[str]:
    """The console lines for the new log lines of `pack` (and its state updated)."""
    said = []
    for line in lines:
        if m := _COMPILING.match(line):
            pack.phase, pack.phase_since = "compiling", now
            said.append(f"{pack.rule}: compiling ({m['what']})")
        elif m := _TRAINING.match(line):
            pack.phase, pack.phase_since = "training", now
            said.append(f"{pack.rule}: training ({m['what']})")
        elif m := _PROGRESS.match(line):
            pack.progress, pack.progress_at = m["what"], now
            if now - pack.said_progress_at >= PROGRESS_EVERY_S:
                pack.said_progress_at = now
                said.append(f"{pack.rule}: {m['what']}")
        elif m := _STOPPED.match(line):
            pack.phase, pack.phase_since = "stopped", now
            said.append(f"{pack.rule}: {m['what']}")
        elif m := _FAILED.match(line):
            said.append(f"{pack.rule}: {m['run']} failed: {m['what']}")
    if said:
        pack.said_at = now
    return said


def heartbeat(pack: Pack, now: float) -> str | None:
    """A line for a pack not heard from in HEARTBEAT_S, else None."""
    if now - pack.said_at < HEARTBEAT_S:
        return None
    pack.said_at = now
    if pack.phase == "training" and pack.progress:
        return f"{pack.rule}: {pack.progress} (as of {now - pack.progress_at:.0f} s ago)"
    if pack.phase in ("compiling", "training"):
        return f"{pack.rule}: {pack.phase} for {now - pack.phase_since:.0f} s"
    return f"{pack.rule}: started {now - pack.started:.0f} s ago, no output yet (queued, or starting Python)"


def _read_new(pack: Pack) -> list[str]:
    try:
        with open(pack.log, "rb") as f:
            st = os.fstat(f.fileno())
            # Snakemake deletes a job's old log before the job runs: a new file (or, its inode
            # reused, one shorter than where the old ended) is read from its start
            if st.st_ino != pack.inode or st.st_size < pack.offset:
                pack.inode, pack.offset, pack.partial = st.st_ino, 0, ""
            f.seek(pack.offset)
            data = f.read()
    except OSError:
        return []
    pack.offset += len(data)
    text = pack.partial + data.decode("utf-8", "replace")
    *lines, pack.partial = text.split("\n")
    return lines


class Watcher(logging.Filter):
    """Follows Snakemake's job events (a filter on its logger that drops nothing) and, in its
    thread, the logs of the running training jobs."""

    def __init__(self, log_of, say, rule_prefix: str = "train_"):
        super().__init__()
        self.log_of, self.say, self.rule_prefix = log_of, say, rule_prefix
        self.packs: dict[int, Pack] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def filter(self, record: logging.LogRecord) -> bool:
        event = str(getattr(record, "event", "")).lower()
        rule = getattr(record, "rule_name", "") or ""
        if event.endswith("job_info") and rule.startswith(self.rule_prefix) and not getattr(record, "dryrun", False):
            log = self.log_of(rule)
            try:
                st = os.stat(log)
                offset, inode = st.st_size, st.st_ino
            except OSError:
                offset, inode = 0, None
            now = time.monotonic()
            with self.lock:
                self.packs[getattr(record, "jobid", rule)] = Pack(rule, log, offset, inode, now, phase_since=now,
                                                                  said_at=now)
        elif event.endswith("job_finished") or event.endswith("job_error"):
            with self.lock:
                self.packs.pop(getattr(record, "job_id", getattr(record, "jobid", None)), None)
        return True

    def poll(self, now: float) -> list[str]:
        with self.lock:
            packs = list(self.packs.values())
        out = []
        for pack in packs:
            out += lines_to_say(pack, _read_new(pack), now)
            if (line := heartbeat(pack, now)) is not None:
                out.append(line)
        return out

    def run(self) -> None:
        while not self.stopped.wait(POLL_S):
            for line in self.poll(time.monotonic()):
                self.say(line)


def watch(logs_dir: str) -> Watcher:
    """Start following the training jobs' logs (<logs_dir>/train/<pack>.log) in a daemon thread."""
    logger = logging.getLogger("snakemake.logging")
    watcher = Watcher(lambda rule: os.path.join(logs_dir, "train", rule[len("train_"):] + ".log"), logger.info)
    logger.addFilter(watcher)
    threading.Thread(target=watcher.run, name="saferl-console", daemon=True).start()
    return watcher
