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
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "setup-system: ok ($PKGS)"
