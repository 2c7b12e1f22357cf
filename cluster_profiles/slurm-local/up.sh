#!/usr/bin/env bash
# Stand up a real single-node SLURM cluster on this machine (Debian 12, run as root):
# munged + slurmctld + slurmd, and by default slurmdbd with MariaDB so that `sacct` works.
# Two fake GPUs are offered as gres (char devices made with mknod, like /dev/null).
# Facts behind every choice here: ../shared/slurm-notes.md (no systemd: daemons start from
# their binaries; sacct needs accounting storage; a node drained earlier must be resumed).
#
#   cluster_profiles/slurm-local/up.sh [--no-accounting]
#
# Job memory is enforced (task/cgroup, ConstrainRAMSpace) where the cgroup v1 memory
# controller is mounted, as on most clusters, so a job over its --mem ends OUT_OF_MEMORY;
# elsewhere it is not enforced. /run/saferl-slurm/mode says which (memory=cgroup|none).
#
# Environment: SLURM_LOCAL_CPUS (CPUs advertised to SLURM, default 8: oversubscribes on
# purpose so that several tiny jobs run at once), SLURM_LOCAL_GPUS (fake GPUs, default 2).
# The daemons it starts are recorded (name pid) in /run/saferl-slurm/started; down.sh
# stops exactly those. Rerunning while the cluster is up does nothing.
set -euo pipefail

accounting=1
for arg in "$@"; do
  case "$arg" in
    --no-accounting) accounting=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "up.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

[ "$(id -u)" = 0 ] || { echo "up.sh: must run as root (it installs packages and starts daemons)" >&2; exit 1; }

state_dir=/run/saferl-slurm
started="$state_dir/started"
marker="# written by saferl-eval cluster_profiles/slurm-local/up.sh"
host=$(hostname -s)
cpus=${SLURM_LOCAL_CPUS:-8}
gpus=${SLURM_LOCAL_GPUS:-2}

