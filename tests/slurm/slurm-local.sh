#!/usr/bin/env bash
# slurm-local.sh -- a real Slurm on this one machine, for the slurm tests and for developers.
#
#   tests/slurm/slurm-local.sh install   # apt-get install munge slurmctld slurmd slurm-client (root)
#   tests/slurm/slurm-local.sh start     # config + munged + slurmctld + one slurmd per fake node
#   tests/slurm/slurm-local.sh status    # sinfo of the fake nodes; exit 1 when not up
#   tests/slurm/slurm-local.sh stop      # stop exactly the daemons `start` started (PID files)
#   tests/slurm/slurm-local.sh check     # can this machine run it at all? (root + apt-get); prints why not
#
# The cluster: nodes n1..nN (default 2), all on 127.0.0.1, each advertising CPUs, memory and
# fake GPUs (gres entries backed by character devices, copies of /dev/null), partition `gpu`.
# No accounting (no slurmdbd): snakemake must poll with `--slurm-status-command squeue`.
# Env knobs: SLURM_LOCAL_DIR (state, logs, PIDs; default /tmp/kanscale-slurm),
#   SLURM_LOCAL_NODES (2), SLURM_LOCAL_GPUS (fake GPUs per node, 2), SLURM_LOCAL_CPUS (per node, 4),
#   SLURM_LOCAL_MEM_MB (per node, 8000), SLURM_LOCAL_APT_UPDATE (1: apt-get update before install),
#   SLURM_LOCAL_EMULATE (1: each slurmd in its own network namespace and CPU set of the emulated
#   cluster `slurm`, workflow/scripts/launch/netemu.py: n<i> at 198.18.2.<i>, slurmctld on the
#   bridge's 198.18.2.254; a point with an emulated link shapes its nodes' links itself).
#
# Traps this script avoids (see shared/research/slurm-local.md):
# * the config must be /etc/slurm/slurm.conf: the snakemake jobstep plugin strips SLURM_CONF
#   (with every other SLURM_* variable) before the rule runs, so the rule's srun would not find it;
# * gres.conf File= must name character devices, or slurmd reports 0 GPUs and the node goes INVAL;
# * the fake node names must resolve (torchrun's rendezvous endpoint is the first node's name):
#   `start` adds one marked line to /etc/hosts, `stop` removes it;
# * MinJobAge must be >= 3 x the plugin's init-seconds-before-status-checks or the plugin
#   switches from squeue back to sacct, which fails without slurmdbd and hangs snakemake.
set -euo pipefail

