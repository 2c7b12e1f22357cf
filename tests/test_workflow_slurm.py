"""Integration test through a real SLURM cluster (cluster_profiles/slurm-local/up.sh) with
Snakemake's SLURM executor and the slurm-local profile:
- a tiny sweep in which one seed is made to fail completes the others and reports that seed
  failed (with its log); the rerun submits exactly that seed and completes the sweep;
- a training job cancelled mid-run (SIGTERM from scancel) is retried and resumes from its
  checkpoint instead of starting again from zero;
- the launcher submits the controller as a SLURM job;
- cluster faults, each ending with the sweep complete, every run trained once and the tables
  byte-equal to an undisturbed sweep's: sbatch failing for a minute and then 3 calls in 10;
  squeue and sacct down for a minute; a job SIGKILLed with its node and one OOM-killed; a job
  preempted and requeued; the controller killed at its time limit and launched again.
Skipped, with the reason, when no cluster answers."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from workflow import status
from workflow.config_validation import resolve

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
             "--workflow-profile", str(REPO / "cluster_profiles" / "slurm-local")]
SWEEP_TIMEOUT_S = 900


def cluster_problem() -> str | None:
    """Why no SLURM cluster can take jobs, or None when one can."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "no SLURM client (sbatch/sinfo) on PATH; start one with cluster_profiles/slurm-local/up.sh"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return f"sinfo failed ({e}); start a cluster with cluster_profiles/slurm-local/up.sh"
    if states.returncode != 0 or not re.search(r"^(idle|mix|alloc)", states.stdout, flags=re.M):
        return (f"no SLURM node is up (sinfo: {states.stdout.strip() or states.stderr.strip()}); "
                "start one with cluster_profiles/slurm-local/up.sh")
    return None


pytestmark = [pytest.mark.slurm, pytest.mark.skipif(cluster_problem() is not None,
                                                    reason=str(cluster_problem()))]


def snakemake(workdir: Path, *args: str, env_extra: dict | None = None, timeout=SWEEP_TIMEOUT_S):
    env = {k: v for k, v in os.environ.items() if k != "SAFERL_FAIL_RUNS"}
    env.update(env_extra or {})
    # SIGINT on timeout: Snakemake then cancels its SLURM jobs (slurm-notes.md).
    return subprocess.run(["timeout", "-s", "INT", str(timeout), *SNAKEMAKE, *args], cwd=workdir,
                          capture_output=True, text=True, env=env)


def submitted(log: str) -> list[str]:
    """Log paths of the SLURM jobs a Snakemake run submitted (one line per sbatch)."""
    return re.findall(r"has been submitted with SLURM jobid \d+ \(log: (.*?)\)", log)


def trained_runs(log: str) -> list[str]:
    """Run folders of the pack jobs a Snakemake run started (a run once per job it was in)."""
    outputs = re.findall(r"rule train_\w+:\n\s+output: (.*)\n", log)
    return [o.strip()[:-len("/run.json")] for line in outputs for o in line.split(",") if o.strip().endswith("/run.json")]


