#!/usr/bin/env bash
# README's sweep command on a fresh clone (a new venv, a cold JAX cache), timed:
#   bash benchmarks/fresh_sweep.sh [CLONE_DIR]      (default /tmp/saferl-fresh; it is replaced)
# Prints the wall, user and system time and the load average before and after; the sweep's
# output goes to CLONE_DIR/sweep.log. Then: python benchmarks/sweep_outcome.py CLONE_DIR
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/saferl-fresh}
rm -rf "$dir" && git clone -q "$repo" "$dir" && cd "$dir" || exit 1
cmd=$(sed -n '/<!-- sweep-command -->/,/<!-- \/sweep-command -->/p' README.md | grep -v -e '^<!--' -e '^```')
# a cold compilation cache of its own (the trainer reads $JAX_COMPILATION_CACHE_DIR), not ~/.cache's
export JAX_COMPILATION_CACHE_DIR="$dir/.jax-cache-cold"
echo "sweep command: $cmd"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f "wall %e s, user %U s, system %S s " \
    bash -c "$cmd" > sweep.log 2>&1
status=$?
tail -1 sweep.log
echo "exit $status; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
