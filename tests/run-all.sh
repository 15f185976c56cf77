#!/usr/bin/env bash
# `make test`: every test, in three phases, so that CI stays under its 15 minutes on 2 cores.
#
# Phase 1 runs two pytest sessions at once:
#   - tests/slurm: a real Slurm on localhost runs each point as a job that starts interpreters one
#     after another (the executor plugin's snakemake, the launcher, torchrun, the ranks); its points
#     run strictly one after another (each --exclusive);
#   - tests/unit and tests/distributed beside it: no scheduler and no network namespace, so they
#     share nothing with a Slurm job but the CPUs (ports are picked free; the warm-start server
#     they stop at the end is the checkout's own, and the Slurm session leaves it alone), then
#     the end-to-end files of BESIDE_SLURM (the Slurm session runs ~190 s longer than the unit
#     and distributed tests; a warm server inside a Slurm job is never stopped by a test session).
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
# end-to-end files run in phase 1 after tests/unit and tests/distributed, beside the Slurm session
# (measured 2026-12-06: unit + distributed 282 s, Slurm 471 s; the first two ~130 s of phase 2's work,
# the own-KAN study ~20 s)
BESIDE_SLURM=(tests/e2e/test_adaptive.py tests/e2e/test_lr_tuned_study.py tests/e2e/test_own_kan_study.py)
log=$(mktemp -t kanscale-slurm-tests.XXXXXX)
slurm=""
trap '[ -n "$slurm" ] && kill "$slurm" 2>/dev/null; rm -f "$log"' EXIT

start=$(date +%s)
KANSCALE_TESTS_BESIDE=1 "$PY" -m pytest -q -p no:cacheprovider --durations=15 tests/slurm >"$log" 2>&1 &
slurm=$!
"$PY" -m pytest -q --durations=15 tests/unit tests/distributed
rc_unit=$?
echo "---- unit, distributed: $(( $(date +%s) - start )) s"
"$PY" -m pytest -q --durations=5 "${BESIDE_SLURM[@]}"
rc_beside=$?
wait "$slurm"
rc_slurm=$?
slurm=""
echo
echo "---- tests/slurm (ran beside tests/unit and tests/distributed) ----"
cat "$log"
echo "---- phase 1 (slurm | unit, distributed, then BESIDE_SLURM): $(( $(date +%s) - start )) s"

ignore=(--ignore=tests/slurm --ignore=tests/unit --ignore=tests/distributed)
for f in "${ALONE[@]}" "${BESIDE_SLURM[@]}"; do ignore+=(--ignore="$f"); done
"$PY" -m pytest -q -n 2 --dist loadfile --durations=20 tests "${ignore[@]}"
rc_e2e=$?
echo "---- phase 2 (end to end, 2 workers): $(( $(date +%s) - start )) s so far"

"$PY" -m pytest -q --durations=5 "${ALONE[@]}"
rc_alone=$?
echo "---- all phases: $(( $(date +%s) - start )) s (exit: unit+distributed $rc_unit, beside Slurm $rc_beside," \
     "slurm $rc_slurm, end to end $rc_e2e, alone $rc_alone)"
for rc in $rc_unit $rc_beside $rc_slurm $rc_e2e $rc_alone; do
  [ "$rc" = 0 ] || exit "$rc"
done
