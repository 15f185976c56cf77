#!/usr/bin/env bash
# `make test`: every test, in two phases, so that CI stays under its 15 minutes on 2 cores.
#
# Phase 1 runs two pytest sessions at once:
#   - tests/slurm: a real Slurm on localhost runs each point as a job that starts interpreters one
#     after another (the executor plugin's snakemake, the launcher, torchrun, the ranks), so the
#     machine's second core is mostly free (measured 2026-12-05: 270 s of wall time; its points ran
#     strictly one after another, each --exclusive);
#   - tests/unit and tests/distributed beside it: no scheduler and no network namespace, so they
#     share nothing with a Slurm job but the CPUs (ports are picked free; the warm-start server
#     they stop at the end is the checkout's own, and the Slurm session leaves it alone).
# Phase 2 runs every other test (tests/e2e and whatever is added beside it) alone: the emulated
#   cluster's namespaces and its link-rate checks want the machine to themselves, and the Slurm's
#   emulated mode (phase 1) uses the same kind of namespaces, so the two never overlap.
# Serially the suite took 881 s of pytest on CI's 2 cores; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
log=$(mktemp -t kanscale-slurm-tests.XXXXXX)
slurm=""
trap '[ -n "$slurm" ] && kill "$slurm" 2>/dev/null; rm -f "$log"' EXIT

start=$(date +%s)
KANSCALE_TESTS_BESIDE=1 "$PY" -m pytest -q -p no:cacheprovider --durations=15 tests/slurm >"$log" 2>&1 &
slurm=$!
"$PY" -m pytest -q --durations=15 tests/unit tests/distributed
rc_rest=$?
wait "$slurm"
rc_slurm=$?
slurm=""
echo
echo "---- tests/slurm (ran beside tests/unit and tests/distributed) ----"
cat "$log"
echo "---- phase 1: $(( $(date +%s) - start )) s"

"$PY" -m pytest -q --durations=20 tests --ignore=tests/slurm --ignore=tests/unit --ignore=tests/distributed
rc_e2e=$?
echo "---- all phases: $(( $(date +%s) - start )) s (unit+distributed exit $rc_rest, slurm exit $rc_slurm, rest exit $rc_e2e)"
for rc in $rc_rest $rc_slurm $rc_e2e; do
  [ "$rc" = 0 ] || exit "$rc"
done