def test_tiny_sweep_with_a_failing_seed_then_a_rerun_of_exactly_that_seed(tmp_path):
    (tmp_path / "tiny.yaml").write_text("preset: tiny\n")
    bad = "circle/d25/ppo_lag/seed1"
    # target `metrics`: the products run in the controller and are tested with the local profile
    first = snakemake(tmp_path, "metrics", "--configfile", "tiny.yaml", env_extra={"SAFERL_FAIL_RUNS": bad})
    log1 = first.stdout + first.stderr
    assert first.returncode != 0, log1[-3000:]
    # one SLURM job per pack (4 runs each); the failing pack is retried once (profile), and its
    # retry trains its other runs again (Snakemake clears a job's outputs before a retry)
    attempts = Counter(trained_runs(log1))
    assert attempts == {f"results-tiny/runs/{r}": 2 if "/ppo_lag/" in r else 1
                        for r in status.run_ids(resolve({"preset": "tiny"}))}
    assert len(submitted(log1)) == 3
    assert re.search(rf"Error in rule train_circle_ppo_lag_p0:\n(?:\s+\w+: .*\n)*?\s+output: .*results-tiny/runs/{bad}/",
                     log1), log1[-3000:]

    cfg = resolve({"preset": "tiny"})
    states = {s.run: s for s in status.sweep_status(cfg, tmp_path, status.slurm_active_jobs())}
    assert states[bad].state == "failed"
    assert "fails on purpose" in Path(states[bad].log).read_text()
    done = {r for r, s in states.items() if s.state == "done"}
    assert done == set(states) - {bad}
    done_mtimes = {r: (tmp_path / "results-tiny/runs" / r / "run.json").stat().st_mtime_ns for r in done}

    second = snakemake(tmp_path, "metrics", "--configfile", "tiny.yaml")
    log2 = second.stdout + second.stderr
    assert second.returncode == 0, log2[-3000:]
    assert trained_runs(log2) == [f"results-tiny/runs/{bad}"]
    # that run's job and the aggregation: nothing else went to the scheduler
    jobs2 = submitted(log2)
    assert len(jobs2) == 2, jobs2
    assert sum("/rule_train_circle_ppo_lag_p0/" in p for p in jobs2) == 1
    assert sum("/rule_aggregate/" in p for p in jobs2) == 1
    assert {s.state for s in status.sweep_status(cfg, tmp_path)} == {"done"}
    assert {r: (tmp_path / "results-tiny/runs" / r / "run.json").stat().st_mtime_ns for r in done} == done_mtimes
    tiers = pd.read_csv(tmp_path / "results-tiny" / "metrics" / "tiers.csv")
    assert set(tiers["algo"]) == {"ppo", "ppo_lag"}


