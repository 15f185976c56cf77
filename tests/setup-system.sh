#!/usr/bin/env bash
# Install the Debian packages the tests drive for real. Root + apt only; elsewhere the tests that
# need them skip with a reason (under CI=true they fail instead, see tests/conftest.py).
set -euo pipefail
PKGS="chromium fonts-dejavu-core iproute2"  # iproute2: ip, tc for the emulated cluster
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "setup-system: not root or no apt-get; skipping ($PKGS)"; exit 0
fi
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
# the local Slurm's packages too (tests/slurm/slurm-local.sh install keeps their daemons from
# starting), after the same `apt-get update`: one index download instead of two (CI time)
slurm_missing=0
dpkg -s munge slurmctld slurmd slurm-client >/dev/null 2>&1 || slurm_missing=1
export DEBIAN_FRONTEND=noninteractive
if [ -n "$missing" ] || [ "$slurm_missing" = 1 ]; then
  apt-get update -qq
fi
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if [ "$slurm_missing" = 1 ]; then
  SLURM_LOCAL_APT_UPDATE=0 bash "$(dirname "$0")/slurm/slurm-local.sh" install >/dev/null \
    || echo "setup-system: the local Slurm did not install; the Slurm tests will say why"
fi
echo "setup-system: ok ($PKGS, Slurm)"
