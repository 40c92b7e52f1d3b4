#!/usr/bin/env bash
# Stop the cluster that tests/slurm/start.sh started in STATE_DIR: its jobs, slurmd,
# slurmctld and munged, each by the pid in its pid file. Safe to run twice.
set -uo pipefail

STATE_DIR=${1:?usage: stop.sh STATE_DIR}
[ -d "$STATE_DIR" ] || exit 0

if [ -f "$STATE_DIR/slurm.conf" ] && command -v scancel >/dev/null 2>&1; then
  SLURM_CONF="$STATE_DIR/slurm.conf" scancel --user "$(id -un)" >/dev/null 2>&1 || true
fi

stop_pid_file() {
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$file"
}

stop_pid_file "$STATE_DIR/slurmd.pid"
stop_pid_file "$STATE_DIR/slurmctld.pid"
stop_pid_file "$STATE_DIR/munged.pid"
exit 0
