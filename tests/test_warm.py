"""Warm workers (workflow.warm): a job run in a worker behaves as `python -m MODULE` would, with
the same results, log, exit status and signals."""
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from workflow import warm

pytestmark = pytest.mark.slow
REPO = os.path.join(os.path.dirname(__file__), "..")
SMALL = ["--task", "circle", "--bound", "25", "--algo", "ppo_lag", "--preset", "cpu", "--num-envs", "4",
         "--episode-length", "64", "--eval-episodes", "4", "--threads", "1"]


@pytest.fixture
def pool(tmp_path):
    """Environment of a private pool (its own folder) whose workers end soon when idle."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(REPO), **{warm.DIR_ENV: str(tmp_path / "pool"),
                                                               warm.IDLE_ENV: "20"})
    env.pop(warm.WARM_ENV, None)
    yield env
    warm.stop_workers(warm.worker_env("metrics", []) | {warm.DIR_ENV: env[warm.DIR_ENV], "PYTHONPATH": env["PYTHONPATH"]})


def client(env, *args, **kwargs):
    return subprocess.run([sys.executable, "-m", "workflow.warm", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, **kwargs)


def worker_pids(env) -> set[str]:
    folder = warm.pool_dir(warm.worker_env("algos.train", SMALL) | {k: env[k] for k in (warm.DIR_ENV, "PYTHONPATH")})
    return {p.name for p in folder.glob("w*.sock")}


def test_a_warm_run_equals_a_plain_run_and_a_worker_serves_the_next_job(pool, tmp_path):
    plain = subprocess.run([sys.executable, "-m", "algos.train", *SMALL, "--seed", "3", "--out", str(tmp_path / "plain"),
                            "--total-steps", "8192"], cwd=REPO, env=pool, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-2000:]
    first = client(pool, "algos.train", *SMALL, "--seed", "3", "--out", str(tmp_path / "warm"), "--total-steps", "8192")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "done:" in first.stderr  # the trainer's output reaches the job's own stderr
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "plain" / "episodes.parquet"),
                                  pd.read_parquet(tmp_path / "warm" / "episodes.parquet"))
    # the same worker takes the next job and its programs are already loaded
    second = client(pool, "algos.train", *SMALL, "--seed", "4", "--out", str(tmp_path / "warm2"), "--total-steps", "8192")
    assert second.returncode == 0 and "+0.0 s compile" in second.stderr, second.stderr[-2000:]
    assert len(worker_pids(pool)) == 1
    # a metrics stage runs there too, with its exit status and error message
    bad = client(pool, "metrics", "summarise", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "s.parquet"))
    assert bad.returncode != 0 and "missing.parquet" in bad.stderr and not (tmp_path / "s.parquet").exists()


def test_sigterm_to_the_job_checkpoints_in_the_worker_and_exits_75(pool, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "workflow.warm", "algos.train", *SMALL, "--seed", "0", "--out",
                             str(out), "--total-steps", str(200 * 2048 * 100)], cwd=REPO, env=pool,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    for line in proc.stderr:  # the first chunk's progress line
        if "iterate" in line or time.time() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 75, rest
    assert (out / "checkpoint").is_dir() and not (out / "run.json").exists()
    # a job whose client is killed outright is stopped in the worker, which serves the next job
    proc = subprocess.Popen([sys.executable, "-m", "workflow.warm", "algos.train", *SMALL, "--seed", "1", "--out",
                             str(tmp_path / "killed"), "--total-steps", str(200 * 2048 * 100)], cwd=REPO, env=pool,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "iterate" in line or time.time() > deadline:
            break
    proc.kill()
    proc.wait()
    for _ in range(600):
        if (tmp_path / "killed" / "checkpoint").is_dir():
            break
        time.sleep(0.1)
    assert (tmp_path / "killed" / "checkpoint").is_dir()
    done = client(pool, "algos.train", *SMALL, "--seed", "2", "--out", str(tmp_path / "after"), "--total-steps", "4096")
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_warm_workers_the_module_runs_in_the_job_process(pool, tmp_path):
    env = dict(pool, **{warm.WARM_ENV: "0"})
    proc = client(env, "algos.train", *SMALL, "--seed", "0", "--out", str(tmp_path / "plain"), "--total-steps", "4096")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not worker_pids(pool)
    refused = client(pool, "os", "system")
    assert refused.returncode != 0 and "not one a worker runs" in refused.stderr


def test_a_worker_that_dies_fails_the_job_with_a_pointer_to_its_output(pool, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "workflow.warm", "algos.train", *SMALL, "--seed", "0", "--out",
                             str(tmp_path / "run"), "--total-steps", str(200 * 2048 * 100)], cwd=REPO, env=pool,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    for line in proc.stderr:
        if "iterate" in line or time.time() > deadline:
            break
    folder = warm.pool_dir(warm.worker_env("algos.train", SMALL) | {k: pool[k] for k in (warm.DIR_ENV, "PYTHONPATH")})
    found = subprocess.run(["pgrep", "-f", f"workflow.warm --serve {folder}"], capture_output=True, text=True)
    os.kill(int(found.stdout.split()[0]), signal.SIGKILL)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert "the worker died during the job" in rest and str(folder / "w0.log") in rest


def test_a_worker_above_its_memory_limit_retires_after_its_job_and_the_next_job_starts_a_fresh_one(pool, tmp_path):
    small = dict(pool, **{warm.MAX_MB_ENV: "1"})  # every worker is above 1 MiB: retire after each job
    for seed in (5, 6):
        done = client(small, "algos.train", *SMALL, "--seed", str(seed), "--out", str(tmp_path / f"r{seed}"),
                      "--total-steps", "8192")
        assert done.returncode == 0, done.stderr[-2000:]
        assert (tmp_path / f"r{seed}" / "run.json").exists()
        assert worker_pids(pool) == set()  # its socket went before the reply: no job can reach it


def test_a_memory_limit_that_is_not_a_number_is_refused_by_name():
    with pytest.raises(SystemExit, match="SAFERL_WARM_MAX_MB='lots'"):
        warm.memory_limit_mb({warm.MAX_MB_ENV: "lots"})
    assert warm.memory_limit_mb({warm.MAX_MB_ENV: "512"}) == 512.0
    assert 0 < warm.memory_limit_mb({}) < float("inf")
