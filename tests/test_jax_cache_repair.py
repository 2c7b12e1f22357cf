"""A damaged entry of JAX's persistent compilation cache is replaced by the next process that
compiles the program (algos.jax_cache_repair): JAX alone never overwrites an entry, so every
later job would warn and compile that program again."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp
    from algos import program_cache, programs

    programs.enable_compilation_cache(sys.argv[1])
    x = jnp.ones((4, 4))
    before = program_cache.jax_cache_hits()
    program = jax.jit(lambda x: jnp.sin(x) * 3.0 + x @ x).lower(x).compile()
    hits = program_cache.jax_cache_hits() - before
    print("hit", hits, float(program(x)[0, 0]))
""")


def _compile(cache) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(cache)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_a_damaged_entry_is_replaced_and_the_next_process_loads_it(tmp_path):
    cache = tmp_path / "jax"
    first = _compile(cache)
    assert first[-1].startswith("hit 0 ")
    entries = sorted(cache.glob("jit__lambda-*-cache"))
    assert len(entries) == 1, entries
    good = entries[0].read_bytes()
    entries[0].write_bytes(good[: len(good) // 2])  # truncated, as by a writer killed mid-write
    second = _compile(cache)
    assert second == [f"JAX compilation cache: replaced the unreadable entry {entries[0]}",
                      "hit 0 " + first[-1].split()[-1]], second
    assert len(entries[0].read_bytes()) > len(good) // 2
    third = _compile(cache)
    assert third == ["hit 1 " + first[-1].split()[-1]], third  # served from the repaired entry
    assert sorted(cache.glob("jit__lambda-*-cache")) == entries  # no temporary file left beside it
