#!/usr/bin/env bash
# The checks to run when a GPU is at hand (benchmarks/gpu_check.py prints them as one table).
#
#   bash benchmarks/gpu_check.sh download [PYTHON_VERSION]  # where the package index is reachable
#   bash benchmarks/gpu_check.sh run [gpu_check.py options]  # on the GPU machine, no network needed
#   bash benchmarks/gpu_check.sh small                       # CPU-sized (tests/test_gpu_check.py)
#   bash benchmarks/gpu_check.sh flags [gpu_check.py options] # throughput under each XLA_FLAGS setting
#
# `download` puts the wheels a GPU machine with JAX (CUDA), optax, numpy, pandas, pyarrow, scipy
# and PyYAML lacks for the CRAX backend (crax-bench, MuJoCo, MJX and their small dependencies,
# about 40 MB) into benchmarks/wheels/ (git-ignored), for the GPU's Python version (default:
# this one's). `run` installs them from there without an index when crax is missing, then runs
# the checks at the paper's sizes (about 8 minutes on one H200). On the CPU the bitwise rows need
# XLA without FMA contraction, so `small` sets XLA_FLAGS=--xla_cpu_max_isa=AVX. `flags` times the
# built-in batched pack of 96 (default) once per setting in $GPU_CHECK_XLA_FLAGS (';'-separated,
# the first empty: XLA's defaults), each in a fresh process, so a GEMM or autotuning flag's gain
# is a ratio measured in one session.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=benchmarks/wheels
PYTHON=${PYTHON:-python3}
# CRAX and what importing its tasks needs beyond JAX, optax, numpy, scipy and PyYAML; installed
# without dependency resolution, because flax's declared checkpointing stack (orbax,
# tensorstore: another 27 MB) is never imported by the tasks, and JAX must stay the GPU's build
CRAX_WHEELS="crax-bench==0.1.0 mujoco>=3.11,<3.12 mujoco-mjx>=3.11,<3.12 flax jaxopt ml-collections etils
  absl-py glfw pyopengl trimesh pillow msgpack rich markdown-it-py mdurl pygments typing-extensions fsspec
  importlib-resources zipp"

case "${1:-}" in
  download)
    version=${2:-$($PYTHON -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}
    mkdir -p "$WHEELS"
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    # shellcheck disable=SC2086  # the list splits into one requirement a word
    $PYTHON -m pip download --quiet --no-deps --dest "$WHEELS" --only-binary=:all: --python-version "$version" \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
      --platform any $CRAX_WHEELS
    echo "gpu_check: $(ls "$WHEELS" | wc -l) wheels, $(du -sh "$WHEELS" | cut -f1), for Python $version in $WHEELS/"
    ;;
  run)
    shift
    if ! $PYTHON -c 'import crax' 2>/dev/null; then
      if [ -d "$WHEELS" ]; then
        $PYTHON -m pip install --quiet --no-index --no-deps "$WHEELS"/*.whl
      else
        echo "gpu_check: crax-bench is not installed and $WHEELS/ is missing (run 'download' first): CRAX rows skip" >&2
      fi
    fi
    exec $PYTHON benchmarks/gpu_check.py "$@"
    ;;
  flags)
    shift
    IFS=';' read -r -a settings <<< "${GPU_CHECK_XLA_FLAGS:-;--xla_gpu_triton_gemm_any=true;--xla_gpu_autotune_level=0}"
    for setting in "${settings[@]}"; do
      XLA_FLAGS="$setting" $PYTHON benchmarks/gpu_check.py --backends builtin --checks throughput --sizes 96 \
        --label " [XLA_FLAGS=${setting:-default}]" "$@"
    done
    ;;
  small)
    shift
    XLA_FLAGS=--xla_cpu_max_isa=AVX exec $PYTHON benchmarks/gpu_check.py --small "$@"
    ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]
    ;;
esac
