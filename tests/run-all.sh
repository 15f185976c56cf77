#!/usr/bin/env bash
# `make test`: every test, in three phases, so that CI stays under its 15 minutes on 2 cores.
#
# Phase 1 runs two pytest sessions at once:
#   - tests/slurm: a real Slurm on localhost runs each point as a job that starts interpreters one
#     after another (the executor plugin's snakemake, the launcher, torchrun, the ranks); its points
#     run strictly one after another (each --exclusive);
#   - tests/unit and tests/distributed beside it: no scheduler and no network namespace, so they
#     share nothing with a Slurm job but the CPUs (ports are picked free; the warm-start server
#     they stop at the end is the checkout's own, and the Slurm session leaves it alone).
# Phase 2 runs the end-to-end tests on two xdist workers, a test file per worker (a file's study
#   fixture runs once): they wait on snakemake, warm starts and subprocesses a third of the time
#   (load average 1.3 on 2 cores when they ran alone).
# Phase 3 runs what needs the machine to itself: the emulated cluster (its network namespaces and
#   link-rate checks; the Slurm's emulated mode in phase 1 uses the same kind of namespaces).
# Measured on a 2-core machine, 2026-12-05: all serially 881 s of pytest in CI (over its limit);
# phase 1 431 s against 535 s for its parts one after another. The exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ALONE=(tests/e2e/test_emulated.py)
log=$(mktemp -t kanscale-slurm-tests.XXXXXX)
slurm=""
trap '[ -n "$slurm" ] && kill "$slurm" 2>/dev/null; rm -f "$log"' EXIT

start=$(date +%s)
KANSCALE_TESTS_BESIDE=1 "$PY" -m pytest -q -p no:cacheprovider --durations=15 tests/slurm >"$log" 2>&1 &
slurm=$!
"$PY" -m pytest -q --durations=15 tests/unit tests/distributed
rc_unit=$?
wait "$slurm"
rc_slurm=$?
slurm=""
echo
echo "---- tests/slurm (ran beside tests/unit and tests/distributed) ----"
cat "$log"
echo "---- phase 1 (slurm | unit, distributed): $(( $(date +%s) - start )) s"

ignore=(--ignore=tests/slurm --ignore=tests/unit --ignore=tests/distributed)
for f in "${ALONE[@]}"; do ignore+=(--ignore="$f"); done
"$PY" -m pytest -q -n 2 --dist loadfile --durations=20 tests "${ignore[@]}"
rc_e2e=$?
echo "---- phase 2 (end to end, 2 workers): $(( $(date +%s) - start )) s so far"

"$PY" -m pytest -q --durations=5 "${ALONE[@]}"
rc_alone=$?
echo "---- all phases: $(( $(date +%s) - start )) s (exit: unit+distributed $rc_unit, slurm $rc_slurm," \
     "end to end $rc_e2e, alone $rc_alone)"
for rc in $rc_unit $rc_slurm $rc_e2e $rc_alone; do
  [ "$rc" = 0 ] || exit "$rc"
done
