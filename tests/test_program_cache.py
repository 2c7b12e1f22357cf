"""The compiled-program cache (algos.program_cache): a process loads the programs another one
compiled, without tracing them, and they compute bitwise what the compiled ones compute; an
entry's key changes with everything that decides the programs; a damaged entry is compiled
again, and only programs XLA compiled for real are stored."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from algos import program_cache
from algos.config import make_config
from algos.learning import make_env

REPO = Path(__file__).resolve().parent.parent
KW = dict(task="circle", total_steps=8 * 2048, num_envs=4, episode_length=64, eval_episodes=4)

SCRIPT = textwrap.dedent("""
    import glob, os, sys
    import jax, jax.numpy as jnp, numpy as np
    from algos import programs
    from algos.config import make_config, stacked_hyper

    programs.enable_compilation_cache(sys.argv[1])
    kw = dict(task="circle", total_steps=8 * 2048, num_envs=4, episode_length=64, eval_episodes=4)
    def config(algo, num_envs=4):
        return make_config("cpu", dict(kw, algo=algo, num_envs=num_envs), ["chunk_updates=4"])

    def outputs(compiled, cfg):
        h = stacked_hyper([cfg, cfg])
        state = compiled.init(jnp.asarray([0, 1], jnp.int32), h)
        state, log, summary = compiled.chunk(state, h, jnp.asarray([2, 2], jnp.int32))
        pending, obs = compiled.evaluate(state, jnp.asarray([5, 6], jnp.int32), jnp.float32(1.0), h)
        return jax.tree_util.tree_leaves((state, log, summary, pending, obs))

    def fresh(cfg):
        programs._COMPILED.clear()  # as a new process: only the disk caches remain
        return programs.compile_programs(cfg, size=2, mode="sequential")

    compiled = fresh(config("ppo_lag"))
    entries = glob.glob(os.path.join(sys.argv[1], "programs", "*.pkl"))
    print("first", compiled.source, len(entries))
    loaded = fresh(config("ppo"))  # another algorithm of the same shared program
    print("second", loaded.source, loaded.template == compiled.template)
    cfg = config("ppo")
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(outputs(compiled, cfg), outputs(loaded, cfg)))
    print("bitwise", same and len(outputs(loaded, cfg)) > 10)
    class Planted:  # what someone who can write the cache folder would leave there
        def __reduce__(self):
            return (open, (sys.argv[2], "w"))
    import pickle, zlib
    with open(entries[0], "wb") as f:
        f.write(zlib.compress(pickle.dumps(Planted())))
    planted = fresh(cfg)  # refused unread, compiled for real and the entry rewritten
    print("planted", planted.source, os.path.exists(sys.argv[2]), fresh(cfg).source,
          all(np.array_equal(a, b, equal_nan=True) for a, b in zip(outputs(compiled, cfg), outputs(planted, cfg))))
    os.remove(entries[0])
    print("other shape", fresh(config("ppo", num_envs=8)).source,
          len(glob.glob(os.path.join(sys.argv[1], "programs", "*.pkl"))))
