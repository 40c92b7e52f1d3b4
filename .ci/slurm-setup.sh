#!/usr/bin/env bash
# CI: what tests/test_slurm.py needs: Debian's Slurm (slurmctld, slurmd, client) and munge
# from apt, and snakemake-executor-plugin-slurm from pip into the active Python.
#
# Idempotent (installs only what is missing) and always exits 0: when something cannot be
# installed it says why, and test_slurm.py then skips with that reason. The last line is
# `slurm-setup: ready` when everything is in place; .ci/run can then set
# KORA_REQUIRE_SLURM=1 so that a broken cluster fails the test instead of skipping it.
# About 40 s on a fresh Debian 12 machine (apt ~20 s, pip ~20 s).
set -uo pipefail
cd "$(dirname "$0")/.."

say() { echo "slurm-setup: $*"; }
PYTHON=${PYTHON:-python}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

have_slurm() {
  local cmd
  for cmd in munged munge slurmctld slurmd sbatch squeue scontrol srun; do
    command -v "$cmd" >/dev/null 2>&1 || return 1
  done
}

ok=1

# --- Slurm and munge (apt)
if have_slurm; then
  say "slurm and munge already installed"
elif [ "$(id -u)" != 0 ]; then
  say "not root: cannot apt-get install slurm-wlm munge; the Slurm test will skip"
  ok=0
elif ! command -v apt-get >/dev/null 2>&1; then
  say "no apt-get (not Debian/Ubuntu): install Slurm and munge yourself; the Slurm test will skip"
  ok=0
else
  say "apt-get install slurmctld slurmd slurm-client munge"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get update -qq >/tmp/slurm-setup-apt.log 2>&1; then
    say "apt-get update failed (see /tmp/slurm-setup-apt.log): $(tail -2 /tmp/slurm-setup-apt.log)"
  fi
  if ! apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge \
    >>/tmp/slurm-setup-apt.log 2>&1; then
    say "apt-get install failed (see /tmp/slurm-setup-apt.log): $(tail -3 /tmp/slurm-setup-apt.log)"
  fi
  if have_slurm; then
    say "installed $(slurmctld -V 2>/dev/null)"
  else
    say "Slurm programs still missing after apt-get; the Slurm test will skip"
    ok=0
  fi
fi

# --- the executor plugin (pip, into the Python that runs the tests)
if "$PYTHON" -c "import snakemake_executor_plugin_slurm" >/dev/null 2>&1; then
  say "snakemake-executor-plugin-slurm already installed"
elif "$PYTHON" -m pip install --quiet -e ".[cluster]"; then
  say "installed the cluster extra (snakemake-executor-plugin-slurm)"
else
  say "pip install -e '.[cluster]' failed; the Slurm test will skip"
  ok=0
fi

if [ "$ok" = 1 ] && [ "$(id -u)" = 0 ]; then
  say "ready"
else
  say "not ready (the Slurm test will skip)"
fi
exit 0