BASE=${SLURM_LOCAL_DIR:-/tmp/kanscale-slurm}
NUM_NODES=${SLURM_LOCAL_NODES:-2}
NUM_GPUS=${SLURM_LOCAL_GPUS:-2}
NUM_CPUS=${SLURM_LOCAL_CPUS:-4}
MEM_MB=${SLURM_LOCAL_MEM_MB:-8000}
HOSTS_MARK="# kanscale slurm-local fake nodes"
EMULATE=${SLURM_LOCAL_EMULATE:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
# cluster.py imports the workflow's packages (launch, kan): the checkout's .venv has them installed
PY=python3
[ -x "$HERE/../../.venv/bin/python" ] && PY="$HERE/../../.venv/bin/python"
CLUSTER="$PY $HERE/../../workflow/scripts/cluster.py"
EMU_NET=198.18.2
PKGS="munge slurmctld slurmd slurm-client"

say() { printf '[slurm-local %s] %s\n' "$(date +%T)" "$*" >&2; }

# Why this machine cannot run a local Slurm, or nothing when it can.
why_not() {
  if [ "$(id -u)" != 0 ]; then echo "not root (needs root to install packages and start slurmd)"; return; fi
  if ! command -v apt-get >/dev/null && ! command -v slurmctld >/dev/null; then
    echo "no apt-get and no Slurm installed (needs Debian/Ubuntu)"; return
  fi
}

do_check() {
  local why; why=$(why_not)
  if [ -n "$why" ]; then echo "cannot run a local Slurm: $why"; return 1; fi
  echo "ok"
}

do_install() {
  local why; why=$(why_not)
  [ -z "$why" ] || { say "cannot install: $why"; return 1; }
  # shellcheck disable=SC2086
  if dpkg -s $PKGS >/dev/null 2>&1; then slurmctld -V; return 0; fi
  export DEBIAN_FRONTEND=noninteractive
  # keep package scripts from starting munge/slurm daemons that we would not own
  local made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  [ "${SLURM_LOCAL_APT_UPDATE:-1}" = 1 ] && apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
  [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  slurmctld -V
}

# one NodeName line for all nodes on 127.0.0.1, or (emulated) one per node at its own address
node_lines() {
  local i common="CPUs=$NUM_CPUS RealMemory=$MEM_MB Gres=gpu:$NUM_GPUS State=UNKNOWN"
  if [ "$EMULATE" = 1 ]; then
    for i in $(seq 1 "$NUM_NODES"); do
      echo "NodeName=n$i NodeHostname=localhost NodeAddr=$EMU_NET.$i Port=$((17000 + i)) $common"
    done
  else
    echo "NodeName=n[1-$NUM_NODES] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[17001-$((17000 + NUM_NODES))] $common"
  fi
}

write_conf() {
  local ctl last i
  ctl=$(hostname -s)
  # emulated: the controller listens on the bridge's address, which every node's namespace reaches
  [ "$EMULATE" = 1 ] && ctl="$ctl($EMU_NET.254)"
  last=$((NUM_GPUS - 1))
  mkdir -p /etc/slurm "$BASE/state" "$BASE/log" "$BASE/run" "$BASE/fakedev"
  for i in $(seq 1 "$NUM_NODES"); do mkdir -p "$BASE/run/slurmd-n$i"; done
  for i in $(seq 0 "$last"); do
    # a copy of /dev/null; where mknod is not allowed (some containers) a link to it also works
    [ -c "$BASE/fakedev/nvidia$i" ] || mknod "$BASE/fakedev/nvidia$i" c 1 3 2>/dev/null \
      || ln -sf /dev/null "$BASE/fakedev/nvidia$i"
  done
  if [ -e /etc/slurm/slurm.conf ] && ! grep -q "kanscale slurm-local" /etc/slurm/slurm.conf; then
    cp /etc/slurm/slurm.conf "$BASE/slurm.conf.before"   # someone else's: keep a copy
  fi
  cat > /etc/slurm/slurm.conf <<CONF
# kanscale slurm-local (tests/slurm/slurm-local.sh); state in $BASE
ClusterName=kanscale
SlurmctldHost=$ctl
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/run/slurmd-%n
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
# a pending job that cannot start keeps the jobs behind it from the main scheduler; backfill
# starts them, every 30 s by default: each second here (2 nodes, a few jobs: no cost)
SchedulerParameters=bf_interval=1
# each fake node claims $NUM_CPUS CPUs, more than this machine may have
SlurmdParameters=config_overrides
ReturnToService=2
# squeue must still know finished jobs when snakemake polls (>= 3 x init-seconds-before-status-checks)
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
GresTypes=gpu
$(node_lines)
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  printf 'AutoDetect=off\nNodeName=n[1-%s] Name=gpu File=%s/fakedev/nvidia[0-%s]\n' \
    "$NUM_NODES" "$BASE" "$last" > /etc/slurm/gres.conf
  if ! grep -q "$HOSTS_MARK" /etc/hosts; then
    local names short; names=$(seq -f 'n%g' -s ' ' 1 "$NUM_NODES"); short=$(hostname -s)
    # slurmctld must resolve its own SlurmctldHost; fresh CI machines do not always
    getent hosts "$short" >/dev/null || echo "127.0.0.1 $short $HOSTS_MARK" >> /etc/hosts
    if [ "$EMULATE" = 1 ]; then
      for i in $(seq 1 "$NUM_NODES"); do echo "$EMU_NET.$i n$i $HOSTS_MARK" >> /etc/hosts; done
    else
      echo "127.0.0.1 $names $HOSTS_MARK" >> /etc/hosts
    fi
  fi
}

is_up() { [ -s "$BASE/run/slurmctld.pid" ] && kill -0 "$(cat "$BASE/run/slurmctld.pid")" 2>/dev/null; }

# $BASE is in a shared /tmp by default: another user could have made it first (or a symlink in its
# place) and planted PID files that `stop` would kill, or configs the daemons read. Use it only if
# it is a real directory of ours that nobody else can write.
check_base() {
  if [ -L "$BASE" ] || { [ -e "$BASE" ] && { [ "$(stat -c %u "$BASE")" != "$(id -u)" ] \
       || [ -n "$(find "$BASE" -maxdepth 0 -perm /022)" ]; }; }; then
    echo "slurm-local: $BASE is not ours alone (a symlink, another user's, or writable by others);" \
         "remove it or set SLURM_LOCAL_DIR" >&2
    exit 1
  fi
}

do_start() {
  check_base
  mkdir -p -m 0755 "$BASE"
  if is_up; then say "already running (state in $BASE)"; do_status; return; fi
  command -v slurmctld >/dev/null || { say "Slurm is not installed: run '$0 install' first"; return 1; }
  write_conf
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    cp /run/munge/munged.pid "$BASE/run/munged.pid"   # ours to stop
    munge -n | unmunge >/dev/null
  fi
  local i idx ns addr cpus
  if [ "$EMULATE" = 1 ]; then
    $CLUSTER up slurm "$NUM_NODES" > "$BASE/run/cluster.txt"
  fi
  slurmctld -i                                   # forks; PID file in $BASE/run
  # the daemon writes its PID file after the fork returns: wait for it (at most 10 s), or the owner
  # record below reads an empty PID (seen once in CI: "cat: .../slurmctld.pid: No such file")
  for _ in $(seq 1 40); do [ -s "$BASE/run/slurmctld.pid" ] && break; sleep 0.25; done
  if [ ! -s "$BASE/run/slurmctld.pid" ]; then
    say "slurmctld wrote no PID file in 10 s"
    tail -n 30 "$BASE"/log/*.log || true
    return 1
  fi
  if [ "$EMULATE" = 1 ]; then
    # the cluster is stale when slurmctld is gone (kill -9 included): the next start or
    # `make cluster-down` removes it
    $CLUSTER owner slurm "$(cat "$BASE/run/slurmctld.pid")"
    while read -r idx ns addr cpus; do
      # nsenter joins only the network namespace: `ip netns exec` would also remount /sys, hiding
      # /sys/fs/cgroup, without which slurmd does not start
      nsenter --net="/run/netns/$ns" taskset -c "$cpus" slurmd -N "n$((idx + 1))"
    done < "$BASE/run/cluster.txt"
  else
    for i in $(seq 1 "$NUM_NODES"); do slurmd -N "n$i"; done
  fi
  for _ in $(seq 1 120); do
    if [ "$(sinfo -h -o '%T' 2>/dev/null | sort -u)" = idle ]; then do_status; return 0; fi
    sleep 0.5
  done
  say "nodes did not become idle"
  sinfo -N -o '%N %T %E' || true
  tail -n 30 "$BASE"/log/*.log || true
  return 1
}

do_status() {
  is_up || { echo "slurm-local: not running (state dir $BASE)"; return 1; }
  sinfo -N -o '%N %T cpus=%c mem=%m gres=%G'
}

stop_pid() {
  local f=$1 p
  [ -s "$f" ] || return 0
  p=$(cat "$f")
  if kill -0 "$p" 2>/dev/null; then
    kill "$p"
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
  fi
  rm -f "$f"
}

do_stop() {
  local f h
  check_base
  # cancel what is still queued or running so that no job outlives the cluster
  if is_up; then scancel --quiet --user="$(id -un)" 2>/dev/null || true; sleep 1; fi
  for f in "$BASE"/run/slurmd-n*.pid; do [ -e "$f" ] && stop_pid "$f"; done
  stop_pid "$BASE/run/slurmctld.pid"
  stop_pid "$BASE/run/munged.pid"
  # an emulated cluster of an earlier start (whatever SLURM_LOCAL_EMULATE says now)
  if [ -e "$BASE/run/cluster.txt" ]; then $CLUSTER down slurm >/dev/null || true; rm -f "$BASE/run/cluster.txt"; fi
  # rewrite in place (works where /etc/hosts is a bind mount)
  h=$(grep -v "$HOSTS_MARK" /etc/hosts || true)
  printf '%s\n' "$h" > /etc/hosts
  # forget jobs: the next start begins with job ids and queue state from scratch
  rm -rf "$BASE/state"
  # no slurm.conf naming a controller that is gone: every Slurm client (squeue, the executor
  # plugin's `scontrol show config` when snakemake starts) would retry it for ~10 s; someone
  # else's earlier conf comes back
  if grep -qs "kanscale slurm-local" /etc/slurm/slurm.conf; then
    if [ -e "$BASE/slurm.conf.before" ]; then mv "$BASE/slurm.conf.before" /etc/slurm/slurm.conf
    else rm -f /etc/slurm/slurm.conf; fi
  fi
  say "stopped"
}

case "${1:-}" in
  check) do_check ;;
  install) do_install ;;
  start) do_start ;;
  status) do_status ;;
  stop) do_stop ;;
  *) echo "usage: $0 check|install|start|status|stop" >&2; exit 2 ;;
esac