""")


@pytest.mark.slow
def test_a_new_process_loads_what_another_compiled_and_computes_the_same_bits(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    env[program_cache.KEY_ENV] = str(tmp_path / "key")
    marker = tmp_path / "code-ran"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "cache"), str(marker)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "first compiled 1" in lines
    assert "second loaded True" in lines
    assert "bitwise True" in lines
    # a planted entry never runs: refused with one line naming it, compiled (for real, under
    # new names: JAX's cache would serve an executable that cannot be stored) and rewritten,
    # so the next process loads it again
    assert "planted compiled False loaded True" in lines, lines
    assert not marker.exists()
    refusals = [line for line in lines if line.startswith("compiled-program cache: refusing")]
    assert len(refusals) == 1 and str(tmp_path / "cache" / "programs") in refusals[0], lines
    assert "other shape compiled 1" in lines  # stored beside the removed one


def test_an_entry_is_keyed_by_code_config_env_size_mode_and_xla_flags(tmp_path, monkeypatch):
    cfg = make_config("cpu", dict(KW, algo="ppo"))
    base = dict(cache_dir=str(tmp_path), code="abc", static_key=cfg.static_key(shared=True), env=make_env(cfg),
                size=6, mode="sequential")
    path = program_cache.entry_path(**base)
    assert path.startswith(str(tmp_path / program_cache.SUBDIR))
    other = make_config("cpu", dict(KW, algo="ppo", num_envs=8))
    circle = make_config("cpu", dict(KW, algo="ppo"), ["env.contact_model=simple"])
    changes = [dict(code="abd"), dict(static_key=other.static_key(shared=True)), dict(env=make_env(circle)),
               dict(size=8), dict(mode="batched")]
    for change in changes:
        assert program_cache.entry_path(**{**base, **change}) != path, change
    # runtime values (seed, bound, budget, the shared program's algorithm) are not in the key
    runtime = make_config("cpu", dict(KW, algo="p3o", seed=3, bound=50.0, total_steps=4096))
    assert program_cache.entry_path(**{**base, "static_key": runtime.static_key(shared=True)}) == path
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX")
    assert program_cache.entry_path(**base) != path


RACE = textwrap.dedent("""
    import sys, threading
    from algos import programs
    from algos.config import make_config

    programs.enable_compilation_cache(sys.argv[1])
    cfg = make_config("cpu", dict(task="circle", algo=sys.argv[2], total_steps=8 * 2048, num_envs=4,
                                  episode_length=64, eval_episodes=4), ["chunk_updates=4"])
    sources = []
    threads = [threading.Thread(target=lambda: sources.append(programs.compile_programs(cfg, size=2, mode="sequential")))
               for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print("sources", sorted(c.source for c in sources), sources[0] is sources[1] or sources[0].init is sources[1].init)
""")


@pytest.mark.slow
def test_jobs_that_need_the_same_programs_at_once_compile_them_once(tmp_path):
    """Two processes (cluster jobs sharing the cache folder), each with two threads (local jobs
    run as threads of the controller), ask for one shared program at the same moment: one
    thread of one process compiles it, its sibling gets the same executables, and the other
    process waits and loads them instead of compiling them a second time."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    cache = str(tmp_path / "cache")
    procs = [subprocess.Popen([sys.executable, "-c", RACE, cache, algo], cwd=REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for algo in ("ppo", "ppo_lag")]
    outputs = [p.communicate(timeout=900) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    lines = sorted(out.strip().splitlines()[-1] for out, _ in outputs)
    assert lines == ["sources ['compiled', 'compiled'] True", "sources ['loaded', 'loaded'] True"], lines


def test_programs_with_custom_calls_are_not_stored_and_jobs_then_compile_side_by_side(tmp_path):
    """XLA:CPU deserialises an executable that holds a custom call (the CRAX tasks' MJX solves
    call LAPACK) without the call's target, and it then crashes when run: such programs are
    never stored, and a note says so, so that later jobs do not wait on one another."""
    import jax
    import jax.numpy as jnp

    x = jnp.eye(3) * 2.0
    assert not program_cache.storable([jax.jit(jnp.linalg.cholesky).lower(x)])
    assert program_cache.storable([jax.jit(lambda a: a @ a).lower(x)])
    path = str(tmp_path / "programs" / "entry.pkl")
    assert not program_cache.is_unstorable(path)
    program_cache.mark_unstorable(path)
    assert program_cache.is_unstorable(path) and not os.path.exists(path)


class _Planted:
    """A pickle that creates a file when it is unpickled (what a planted entry would do)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _entry(tmp_path) -> str:
    path = tmp_path / "programs" / ("0" * 32 + ".pkl")
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path)


@pytest.mark.parametrize("layout", ["bare pickle", "this format, forged tag", "another user's key", "another entry's name"])
def test_an_entry_this_user_did_not_write_is_refused_unread_with_one_line(tmp_path, monkeypatch, capsys, layout):
    """Anyone who can write the cache folder could plant an entry; it is never unpickled: the
    tag (HMAC-SHA256 under this user's key, over the entry's name and bytes) is checked first."""
    import hashlib
    import pickle
    import zlib

    monkeypatch.setenv(program_cache.KEY_ENV, str(tmp_path / "keys" / "mine"))
    marker = tmp_path / "code-ran"
    blob = zlib.compress(pickle.dumps(_Planted(marker)))
    path = _entry(tmp_path)
    if layout == "bare pickle":
        data = blob
    elif layout == "this format, forged tag":
        data = program_cache.MAGIC + hashlib.sha256(blob).digest() + blob
    elif layout == "another user's key":
        other = program_cache.cache_key(str(tmp_path / "keys" / "theirs"))
        data = program_cache.MAGIC + program_cache._tag(other, path, blob) + blob
    else:  # signed with this key, but for another entry (other programs)
        data = program_cache.MAGIC + program_cache._tag(program_cache.cache_key(), "1" * 32 + ".pkl", blob) + blob
    with open(path, "wb") as f:
        f.write(data)
    assert program_cache.load(path) is None
    assert not marker.exists()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"compiled-program cache: refusing {path} ("), lines
    assert lines[0].endswith("; compiling again")
    # the same bytes, signed for this entry with this user's key, are unpickled (so the check is what stopped it)
    with open(path, "wb") as f:
        f.write(program_cache.MAGIC + program_cache._tag(program_cache.cache_key(), path, blob) + blob)
    program_cache.load(path)
    assert marker.exists()


def test_the_key_is_made_private_on_first_use_and_refused_when_others_may_write_it(tmp_path):
    path = tmp_path / "config" / "saferl-eval" / "program-cache.key"
    key = program_cache.cache_key(str(path))
    assert len(key) == program_cache.KEY_BYTES and program_cache.cache_key(str(path)) == key
    assert (path.stat().st_mode & 0o777) == 0o600
    path.chmod(0o620)
    with pytest.raises(program_cache.UnusableKey, match=f"{path}: the program cache's key is writable by others"):
        program_cache.cache_key(str(path))
    path.chmod(0o600)
    path.write_bytes(b"short")
    with pytest.raises(program_cache.UnusableKey, match="is 5 bytes, not 32"):
        program_cache.cache_key(str(path))


def test_a_key_that_cannot_be_made_leaves_programs_unstored_not_the_job_failed(tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("")  # the key's folder cannot be made (as in a read-only home)
    monkeypatch.setenv(program_cache.KEY_ENV, str(tmp_path / "a-file" / "key"))
    path = _entry(tmp_path)
    program_cache.save(path, (), None)
    assert not os.path.exists(path)
    out = capsys.readouterr().out
    assert out.startswith(f"compiled-program cache: not storing {path} ({tmp_path / 'a-file' / 'key'}: cannot ")
    assert out.endswith("the program cache's key: Not a directory)\n") and out.count("\n") == 1


def test_the_key_lives_in_the_users_config_folder_unless_named(monkeypatch, tmp_path):
    monkeypatch.delenv(program_cache.KEY_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert program_cache.key_path() == str(tmp_path / "saferl-eval" / "program-cache.key")
    monkeypatch.setenv(program_cache.KEY_ENV, "/shared/group.key")
    assert program_cache.key_path() == "/shared/group.key"
