#!/usr/bin/env bash
# CI: install and start the single-node SLURM test cluster (munge, slurmctld, slurmd,
# slurmdbd + MariaDB for sacct, two fake GPUs) so that tests/test_workflow_slurm.py runs
# instead of skipping. Needs root and apt (Debian 12). Idempotent: does nothing when the
# cluster is already up. Stop it with cluster_profiles/slurm-local/down.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "slurm-up.sh: not root; cannot install SLURM here (the slurm tests will skip)" >&2
  exit 1
fi
start=$SECONDS
cluster_profiles/slurm-local/up.sh
sinfo
echo "slurm-up.sh: cluster ready in $((SECONDS - start)) s"
