"""Warm workers for the local sweep: each job of a rule still runs one run, but in a Python
process that has already imported JAX and loaded the compiled programs of earlier runs.

    python -m workflow.warm MODULE ARGS...    # like `python -m MODULE ARGS...` (algos.train, metrics)
    python -m workflow.warm --stop            # end this checkout's idle workers now

A sweep job of the `cpu` preset trains for about 11 s, and a fresh process spent about 8 s more
before it: starting Python, importing JAX, tracing and lowering the three programs, loading
them from the persistent cache (docs/workflow.md has the breakdown). A worker pays that once per
program. The job's own process is a thin client (no JAX, no pandas): it takes a free worker
slot (an flock on `wN.lock` in the pool folder), starting a worker there if none listens on
`wN.sock`, hands it the module, arguments, working directory, environment and its own stdout
and stderr (SCM_RIGHTS), and exits with the worker's status. So a job's log, exit status and
signals behave as if the module ran in the job's process: SIGTERM, SIGINT or SIGUSR2 to the
client (Snakemake stopping, a kill) become SIGTERM in the worker, where the trainer checkpoints
and answers 75; a client that dies also stops its run in the worker.

Workers are per checkout, code version and JAX setting (the pool folder's name hashes them),
so an edit to the code starts fresh workers; a worker exits after `SAFERL_WARM_IDLE_S` seconds
(default 30) without a job, and after a job that left it above `SAFERL_WARM_MAX_MB` of resident
memory (default: half the machine's memory shared among as many workers as it has CPU cores),
since every program it keeps and every compilation it ran stays in its memory; the next job
then starts a fresh worker. The plain path, `os.execv` of `python -m MODULE`, is taken inside
SLURM jobs (one run per allocation: nothing to keep warm), with SAFERL_WARM=0, and when a
worker cannot be started. A run's results are the same either way: the compiled programs are
the same, and every random draw comes from the run's seed.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MODULES = ("algos.train", "metrics")  # what a worker runs, and how (see _dispatch)
WARM_ENV = "SAFERL_WARM"  # 0: always the plain path
IDLE_ENV = "SAFERL_WARM_IDLE_S"
DIR_ENV = "SAFERL_WARM_DIR"  # where pool folders live (default: the temp folder)
MAX_MB_ENV = "SAFERL_WARM_MAX_MB"  # a worker above this resident size retires after its job
# The settings a JAX process fixes when it starts; workers that differ in them are separate.
PROCESS_ENV = ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64", "PYTHONPATH", "JAX_COMPILATION_CACHE_DIR")
REPO = Path(__file__).resolve().parent.parent
SOURCES = ("algos", "envs", "metrics", "workflow/warm.py")
MAX_SLOTS = 64
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)


# ---- the pool folder ---------------------------------------------------------------------
def pool_key(env: dict) -> str:
    """Hash of what a worker's results and behaviour depend on besides the request."""
    digest = hashlib.sha256(f"{sys.executable}\0{REPO}\0".encode())
    for name in PROCESS_ENV:
        digest.update(f"{name}={env.get(name, '')}\0".encode())
    for source in SOURCES:
        path = REPO / source
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(str(file.relative_to(REPO)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def pool_dir(env: dict) -> Path:
    root = Path(env.get(DIR_ENV) or tempfile.gettempdir()) / f"saferl-warm-{os.getuid()}"
    folder = root / pool_key(env)
    if len(str(folder / f"w{MAX_SLOTS}.sock")) > 100:  # a Unix socket's path has at most 107 bytes
        short = hashlib.sha256(str(folder).encode()).hexdigest()[:16]
        folder = Path("/tmp") / f"saferl-warm-{os.getuid()}" / short
    return folder


def _send(conn: socket.socket, payload: dict, fds: list[int] = ()) -> None:
    body = json.dumps(payload).encode()
    socket.send_fds(conn, [struct.pack("!I", len(body))], list(fds))
    conn.sendall(body)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = conn.recv(n - len(data))
        if not part:
            raise ConnectionError("connection closed")
        data += part
    return data


def _recv(conn: socket.socket, max_fds: int = 0) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, 4, max_fds)
    if len(head) < 4:
        head += _recv_exact(conn, 4 - len(head))
    (size,) = struct.unpack("!I", head)
    return json.loads(_recv_exact(conn, size)), fds


# ---- the client --------------------------------------------------------------------------
def use_warm(env: dict) -> bool:
    return env.get(WARM_ENV, "1") != "0" and not env.get("SLURM_JOB_ID")


def worker_env(module: str, args: list[str]) -> dict:
    """The environment of the worker for this request. Single-threaded XLA is fixed when JAX
    starts, so a `--threads 1` training run needs a worker started with it; the metrics
    stages do not use XLA and share those workers."""
    from algos.train import SINGLE_THREAD_XLA_FLAGS  # algos.train imports no JAX at module level

    env = dict(os.environ)
    threads = args[args.index("--threads") + 1] if "--threads" in args[:-1] else None
    if module == "metrics" or threads == "1":
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA_FLAGS).strip()
    return env


