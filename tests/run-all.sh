#!/usr/bin/env bash
# `make test`: every test, in two phases, so that CI stays under its 15 minutes on 2 cores.
#
# Phase 1 runs two things at once:
#   - tests/slurm: a real Slurm on localhost runs each point as a job that starts interpreters one
#     after another (the executor plugin's snakemake, the launcher, torchrun, the ranks); its points
#     run strictly one after another (each --exclusive), so it waits more than it computes;
#   - beside it, one after another: tests/unit and tests/distributed (no scheduler and no network
#     namespace, so they share nothing with a Slurm job but the CPUs: ports are picked free; the
#     warm-start server they stop at the end is the checkout's own, and the Slurm session leaves it
#     alone), then the end-to-end tests on two xdist workers, a test file per worker (a file's
#     study fixture runs once); they wait on snakemake, warm starts and subprocesses a third of the
#     time. A warm server inside a Slurm job is never stopped by a test session.
# Phase 2 runs what needs the machine to itself: the emulated cluster (its network namespaces and
#   link-rate checks; the Slurm's emulated mode in phase 1 uses the same kind of namespaces).
# Each step prints its wall time and how busy the CPUs were (/proc/stat), so the next split is
# chosen on numbers. Measured on a 2-core machine, 2026-12-07: with the end-to-end tests after the
# Slurm session (three phases), 825 s of pytest: Slurm 489 s, beside it unit + distributed 286 s and
# three end-to-end files 131 s (the Slurm session ran 72 s alone at its end), the other end-to-end
# tests 224 s after it, the emulated cluster 112 s. After (clean clone, same machine): 700 s;
# phase 1 590 s (unit + distributed 297 s, busy 88%; end to end 293 s, busy 92%; the Slurm session,
# 489 s, ended first), phase 2 110 s at 42% busy. The exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ALONE=(tests/e2e/test_emulated.py)
log=$(mktemp -t kanscale-slurm-tests.XXXXXX)
slurm=""
trap '[ -n "$slurm" ] && kill "$slurm" 2>/dev/null; rm -f "$log"' EXIT

# BUSY: the share of CPU time (all cores) not idle since the last call of mark_cpu, from /proc/stat
cpu_mark=""
BUSY=""
mark_cpu() {
  local now; now=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat 2>/dev/null)
  BUSY=""
  if [ -n "$cpu_mark" ] && [ -n "$now" ]; then
    BUSY=$(echo "$cpu_mark $now" | awk '{t = ($3 - $1) + ($4 - $2); if (t > 0) printf "busy %.0f%%", 100 * ($3 - $1) / t}')
  fi
  cpu_mark=$now
}
start=$(date +%s)
step=$start
lap() {  # the step's wall time and CPU share, and the total so far
  local now; now=$(date +%s)
  mark_cpu
  echo "---- $1: $((now - step)) s, ${BUSY:-busy ?} ($((now - start)) s so far)"
  step=$now
}
mark_cpu
KANSCALE_TESTS_BESIDE=1 "$PY" -m pytest -q -p no:cacheprovider --durations=15 tests/slurm >"$log" 2>&1 &
slurm=$!
"$PY" -m pytest -q --durations=15 tests/unit tests/distributed
rc_unit=$?
lap "unit, distributed (beside Slurm)"
ignore=(--ignore=tests/slurm --ignore=tests/unit --ignore=tests/distributed)
for f in "${ALONE[@]}"; do ignore+=(--ignore="$f"); done
"$PY" -m pytest -q -n 2 --dist loadfile --durations=20 tests "${ignore[@]}"
rc_e2e=$?
lap "end to end, 2 workers (beside Slurm while it runs)"
wait "$slurm"
rc_slurm=$?
slurm=""
echo
echo "---- tests/slurm (ran beside the rest of phase 1) ----"
cat "$log"
lap "phase 1 ends: the Slurm session after the rest"

"$PY" -m pytest -q --durations=5 "${ALONE[@]}"
rc_alone=$?
lap "phase 2: the emulated cluster alone"
echo "---- all phases: $(( $(date +%s) - start )) s (exit: unit+distributed $rc_unit, end to end $rc_e2e," \
     "slurm $rc_slurm, alone $rc_alone)"
for rc in $rc_unit $rc_slurm $rc_e2e $rc_alone; do
  [ "$rc" = 0 ] || exit "$rc"
done
