#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for tests: munged, slurmctld and slurmd (Debian 12's
# slurm-wlm 22.05 and munge), all state, logs and sockets under DIR, listening on 127.0.0.1 only,
# on two free ports. No cgroups: ProctrackType=proctrack/linuxproc, TaskPlugin=task/none.
#
#   scripts/slurm_local.sh start DIR [OWNER_PID]  starts it; prints SLURM_CONF=DIR/slurm.conf.
#                                                 With OWNER_PID, a watchdog stops the cluster
#                                                 when that process ends (a test that crashed).
#   scripts/slurm_local.sh stop DIR               cancels every job, stops every daemon and job
#                                                 process of the cluster; idempotent.
#
# Exit status 77 (with one line on stderr saying why) when no cluster can run here: not root, or
# the packages missing (scripts/setup.sh installs them); a test skips then. Anything else that
# keeps the cluster from coming up (munge, slurmctld or slurmd failing to start, the node never
# becoming idle) is a failure, exit status 1: a line saying what, then the last lines of the
# daemons' logs, on stderr.
set -euo pipefail

die_skip() {
  echo "slurm_local: $*" >&2
  exit 77
}

# The last lines of each of the named logs that exist (a daemon that dies before it opens its log
# leaves its error in DIR/log/*.out).
log_tails() {
  local log
  for log in "$@"; do
    [ -s "$log" ] || continue
    echo "--- last lines of $log:"
    tail -n 20 "$log"
  done
}

# A cluster that should have come up and did not: exit 1 with the reason and the logs' last lines
# (log_tails, taken before stopping the cluster, whose shutdown would bury them) on stderr.
die() {
  echo "slurm_local: $1" >&2
  [ -z "${2:-}" ] || printf '%s\n' "$2" >&2
  exit 1
}

pid_of() { [ -s "$1" ] && cat "$1" 2>/dev/null || true; }

# Ends a process by its id: TERM, then KILL after a few seconds.
end_pid() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local dir=$1 conf=$1/slurm.conf
  [ -d "$dir" ] || return 0
  local watchdog
  watchdog=$(pid_of "$dir/watchdog.pid")
  [ "$watchdog" = $$ ] || end_pid "$watchdog"  # the watchdog execs this stop itself
  if [ -f "$conf" ] && [ -s "$dir/slurmctld.pid" ]; then
    SLURM_CONF=$conf timeout 10 scancel --full --quiet --user=root 2>/dev/null || true
  fi
  end_pid "$(pid_of "$dir/slurmd.pid")"
  end_pid "$(pid_of "$dir/slurmctld.pid")"
  # Job steps (slurmstepd) and the jobs' processes can outlive slurmd: find them by the cluster's
  # configuration file in their environment (the daemons started with it exported, and sbatch
  # passes it on to the jobs), which only this cluster's processes carry.
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    grep -qzxF "SLURM_CONF=$conf" "/proc/$p/environ" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true
  done
  end_pid "$(pid_of "$dir/munge/munged.pid")"
  rm -f "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid" "$dir/watchdog.pid"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local dir owner=${2:-}
  [ "$(id -u)" -eq 0 ] || die_skip "not root: slurmd must run jobs as their user (run the test as root)"
  for c in munged mungekey slurmctld slurmd sbatch scontrol squeue scancel sinfo python3; do
    command -v "$c" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$c" >/dev/null 2>&1 ||
      die_skip "$c not found: install slurm-wlm and munge (scripts/setup.sh does)"
  done
  export PATH=$PATH:/usr/sbin
  mkdir -p "$1"
  dir=$(cd "$1" && pwd)
  local conf=$dir/slurm.conf
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  chmod 700 "$dir" "$dir/munge"

  # munge: its own key and socket, so it neither needs nor disturbs a system munged.
  [ -s "$dir/munge/munge.key" ] ||
    mungekey --create --keyfile="$dir/munge/munge.key" --bits=1024 >"$dir/log/mungekey.out" 2>&1 ||
    die "mungekey could not create a key" "$(log_tails "$dir/log/mungekey.out")"
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
    >>"$dir/log/munged.out" 2>&1 ||
    die "munged did not start" "$(log_tails "$dir/log/munged.out" "$dir/log/munged.log")"

  local ctld_port slurmd_port cpus
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
  cpus=$(nproc)
  : >"$dir/plugstack.conf"
  cat >"$conf" <<CONF
# One-node test cluster (scripts/slurm_local.sh): 127.0.0.1 only, state under $dir.
ClusterName=hgtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
MinJobAge=600
KillWait=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$conf
  local logs
  if ! slurmctld -f "$conf" -i >>"$dir/log/slurmctld.out" 2>&1; then
    logs=$(log_tails "$dir/log/slurmctld.out" "$dir/log/slurmctld.log")
    stop "$dir"
    die "slurmctld did not start" "$logs"
  fi
  if ! slurmd -f "$conf" -N localhost >>"$dir/log/slurmd.out" 2>&1; then
    logs=$(log_tails "$dir/log/slurmd.out" "$dir/log/slurmd.log")
    stop "$dir"
    die "slurmd did not start" "$logs"
  fi
  if [ -n "$owner" ]; then
    (
      trap '' HUP
      while kill -0 "$owner" 2>/dev/null && [ -s "$dir/slurmctld.pid" ]; do sleep 1; done
      env -u SLURM_CONF "$0" stop "$dir"
    ) </dev/null >>"$dir/log/watchdog.log" 2>&1 &
    echo $! >"$dir/watchdog.pid"
  fi
  # Ready when the node is idle.
  local state=""
  for _ in $(seq 150); do
    state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.2
  done
  if [ "$state" != idle ]; then
    logs=$(log_tails "$dir/log/slurmd.out" "$dir/log/slurmd.log" "$dir/log/slurmctld.out" "$dir/log/slurmctld.log")
    stop "$dir"
    die "the node did not become idle within 30 s (state '${state}')" "$logs"
  fi
  echo "SLURM_CONF=$conf"
}

case "${1:-}" in
  start) [ $# -ge 2 ] || { echo "usage: $0 start DIR [OWNER_PID]" >&2; exit 2; }; start "${@:2}" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 start DIR [OWNER_PID] | stop DIR" >&2; exit 2 ;;
esac