log() { echo "up.sh: $*"; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid_of_started() { [ -f "$started" ] && awk -v n="$1" '$1 == n {print $2}' "$started" | tail -1; }
record() { echo "$1 $2" >> "$started"; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then echo "up.sh: timed out waiting for $what" >&2; return 1; fi
    sleep 0.2
  done
}

# ---- already up? -------------------------------------------------------------------
if alive "$(pid_of_started slurmctld)" && alive "$(pid_of_started slurmd)"; then
  log "cluster already up (see $started)"; exit 0
fi

# ---- packages ------------------------------------------------------------------------
pkgs=(slurmctld slurmd slurm-client munge)
[ $accounting = 1 ] && pkgs+=(slurmdbd mariadb-server)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  # Postinst scripts cannot start services here (no systemd); that is expected.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$state_dir"
: > "$started.new"; mv "$started.new" "$started"

# ---- refuse to overwrite a slurm.conf that is not ours -------------------------------
conf=/etc/slurm/slurm.conf
if [ -f "$conf" ] && ! grep -qF "$marker" "$conf"; then
  echo "up.sh: $conf exists and was not written by this script; refusing to overwrite it" >&2
  exit 1
fi

# ---- munge ---------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  log "creating /etc/munge/munge.key"
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge; chown munge:munge /run/munge
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged
  wait_for 10 munged test -s /run/munge/munged.pid
  record munged "$(cat /run/munge/munged.pid)"
fi

# ---- fake GPUs -----------------------------------------------------------------------
mkdir -p /run/fakegpu
for ((i = 0; i < gpus; i++)); do
  [ -c /run/fakegpu/gpu$i ] || mknod -m 666 /run/fakegpu/gpu$i c 1 3
done

# ---- configuration -------------------------------------------------------------------
mkdir -p /etc/slurm /var/log/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd
chown slurm:slurm /var/log/slurm /var/lib/slurm/slurmctld
real_mem=$(/usr/sbin/slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
node_mem=$((real_mem * 85 / 100))

# Memory enforcement needs the cgroup v1 memory controller (22.05's cgroup/v2 needs systemd),
# in which slurmd can make a cgroup with a limit: tried here first.
memcg_works() {
  local probe=/sys/fs/cgroup/memory/saferl-slurm-probe
  mkdir "$probe" 2>/dev/null || return 1
  echo $((64 << 20)) > "$probe/memory.limit_in_bytes" 2>/dev/null; local ok=$?
  rmdir "$probe"; return $ok
}
if memcg_works; then memory=cgroup; task_plugin=task/cgroup; else memory=none; task_plugin=task/none; fi
printf '%s\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n' "$marker" > /etc/slurm/cgroup.conf

if [ $accounting = 1 ]; then
  acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux"
else
  acct="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
fi

cat > "$conf.tmp" <<CONF
$marker
ClusterName=localcluster
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=$task_plugin
MpiDefault=none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
MinJobAge=300
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
KillWait=30
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
$acct
GresTypes=gpu
NodeName=$host CPUs=$cpus RealMemory=$node_mem Gres=gpu:$gpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
mv "$conf.tmp" "$conf"

last=$((gpus - 1))
if [ $gpus -gt 1 ]; then files="/run/fakegpu/gpu[0-$last]"; else files=/run/fakegpu/gpu0; fi
printf '%s\nAutoDetect=off\nNodeName=%s Name=gpu File=%s\n' "$marker" "$host" "$files" > /etc/slurm/gres.conf

# ---- accounting: MariaDB + slurmdbd --------------------------------------------------
if [ $accounting = 1 ]; then
  mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    log "initialising the MariaDB data directory"
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  fi
  if ! mariadb-admin --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1; then
    nohup /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/saferl-mariadbd.pid \
      --socket=/run/mysqld/mysqld.sock --skip-networking >/var/log/slurm/mariadbd.log 2>&1 &
    record mariadbd $!
    wait_for 30 MariaDB mariadb-admin --socket=/run/mysqld/mysqld.sock ping
  fi
  db_pass_file=/etc/slurm/.slurmdbd-db-pass
  [ -s "$db_pass_file" ] || { head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$db_pass_file"; chmod 600 "$db_pass_file"; }
  db_pass=$(cat "$db_pass_file")
  mariadb --socket=/run/mysqld/mysqld.sock <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$db_pass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$db_pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
  cat > /etc/slurm/slurmdbd.conf.tmp <<CONF
$marker
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=/run/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
CONF
  chown slurm:slurm /etc/slurm/slurmdbd.conf.tmp; chmod 600 /etc/slurm/slurmdbd.conf.tmp
  mv /etc/slurm/slurmdbd.conf.tmp /etc/slurm/slurmdbd.conf
  rm -f /run/slurmdbd.pid
  /usr/sbin/slurmdbd
  wait_for 20 slurmdbd test -s /run/slurmdbd.pid
  record slurmdbd "$(cat /run/slurmdbd.pid)"
  wait_for 30 "slurmdbd to answer" sacctmgr -n show cluster
fi

# ---- slurmctld + slurmd --------------------------------------------------------------
rm -f /run/slurmctld.pid /run/slurmd.pid
/usr/sbin/slurmctld
wait_for 20 slurmctld test -s /run/slurmctld.pid
record slurmctld "$(cat /run/slurmctld.pid)"
wait_for 30 "slurmctld to answer" scontrol ping
/usr/sbin/slurmd
wait_for 20 slurmd test -s /run/slurmd.pid
record slurmd "$(cat /run/slurmd.pid)"

# A node drained by an earlier bad registration stays drained after a fix: resume it.
node_ready() { sinfo -h -n "$host" -o '%t' | grep -Eq '^(idle|mix|alloc)'; }
deadline=$((SECONDS + 30))
until node_ready; do
  scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
  if [ $SECONDS -ge $deadline ]; then
    echo "up.sh: node $host is not ready: $(sinfo -h -n "$host" -o '%t %E')" >&2; exit 1
  fi
  sleep 0.5
done
printf 'accounting=%s\nmemory=%s\n' "$( [ $accounting = 1 ] && echo slurmdbd || echo none )" "$memory" > "$state_dir/mode"
log "cluster up: node $host, $cpus CPUs, $gpus fake GPUs, accounting $( [ $accounting = 1 ] && echo slurmdbd || echo none ), memory enforced by $memory"