def exec_plain(module: str, args: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", module, *args])


def _connect(path: Path, timeout_s: float) -> socket.socket | None:
    deadline = time.monotonic() + timeout_s
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(path))
            return conn
        except OSError:
            conn.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)


def _start_worker(folder: Path, slot: int, env: dict) -> None:
    log = open(folder / f"w{slot}.log", "ab")
    subprocess.Popen([sys.executable, "-m", "workflow.warm", "--serve", str(folder), str(slot)],
                     cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                     start_new_session=True, close_fds=True)
    log.close()


def _take_slot(folder: Path, env: dict) -> tuple[int, socket.socket] | None:
    """A free worker slot (its lock held by this process for the job) and a connection to its
    worker, started here if none listens; None when no worker could be had."""
    folder.mkdir(parents=True, exist_ok=True)
    for slot in range(MAX_SLOTS):
        fd = os.open(folder / f"w{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        conn = _connect(folder / f"w{slot}.sock", 0.0)
        if conn is None:
            _start_worker(folder, slot, env)
            conn = _connect(folder / f"w{slot}.sock", 60.0)  # the worker binds before importing
        if conn is None:
            os.close(fd)
            return None
        return slot, conn  # the lock fd stays open (and locked) until this process exits
    return None


def run(module: str, args: list[str]) -> int:
    """Run `python -m module args` in a warm worker; the plain path when none can be had."""
    if module not in MODULES:
        raise SystemExit(f"workflow.warm: module {module!r} is not one a worker runs; choose one of {MODULES}")
    env = worker_env(module, args)
    if not use_warm(env):
        exec_plain(module, args)
    taken = _take_slot(pool_dir(env), env)
    if taken is None:
        print("workflow.warm: no warm worker could be started; running in this process", file=sys.stderr, flush=True)
        exec_plain(module, args)
    slot, conn = taken
    def stop(signum, frame):  # the worker stops the run (the trainer checkpoints and answers 75)
        try:
            conn.send(b"s")
        except OSError:
            pass

    for s in STOP_SIGNALS:
        signal.signal(s, stop)
    sys.stdout.flush(), sys.stderr.flush()
    _send(conn, {"module": module, "args": args, "cwd": os.getcwd(), "env": env}, [1, 2])
    try:
        reply, _ = _recv(conn)
    except (ConnectionError, OSError, ValueError):
        log = pool_dir(env) / f"w{slot}.log"
        print(f"workflow.warm: the worker died during the job (its own output: {log})", file=sys.stderr, flush=True)
        return 1
    return int(reply["status"])


# ---- the worker --------------------------------------------------------------------------
class _Job:
    """The request being served; the watcher thread turns a client's stop (or death) into
    SIGTERM only while one runs."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running = False


def _watch(conn: socket.socket, job: _Job) -> None:
    try:
        while conn.recv(1):
            with job.lock:
                if job.running:
                    os.kill(os.getpid(), signal.SIGTERM)
    except OSError:
        pass
    with job.lock:  # the client is gone: stop its run (the trainer checkpoints)
        if job.running:
            os.kill(os.getpid(), signal.SIGTERM)


def _dispatch(module: str, args: list[str]) -> int:
    try:
        if module == "algos.train":
            from algos.train import main
        else:
            from metrics.cli import main
        return int(main(args) or 0)
    except SystemExit as done:
        code = done.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            return 1
        return int(code or 0)
    except Exception:  # noqa: BLE001 - reported like an uncaught exception of `python -m`
        import traceback

        traceback.print_exc()
        return 1


def _serve_one(conn: socket.socket) -> int | None:
    """Run one request and return its exit status (not yet sent); None when it asks the worker
    to exit."""
    request, fds = _recv(conn, max_fds=2)
    if request.get("exit"):
        return None
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_fds = [os.dup(1), os.dup(2)]
    job = _Job()
    try:
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        os.environ.clear()
        os.environ.update({k: v for k, v in request["env"].items() if k not in PROCESS_ENV})
        os.environ.update({k: saved_env[k] for k in PROCESS_ENV if k in saved_env})
        os.chdir(request["cwd"])
        with job.lock:
            job.running = True
        threading.Thread(target=_watch, args=(conn, job), daemon=True).start()
        status = _dispatch(request["module"], request["args"])
    finally:
        with job.lock:
            job.running = False
        sys.stdout.flush(), sys.stderr.flush()
        for fd, saved in zip((1, 2), saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        for fd in fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
    return status


def resident_mb() -> float:
    """This process's resident memory in MiB (Linux: now; elsewhere: its peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def memory_limit_mb(env: dict) -> float:
    """SAFERL_WARM_MAX_MB, or half the physical memory over one worker per CPU core."""
    if env.get(MAX_MB_ENV):
        try:
            return float(env[MAX_MB_ENV])
        except ValueError:
            raise SystemExit(f"workflow.warm: {MAX_MB_ENV}={env[MAX_MB_ENV]!r} is not a number of MiB") from None
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return float("inf")
    return 0.5 * total / (os.cpu_count() or 1)


def serve(folder: Path, slot: int) -> None:
    """Listen on wN.sock; exit after an idle spell during which no client holds wN.lock."""
    path = folder / f"w{slot}.sock"
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    signal.signal(signal.SIGTERM, lambda *_: None)  # a stop that comes after its job is no exit
    import jax  # noqa: F401 - the point of a warm worker: imported once
    import algos.train  # noqa: F401
    import metrics.cli  # noqa: F401

    listener.settimeout(float(os.environ.get(IDLE_ENV, 30)))
    limit_mb = memory_limit_mb(os.environ)
    lock = os.open(folder / f"w{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    while True:
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a client holds the slot and is about to connect
            path.unlink(missing_ok=True)
            return
        with conn:
            status = _serve_one(conn)
            retire = status is None or resident_mb() > limit_mb
            if retire:  # before the reply, so that the next job finds no socket and starts a worker
                path.unlink(missing_ok=True)
            if status is not None:
                try:
                    _send(conn, {"status": status})
                except OSError:
                    pass  # the client is gone
        if retire:
            return


def stop_workers(env: dict) -> int:
    """End this checkout's idle workers (a busy one finishes its job first); returns how many."""
    folder, stopped = pool_dir(env), 0
    for sock in sorted(folder.glob("w*.sock")) if folder.exists() else []:
        slot = sock.stem[1:]
        fd = os.open(folder / f"w{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits for its job
        conn = _connect(sock, 0.0)
        if conn is not None:
            with conn:
                _send(conn, {"exit": True})
            stopped += 1
        os.close(fd)
    return stopped


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        serve(Path(argv[1]), int(argv[2]))
        return 0
    if argv[:1] == ["--stop"]:
        print(f"workflow.warm: stopped {stop_workers(worker_env('metrics', []))} idle worker(s)")
        return 0
    if not argv:
        raise SystemExit(__doc__.split("\n\n")[1])
    return run(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
