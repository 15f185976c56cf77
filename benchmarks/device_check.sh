#!/usr/bin/env bash
# GPU readiness in one shot: everything kanscale has that only a GPU can run, in one call of at most
# 7 minutes on one GPU (BUDGET_S, default 400 s, so that a second call fits the device's 15 minutes
# with its starts), into one results file. Every step runs under `timeout` at its own share of the
# budget (SHARE below, in % of BUDGET_S), never more than what is left; a step with under 20 s left is
# skipped and named. Each step's output streams into OUT_DIR/steps.log as it comes (a step that is
# cut keeps what it printed); device_check.md is written first and gets each step's last 60 lines and
# exit status as the step ends. Without CUDA it runs what it can on the CPU, says clearly what it
# skipped, and exits 0.
#
#   bash benchmarks/device_check.sh [OUT_DIR] [--quick]
#   REHEARSE=1 bash benchmarks/device_check.sh DIR     the rehearsal, on any machine (see below)
#
# REHEARSE=1: the same steps, --quick, with every Python it starts held to the GPU machine's image
# (benchmarks/rehearse/sitecustomize.py: a package the image lacks fails to import, as it would there,
# where nothing can be installed); every test file the GPU run would run must collect. Run it before
# spending device time (tests/e2e/test_device_check.py does).
#
# OUT_DIR defaults to $OUT (the device tool's output folder) or results/device-check. --quick
# shortens every step (used by the CPU test of this script). Parts, most wanted first:
#   1. the machine: GPU, driver, Python, torch, CUDA, NCCL, Triton, numba
#   2. the CUDA-only tests (fused Triton kernels against the eager path, a captured step's loss
#      curve against the eager one over 50 steps) and the layer/trainer/anatomy unit tests
#   3. the seed paper's 1-GPU point end to end (python -m kan.train, 40 epochs, [2,64,1], batch 512;
#      the paper: 900.6 s on an A100), eager and then captured (training.cuda_graphs), each with its
#      step's anatomy (fixed cost, kernels per step, bound); the summary table at the end compares
#      them against the captured paper point's targets (captured step <= 0.5 ms, <= 2 s of training, same held-out loss)
#   4. the layer benchmark on CUDA: kanscale vs inkan vs efficient-kan vs the MLP, float32, batch
#      4096, then 16384 if time is left (peers only where present: .peers/inkan,
#      .peers/efficient-kan/src; nothing can be downloaded on the device machine, so carry them)
#   5. the tiny study on the GPU: NCCL at world size 1, then 2 ranks on the one GPU (NCCL refuses
#      two ranks on one device; the record then says so)
#   6. DDP's hooks (none, fp16, bf16, PowerSGD) and NCCL's Ring / Tree (benchmarks/device_ddp.py): at
#      2 ranks with two GPUs (or on the CPU with gloo, where bf16 is a failed point naming why), else
#      at world size 1 on the one GPU, which checks that each runs under NCCL and says so
# Interpreter: .venv/bin/python when it exists, else python3 (the device machine's, which has torch).
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${OUT:-results/device-check}
QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    *) OUT_DIR=$a ;;
  esac
done
REHEARSE=${REHEARSE:-0}
[ "$REHEARSE" = 1 ] && QUICK=1
mkdir -p "$OUT_DIR"
RES="$OUT_DIR/device_check.md"
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
# no install on the device machine (nothing can be fetched there): its python3 finds the project's
# packages (kan/ and workflow/scripts/*, what pyproject.toml installs elsewhere) through PYTHONPATH
export PYTHONPATH="$PWD:$PWD/workflow/scripts${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# the rehearsal's import guard goes first: it is what every Python of the check imports on start-up
[ "$REHEARSE" = 1 ] && export PYTHONPATH="$PWD/benchmarks/rehearse:$PYTHONPATH"
# the test files the GPU run runs (part 2): the rehearsal collects every one of them
GPU_TESTS=(tests/unit/test_layers.py tests/unit/test_bases.py tests/unit/test_train_cli.py tests/unit/test_graphs.py
           tests/unit/test_anatomy.py)
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-400}
LOG="$OUT_DIR/steps.log"
# each step's share of the budget, in % (they sum to 100): its own time limit, BUDGET_S x share / 100
declare -A SHARE=([machine]=4 [nvidia-smi]=2 [collect]=6 [tests]=18 [capture]=6 [paper-eager]=12
                  [paper-captured]=12 [bench]=8 [points]=12 [ddp]=12)  # bench: each of its two batches