def test_a_job_cancelled_mid_run_resumes_from_its_checkpoint(tmp_path):
    # one run, long enough to be caught mid-training; same compiled program as `tiny`
    (tmp_path / "long.yaml").write_text(
        "preset: tiny\ntasks: [circle]\nbounds: [25]\nalgos: [ppo]\nseeds: [0]\n"
        "train: {total_steps: 1600000}\n")
    run_dir = tmp_path / "results-tiny/runs/circle/d25/ppo/seed0"
    train_log = tmp_path / "results-tiny/logs/train/circle_ppo_p0.log"
    proc = subprocess.Popen(["timeout", "-s", "INT", str(SWEEP_TIMEOUT_S), *SNAKEMAKE, "runs",
                             "--configfile", "long.yaml"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        job_id = None
        while time.monotonic() < deadline and proc.poll() is None:
            text = train_log.read_text() if train_log.exists() else ""
            if "steps/s" in text and (run_dir / "job.json").exists():  # training, past compilation
                job_id = json.loads((run_dir / "job.json").read_text())["slurm_job_id"]
                break
            time.sleep(0.5)
        assert job_id, "the training job never started training"
        subprocess.run(["scancel", str(job_id)], check=True)
        out, _ = proc.communicate(timeout=SWEEP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    assert proc.returncode == 0, out[-3000:]
    # Snakemake clears a job's log before its retry: the log is the resumed attempt's.
    text = train_log.read_text()
    resumed = re.search(r"resumed from \S+/checkpoint at update (\d+)/(\d+)", text)
    assert resumed, text
    assert 0 < int(resumed.group(1)) < int(resumed.group(2))  # neither from zero nor after the end
    # the cancelled job failed and was submitted again (the profile's one retry, more runtime)
    assert f"SLURM jobid {job_id} " in out and "Trying to restart job" in out
    assert len(submitted(out)) == 2 and re.search(r"runtime=20\b", out)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["restarts"] == 1 and run["env_steps"] >= 1600000
    assert not (run_dir / "checkpoint").exists()  # removed once the run completed


def test_launcher_submits_the_controller_as_a_slurm_job(tmp_path):
    import submitit

    proc = subprocess.run([sys.executable, "-m", "workflow.launch", "--profile",
                           str(REPO / "cluster_profiles" / "slurm-local"), "--preset", "tiny",
                           "--partition", "debug", "--cpus", "1", "--mem-gb", "1", "--hours", "0.2",
                           "--", "--dry-run", "metrics"],
                          cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    job_id = re.search(r"as slurm job (\d+)", proc.stdout).group(1)
    job = submitit.SlurmJob(folder=tmp_path / ".snakemake" / "launcher", job_id=job_id)
    assert job.result() == 0  # the controller's Snakemake exited 0
    controller_log = Path(job.paths.stdout).read_text() + Path(job.paths.stderr).read_text()
    assert "This was a dry-run" in controller_log
    assert re.search(r"^train_circle_ppo_p0\s+1$", controller_log, flags=re.M)
    assert re.search(r"^train_circle_ppo_lag_p0\s+1$", controller_log, flags=re.M)


# ---- cluster faults ------------------------------------------------------------------------
# One small sweep for every fault: 2 seeds of one task x algorithm, one SLURM job per run
# (pack_size 1), long enough to be caught mid-training, a checkpoint after every chunk (so a
# SIGKILL loses at most one chunk); the same compiled program as the test above. Each test
# ends with the sweep complete, every run trained once (a run interrupted mid-training
# resumed from its checkpoint), no finished run redone, and the tables byte-equal to those
# of an undisturbed sweep of the same config (the `reference` fixture, local profile).

FAULT_CONFIG = ("preset: tiny\ntasks: [circle]\nbounds: [25]\nalgos: [ppo]\nseeds: [0, 1]\n"
                "train: {total_steps: 600000, pack_size: 1, set: {checkpoint_every_s: 0}}\n")
FAULT_RUNS = {"circle/d25/ppo/seed0": "circle_ppo_p0", "circle/d25/ppo/seed1": "circle_ppo_p1"}  # run: pack
STATE_DIR = Path("/run/saferl-slurm")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The undisturbed sweep of FAULT_CONFIG (local profile, same trainer and threads)."""
    root = tmp_path_factory.mktemp("reference")
    (root / "fault.yaml").write_text(FAULT_CONFIG)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--workflow-profile",
           str(REPO / "cluster_profiles" / "local"), "--cores", "2", "metrics", "--configfile", "fault.yaml"]
    done = subprocess.run(["timeout", "-s", "INT", str(SWEEP_TIMEOUT_S), *cmd], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return root


class FaultSweep:
    """FAULT_CONFIG's sweep through the cluster in the background (Snakemake's output in
    `snakemake.out`), with what the test needs to watch it: when a run trains, and the bytes of
    each run.json when it is first seen (a finished run redone would rewrite it)."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        (workdir / "fault.yaml").write_text(FAULT_CONFIG)
        self.out = workdir / "snakemake.out"
        self.first_seen: dict[str, bytes] = {}
        self.proc = None

    def start(self, env_extra: dict | None = None, args: tuple = ()):
        env = {**{k: v for k, v in os.environ.items() if k != "SAFERL_FAIL_RUNS"}, **(env_extra or {})}
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(["timeout", "-s", "INT", str(SWEEP_TIMEOUT_S), *SNAKEMAKE, "metrics",
                                          "--configfile", "fault.yaml", *args], cwd=self.workdir, stdout=out,
                                         stderr=subprocess.STDOUT, env=env)
        return self

    def stop(self):
        """SIGINT: Snakemake cancels its SLURM jobs (a test that failed leaves nothing running)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(60)

    def run_dir(self, run: str) -> Path:
        return self.workdir / "results-tiny/runs" / run

    def watch(self):
        for run in FAULT_RUNS:
            path = self.run_dir(run) / "run.json"
            if run not in self.first_seen and path.exists():
                self.first_seen[run] = path.read_bytes()

    def wait_for(self, what: str, check, timeout_s: float = 600):
        """Poll `check()` until it returns something true; fail if Snakemake ends first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.watch()
            value = check()
            if value:
                return value
            assert self.proc is None or self.proc.poll() is None, f"Snakemake ended before {what}: {self.log()[-3000:]}"
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def training_job(self, run: str) -> str | None:
        """The SLURM job id of the run's job once it trains past a checkpoint, else None."""
        folder = self.run_dir(run)
        if not list((folder / "checkpoint").glob("state-*.json")) or not (folder / "job.json").exists():
            return None
        marker = json.loads((folder / "job.json").read_text())
        return None if marker.get("ended") else marker.get("slurm_job_id")

    def finish(self) -> str:
        while self.proc.poll() is None:
            self.watch()
            time.sleep(0.5)
        self.watch()
        log = self.log()
        assert self.proc.returncode == 0, log[-3000:]
        return log

    def log(self) -> str:
        return self.out.read_text() if self.out.exists() else ""

    def assert_end_state(self, reference: Path, resumed: set[str] = frozenset()):
        """Complete; each run trained once (`resumed` ones from a checkpoint mid-training, the
        others without a restart); no run.json rewritten after it appeared; tables equal."""
        cfg = resolve(yaml.safe_load(FAULT_CONFIG))
        assert {s.state for s in status.sweep_status(cfg, self.workdir)} == {"done"}
        for run, pack in FAULT_RUNS.items():
            meta = json.loads((self.run_dir(run) / "run.json").read_text())
            assert meta["restarts"] == (1 if run in resumed else 0), (run, meta["restarts"])
            if run in resumed:
                text = (self.workdir / "results-tiny/logs/train" / f"{pack}.log").read_text()
                at = re.search(r"resumed from \S+/checkpoint at update (\d+)/(\d+)", text)
                assert at and 0 < int(at.group(1)) < int(at.group(2)), text
            assert (self.run_dir(run) / "run.json").read_bytes() == self.first_seen[run], f"{run} was trained again"
            assert (self.run_dir(run) / "episodes.parquet").read_bytes() == \
                (reference / "results-tiny/runs" / run / "episodes.parquet").read_bytes(), run
        tables = sorted(p.name for p in (reference / "results-tiny/metrics").glob("*.csv"))
        assert tables and sorted(p.name for p in (self.workdir / "results-tiny/metrics").glob("*.csv")) == tables
        for name in tables:
            assert (self.workdir / "results-tiny/metrics" / name).read_bytes() == \
                (reference / "results-tiny/metrics" / name).read_bytes(), name


@pytest.fixture
def sweep(tmp_path):
    fault_sweep = FaultSweep(tmp_path)
    yield fault_sweep
    fault_sweep.stop()


def write_shim(bin_dir: Path, name: str, body: str) -> None:
    """An executable `name` on a test PATH: Python `body` decides whether this call fails on
    purpose (it appends each call to a log beside it); otherwise the real command runs."""
    real = shutil.which(name)
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / name
    shim.write_text(f"#!{sys.executable}\nimport fcntl, os, sys, time\nREAL = {real!r}\n"
                    f"LOG = {str(bin_dir / (name + '.calls'))!r}\n{body}\nos.execv(REAL, [REAL, *sys.argv[1:]])\n")
    shim.chmod(0o755)


def shim_calls(bin_dir: Path, name: str) -> list[list[str]]:
    path = bin_dir / f"{name}.calls"
    return [line.split(" ", 3) for line in path.read_text().splitlines()] if path.exists() else []


def sacct_states(job_id: str) -> dict[str, tuple[str, str]]:
    """{step: (state, exit code)} of a SLURM job, from the accounting database."""
    out = subprocess.run(["sacct", "-j", str(job_id), "-n", "-P", "-o", "JobID,State,ExitCode"],
                         capture_output=True, text=True, check=True).stdout
    return {line.split("|")[0]: tuple(line.split("|")[1:3]) for line in out.splitlines() if line}


def submitted_jobs(log: str) -> int:
    return len(re.findall(r"has been submitted with SLURM jobid", log))


SBATCH_STRETCH_S = 60


def test_sbatch_failing_intermittently_and_for_a_stretch_is_waited_out(tmp_path, reference, sweep):
    # Every call fails for the first minute (a scheduler down); after that 3 calls in 10 fail
    # (a busy one). The retries of workflow/slurm_bin/sbatch, first on Snakemake's PATH, wait
    # both out: Snakemake never sees a failed submission, so no job spends a retry.
    bin_dir = tmp_path / "shims"
    write_shim(bin_dir, "sbatch", f"""
with open(LOG, "a+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.seek(0)
    calls = [line.split() for line in f.read().splitlines()]
    now = time.time()
    start = float(calls[0][1]) if calls else now
    after = sum(float(c[1]) >= start + {SBATCH_STRETCH_S} for c in calls) + 1  # 1-based, past the stretch
    fail = now < start + {SBATCH_STRETCH_S} or after % 10 in (3, 6, 9)
    f.write(f"{{'fail' if fail else 'pass'}} {{now}} {{after}} {{' '.join(sys.argv[1:3])}}\\n")
if fail:
    sys.exit("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")
""")
    log = sweep.start({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}).finish()
    calls = shim_calls(bin_dir, "sbatch")
    start = float(calls[0][1])
    in_stretch = [c for c in calls if float(c[1]) < start + SBATCH_STRETCH_S]
    after = [c for c in calls if float(c[1]) >= start + SBATCH_STRETCH_S]
    # both training jobs were refused for the whole minute, tried again 4 times each
    assert len(in_stretch) >= 6 and {c[0] for c in in_stretch} == {"fail"}, calls
    assert float(in_stretch[-1][1]) >= start + 30, calls
    # after it: the 3rd call (the aggregation's first) failed, all others passed
    assert [c[0] for c in after] == ["pass", "pass", "fail", "pass"], calls
    assert "sbatch failed" not in log and "Trying to restart" not in log
    assert submitted_jobs(log) == 3  # 2 training jobs and the aggregation, each submitted once
    sweep.assert_end_state(reference)


STATUS_OUTAGE_S = 60


@pytest.mark.parametrize("status_command", ["squeue", "sacct"])
def test_sacct_and_squeue_down_for_a_minute_change_nothing(tmp_path, reference, sweep, status_command):
    # While a run trains, squeue and sacct fail for a minute (slurmctld / slurmdbd unreachable).
    # The profile's status attempts, 2 s apart, outlast it; without them plugin 2.8.0 drops
    # the jobs after 5 failed attempts and Snakemake waits for them forever. The profile polls
    # with squeue; the plugin polls with sacct by default and falls back to it by itself where a
    # cluster's MinJobAge is short (slurm-notes.md): each is the status command once, so that
    # each outage is one Snakemake has to wait out.
    bin_dir = tmp_path / "shims"
    down_until = tmp_path / "down_until"
    for name in ("squeue", "sacct"):
        write_shim(bin_dir, name, f"""
down = os.path.exists({str(down_until)!r}) and time.time() < float(open({str(down_until)!r}).read())
with open(LOG, "a") as f:
    f.write(f"{{'fail' if down else 'pass'}} {{time.time()}} {{' '.join(sys.argv[1:])}}\\n")
if down:
    sys.exit("slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
""")
    sweep.start({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, args=("--slurm-status-command", status_command))
    sweep.wait_for("a run training", lambda: sweep.training_job("circle/d25/ppo/seed0"))
    down_from = time.time()
    down_until.write_text(str(down_from + STATUS_OUTAGE_S))
    log = sweep.finish()
    # the controller's status check (`squeue|sacct ... --name <run uuid>`) failed more times in a
    # row than the plugin's default 5 attempts, then passed once the minute was over
    polls = [c for c in shim_calls(bin_dir, status_command) if "--name" in " ".join(c[2:]) and float(c[1]) >= down_from]
    outcomes = "".join(c[0][0] for c in polls)
    assert re.match(r"f{6,}p", outcomes), polls
    assert float(polls[outcomes.index("p")][1]) >= down_from + STATUS_OUTAGE_S
    # the outage happened to every caller of either command: each call inside the minute failed
    # (the shim's log), each one after it went to SLURM
    for name in ("squeue", "sacct"):
        for outcome, at, *_ in shim_calls(bin_dir, name):
            if down_from + 0.5 < float(at) < down_from + STATUS_OUTAGE_S - 0.5:
                assert outcome == "fail", (name, at)
            elif float(at) > down_from + STATUS_OUTAGE_S + 0.5 or float(at) < down_from - 0.5:
                assert outcome == "pass", (name, at)
    assert "Trying to restart" not in log and submitted_jobs(log) == 3
    sweep.assert_end_state(reference)


# Memory for a job's trainer's cgroup until the kernel OOM-kills the trainer there (made its
# first choice), then exit: the job has gone over its --mem as a trainer that grew would.
OOM_HOG = """
import os, sys, time
cgroup, size, trainer = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
held, deadline = [], time.time() + 60
while os.path.exists(f"/proc/{trainer}") and time.time() < deadline:
    if sum(map(len, held)) < size:
        held.append(bytearray(32 << 20))
    else:
        time.sleep(0.05)
sys.exit(os.path.exists(f"/proc/{trainer}"))
"""


def memory_enforced() -> bool:
    mode = STATE_DIR / "mode"
    return mode.exists() and "memory=cgroup" in mode.read_text().split()


def running(pid: str) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def push_over_memory_limit(job_id: str) -> None:
    """Make SLURM job `job_id` exceed its memory so that the kernel OOM-kills its trainer."""
    pids = subprocess.run(["scontrol", "listpids", job_id], capture_output=True, text=True, check=True).stdout
    (trainer,) = [pid for pid in (line.split()[0] for line in pids.splitlines()[1:])
                  if b"\0-m\0runs.train\0" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    (memcg,) = [line.split(":", 2)[2] for line in Path(f"/proc/{trainer}/cgroup").read_text().splitlines()
                if line.split(":")[1] == "memory"]
    cgroup = Path("/sys/fs/cgroup/memory" + memcg)  # .../job_<id>/step_<n>/task_0
    Path(f"/proc/{trainer}/oom_score_adj").write_text("1000")  # the kernel's first choice there
    # stopped, the trainer cannot finish its run before the kernel kills it (a SIGKILL still ends it)
    os.kill(int(trainer), signal.SIGSTOP)
    job = cgroup.parent.parent
    room = int((job / "memory.limit_in_bytes").read_text()) - int((job / "memory.usage_in_bytes").read_text())
    hog = subprocess.run([sys.executable, "-c", OOM_HOG, str(cgroup), str(room + (256 << 20)), trainer],
                         capture_output=True, text=True, timeout=120)
    if running(trainer):
        os.kill(int(trainer), signal.SIGCONT)
        raise AssertionError(f"the trainer {trainer} outlived the memory hog (exit {hog.returncode}): {hog.stderr}")
    # it exits once the trainer is gone, or SLURM, ending the step, kills it first
    assert hog.returncode in (0, -signal.SIGKILL), hog.stderr


def kill_with_its_node(job_id: str) -> None:
    """SIGKILL every process of SLURM job `job_id` at once (a node lost: no signal to checkpoint on)."""
    pids = subprocess.run(["scontrol", "listpids", job_id], capture_output=True, text=True, check=True).stdout
    for pid in [int(line.split()[0]) for line in pids.splitlines()[1:]]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def killed_sweep(reference, tmp_path_factory):
    """One sweep for both kills: seed0's job killed with its node (on every cluster), and seed1's
    trainer OOM-killed by the kernel where the cluster enforces job memory (a cgroup v1 memory
    controller; `oomed` is None elsewhere)."""
    sweep = FaultSweep(tmp_path_factory.mktemp("killed"))
    try:
        sweep.start()
        killed = sweep.wait_for("seed0 training", lambda: sweep.training_job("circle/d25/ppo/seed0"))
        kill_with_its_node(killed)
        oomed = None
        if memory_enforced():
            oomed = sweep.wait_for("seed1 training", lambda: sweep.training_job("circle/d25/ppo/seed1"))
            push_over_memory_limit(oomed)
        log = sweep.finish()
    finally:
        sweep.stop()
    return sweep, log, killed, oomed


def test_a_training_job_killed_with_its_node_resumes_from_its_checkpoint(reference, killed_sweep):
    sweep, log, killed, oomed = killed_sweep
    assert sacct_states(killed)[killed] == ("FAILED", "0:9")
    # retried once by Snakemake (and seed1's job too where it was OOM-killed), with more memory
    # (profile: 1000 + 1000 x attempt MB)
    retries = 1 if oomed is None else 2
    assert log.count("Trying to restart") == retries and submitted_jobs(log) == 3 + retries
    assert re.search(r"mem_mb=3000\b", log)
    sweep.assert_end_state(reference, resumed={"circle/d25/ppo/seed0"} | ({"circle/d25/ppo/seed1"} if oomed else set()))


def test_a_training_job_killed_for_memory_resumes_from_its_checkpoint(reference, killed_sweep):
    sweep, log, killed, oomed = killed_sweep
    if oomed is None:
        pytest.skip("this cluster does not enforce job memory (no cgroup v1 memory controller; "
                    f"{STATE_DIR / 'mode'}), so no job can end OUT_OF_MEMORY (the node kill ran)")
    # the trainer runs in the job's step 0 (the jobstep plugin's srun): that step ran out of
    # memory, and the job failed with it
    states = sacct_states(oomed)
    assert states[f"{oomed}.0"][0] == "OUT_OF_MEMORY" and states[oomed][0] == "FAILED", states
    assert f"SLURM jobid {oomed} " in log and log.count("Trying to restart") == 2
    sweep.assert_end_state(reference, resumed=set(FAULT_RUNS))


def squeue_state(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout.strip()


def test_a_preempted_and_requeued_job_resumes_from_its_checkpoint(reference, sweep):
    sweep.start()
    job = sweep.wait_for("seed0 training", lambda: sweep.training_job("circle/d25/ppo/seed0"))
    subprocess.run(["scontrol", "requeue", job], check=True)
    # SLURM holds a requeued job for about 2 minutes (BeginTime): let it go now
    sweep.wait_for("the job back in the queue", lambda: squeue_state(job) == "PENDING")
    subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=True)
    log = sweep.finish()
    instances = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-j", job, "-o", "State"],
                               capture_output=True, text=True, check=True).stdout.split()
    assert instances == ["REQUEUED", "COMPLETED"]
    # SLURM restarted the job, not Snakemake: one submission per job, no retry spent
    assert "Trying to restart" not in log and submitted_jobs(log) == 3
    sweep.assert_end_state(reference, resumed={"circle/d25/ppo/seed0"})


def test_a_controller_killed_at_its_time_limit_is_relaunched_by_the_same_command(tmp_path, reference, sweep):
    launch = [sys.executable, "-m", "workflow.launch", "--profile", str(REPO / "cluster_profiles" / "slurm-local"),
              "--partition", "debug", "--cpus", "1", "--mem-gb", "3", "--hours", "0.1",
              "--", "metrics", "--configfile", "fault.yaml"]

    def submit() -> str:
        proc = subprocess.run(launch, cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert proc.returncode == 0, proc.stderr
        return re.search(r"as slurm job (\d+)", proc.stdout).group(1)

    def ended(job_id: str) -> str | None:
        state = sacct_states(job_id).get(job_id, ("PENDING",))[0]
        return None if state in ("PENDING", "RUNNING", "REQUEUED") or squeue_state(job_id) else state

    try:
        controller_killed_then_relaunched(tmp_path, reference, sweep, submit, ended)
    finally:  # nothing of this test left running: its controllers and their jobs
        if jobs_in(tmp_path):
            subprocess.run(["scancel", *jobs_in(tmp_path)])


def jobs_in(workdir: Path) -> list[str]:
    """Ids of the SLURM jobs in the queue that run in `workdir`."""
    jobs = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True).stdout.splitlines()
    return [line.split()[0] for line in jobs if line.split()[1:] == [str(workdir)]]


def controller_killed_then_relaunched(tmp_path, reference, sweep, submit, ended):
    import submitit

    first = submit()
    sweep.wait_for("a run training", lambda: sweep.training_job("circle/d25/ppo/seed0"))
    subprocess.run(["scontrol", "update", f"jobid={first}", "TimeLimit=1"], check=True)  # the limit: now
    state = sweep.wait_for("the controller's end", lambda: ended(first), timeout_s=300)
    # SLURM's warning 90 s before the limit makes submitit end the job and kill Snakemake
    # (FAILED), or the limit itself does (TIMEOUT)
    first_log = (tmp_path / ".snakemake" / "launcher" / f"{first}_0_log.err").read_text()
    assert state == "TIMEOUT" or (state == "FAILED" and "Job not requeued because: timed-out" in first_log), state
    assert list((tmp_path / ".snakemake" / "locks").iterdir())  # what the killed controller left
    # its training jobs go on and finish their runs (Snakemake in each touches the outputs last)
    sweep.wait_for("its jobs' end", lambda: not jobs_in(tmp_path), timeout_s=300)
    done_before = {run: (sweep.run_dir(run) / "run.json").stat().st_mtime_ns for run in FAULT_RUNS}

    second = submit()
    assert sweep.wait_for("the relaunched controller's end", lambda: ended(second), timeout_s=SWEEP_TIMEOUT_S) == "COMPLETED"
    job = submitit.SlurmJob(folder=tmp_path / ".snakemake" / "launcher", job_id=second)
    assert job.result() == 0
    controller_log = Path(job.paths.stdout).read_text() + Path(job.paths.stderr).read_text()
    assert f"SLURM job {first} ended without finishing; removing the Snakemake lock it left" in controller_log
    # the jobs of the killed controller finished their runs; none was trained again
    assert {run: (sweep.run_dir(run) / "run.json").stat().st_mtime_ns for run in done_before} == done_before
    sweep.assert_end_state(reference)
