#!/usr/bin/env bash
# Stop the daemons that up.sh started - only those, by the PIDs it recorded in
# /run/saferl-slurm/started - in the reverse order of their start. Leaves packages,
# configuration and the accounting database in place, so up.sh starts again quickly.
set -uo pipefail
started=/run/saferl-slurm/started
[ -f "$started" ] || { echo "down.sh: nothing recorded in $started; nothing to stop"; exit 0; }

pid_file_of() {
  case "$1" in
    slurmd) echo /run/slurmd.pid ;; slurmctld) echo /run/slurmctld.pid ;;
    slurmdbd) echo /run/slurmdbd.pid ;; munged) echo /run/munge/munged.pid ;;
    mariadbd) echo /run/mysqld/saferl-mariadbd.pid ;;
  esac
}

tac "$started" | while read -r name pid; do
  [ -n "$pid" ] || continue
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "down.sh: $name ($pid) ignored SIGTERM for 10 s; sending SIGKILL"; kill -KILL "$pid"
    fi
    echo "down.sh: stopped $name ($pid)"
  fi
  # Stale pid files break later package removal (slurmctld's prerm calls scancel).
  f=$(pid_file_of "$name"); [ -n "$f" ] && [ "$(cat "$f" 2>/dev/null)" = "$pid" ] && rm -f "$f"
done
rm -f "$started" /run/saferl-slurm/mode