say() { printf '%s\n' "$*" | tee -a "$RES"; }
section() { say ""; say "## $*"; }
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
run() {  # run SHARE_KEY NAME CMD...: a step under its share of the budget (and never more than is left),
  # its output streamed to steps.log, its last lines (fenced) into the results file; never stops the script
  local key=$1 name=$2; shift 2
  local t=$(date +%s) lim=$(( $(left) - 10 )) own=$(( BUDGET_S * ${SHARE[$key]} / 100 ))
  if [ "$lim" -lt 20 ]; then say ""; say "$name: skipped, out of time ($(left) s of ${BUDGET_S} s left)"; return; fi
  [ "$own" -lt "$lim" ] && lim=$own
  say ""; say "\`\`\`"; say "\$ $*"
  local from=$(( $(stat -c %s "$LOG") + 1 ))
  printf '\n=== %s (%s s at most) ===\n' "$name" "$lim" >> "$LOG"
  timeout -k 5 "$lim" "$@" >> "$LOG" 2>&1
  local rc=$?
  tail -c +"$from" "$LOG" | tail -n +3 | tail -n 60 | tee -a "$RES"
  [ "$rc" = 124 ] && say "(stopped at its ${lim} s: ${SHARE[$key]}% of the ${BUDGET_S} s budget, or what was left)"
  say "\`\`\`"
  say "$name: exit $rc, $(( $(date +%s) - t )) s"
}

: > "$RES"
: > "$LOG"
say "# kanscale device check"
say "date $(date -u +%FT%TZ), host $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty)'), quick=$QUICK, rehearse=$REHEARSE"
[ "$REHEARSE" = 1 ] && say "rehearsal: imports held to the GPU machine's image (benchmarks/gpu-image-packages.txt)"

section "1. machine"
CUDA=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
run machine machine "$PY" - <<'EOF'
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("gpu", p.name, f"{p.total_memory / 2**30:.0f} GiB", p.multi_processor_count, "SMs", "nccl",
          ".".join(map(str, torch.cuda.nccl.version())))
else:
    print("no CUDA device: the GPU parts below are skipped, the CPU ones run")
for mod in ("triton", "numba"):
    try:
        print(mod, __import__(mod).__version__)
    except Exception as e:
        print(mod, "not importable:", type(e).__name__)
EOF
command -v nvidia-smi >/dev/null && run nvidia-smi nvidia-smi nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
if [ "$CUDA" != 1 ]; then
  say ""
  say "**No CUDA device.** Skipped: the CUDA-only tests, the CUDA layer benchmark, the paper's point"
  say "on a GPU and the GPU study. What runs instead: the unit tests, a short CPU benchmark, the"
  say "paper's point on the CPU (quick mode: 2 epochs) and the tiny study's launcher on the CPU."
fi

section "2. tests"
if [ "$REHEARSE" = 1 ]; then  # what the GPU run's pytest would collect, under the image's packages
  run collect "collect (the GPU run's test files)" "$PY" -m pytest --collect-only -q -p no:cacheprovider "${GPU_TESTS[@]}"
fi
if "$PY" -c 'import pytest' 2>/dev/null && [ "$CUDA" != 1 ] && [ $QUICK = 1 ]; then
  # no GPU and --quick (the CPU test of this script): the layer tests are the unit suite's own, run there
  run tests tests "$PY" -m pytest -q -p no:cacheprovider -rs tests/unit/test_train_cli.py
elif "$PY" -c 'import pytest' 2>/dev/null; then
  run tests tests "$PY" -m pytest -q -p no:cacheprovider -rs "${GPU_TESTS[@]}"
else
  say "skipped: pytest is not importable by $PY"
fi
run capture "capture check (kan/probes/capture.py; on CUDA held against real captures)" "$PY" benchmarks/capture_check.py --json "$OUT_DIR/capture_check.json"

section "3. the seed paper's 1-GPU point, eager and captured"
if [ "$CUDA" = 1 ]; then
  EPOCHS=40; [ $QUICK = 1 ] && EPOCHS=2
  run paper-eager "paper point eager (cuda, $EPOCHS epochs)" "$PY" benchmarks/paper_point.py --device cuda --threads 1 \
    --epochs $EPOCHS --json "$OUT_DIR/paper_eager.json"
  run paper-captured "paper point captured (cuda, $EPOCHS epochs)" "$PY" benchmarks/paper_point.py --device cuda --threads 1 \
    --epochs $EPOCHS --cuda-graphs --json "$OUT_DIR/paper_captured.json"
else
  run paper-eager "paper point (cpu, 2 epochs)" "$PY" benchmarks/paper_point.py --device cpu --epochs 2 \
    --json "$OUT_DIR/paper_eager.json"
  say "paper point captured: skipped, a CUDA graph needs a CUDA device"
fi

section "4. layer benchmark"
PEERS=()
[ -d .peers/inkan ] && PEERS+=(--inkan-path .peers/inkan) && IMPL_PEERS=",inkan"
[ -d .peers/efficient-kan/src ] && PEERS+=(--efficient-kan-path .peers/efficient-kan/src) && IMPL_PEERS="${IMPL_PEERS:-},efficient-kan"
[ ${#PEERS[@]} -eq 0 ] && say "peers: none carried (.peers/inkan, .peers/efficient-kan/src): kanscale vs the MLP only"
if [ "$CUDA" = 1 ]; then
  ROUNDS=2; [ $QUICK = 1 ] && ROUNDS=1
  for batch in 4096 16384; do  # each at its own share: parts 5 and 6 keep their time
    run bench "bench cuda batch $batch" "$PY" benchmarks/bench_layers.py --device cuda --workload all --batch $batch \
      --rounds $ROUNDS --steps 50 --impls "kanscale,kanscale-eager,mlp${IMPL_PEERS:-}" "${PEERS[@]}" \
      --json "$OUT_DIR/bench_cuda_$batch.json"
  done
else
  run bench "bench cpu (small)" "$PY" benchmarks/bench_layers.py --device cpu --workload small --rounds 1 --steps 10 \
    --impls kanscale,mlp
fi

section "5. the tiny study on the device"
DEV=cpu; [ "$CUDA" = 1 ] && DEV=cuda
run points "points on $DEV" "$PY" benchmarks/device_points.py --device $DEV --out "$OUT_DIR/points"

section "6. DDP settings on the device"
Q=(); [ $QUICK = 1 ] && Q=(--quick)
run ddp "ddp settings on $DEV" "$PY" benchmarks/device_ddp.py --device $DEV --out "$OUT_DIR/ddp" "${Q[@]}"

section "7. summary: the paper's point, eager against captured"
"$PY" benchmarks/paper_summary.py "$OUT_DIR/paper_eager.json" "$OUT_DIR/paper_captured.json" | tee -a "$RES"
# what the capture itself costs (the eager warm-up and the capture, off the training clock: kan/startup.py),
# beside the "<= 2 s of training" target, which counts the training clock only
"$PY" - "$OUT_DIR/paper_captured.json" <<'EOF' | tee -a "$RES"
import json, sys
from pathlib import Path
p = Path(sys.argv[1])
r = json.loads(p.read_text()) if p.is_file() else {}
cap = (r.get("capture") or {}).get("capture_s")
if r.get("status") != "ok" or cap is None:
    print("- capture cost: not known (no captured run, or its record predates the start-up parts)")
else:
    print(f"- capture cost (eager warm-up + capture, off the clock): {cap:.2f} s, beside {r['train_time_s']:.2f} s of "
          f"captured training (target <= 2 s, the training clock only): {cap + r['train_time_s']:.2f} s together; "
          f"the whole start-up {r['startup_s']:.2f} s")
EOF

section "done"
# at most 8 files come back from the device machine: the points' records, attempts and logs travel as one
# archive (device_check.md, steps.log, the JSON summaries and runs.tar.gz stay beside it: 8 at most)
RUNS=()
for d in points ddp attempts logs; do [ -d "$OUT_DIR/$d" ] && RUNS+=("$d"); done
if [ ${#RUNS[@]} -gt 0 ] && tar -czf "$OUT_DIR/runs.tar.gz" -C "$OUT_DIR" "${RUNS[@]}"; then
  (cd "$OUT_DIR" && rm -rf "${RUNS[@]}")
  say "runs: ${RUNS[*]} packed into runs.tar.gz"
fi
say "files: $(find "$OUT_DIR" -type f | wc -l) in $OUT_DIR"
say "total $(( $(date +%s) - T0 )) s; results in $RES"
exit 0
