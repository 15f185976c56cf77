"""The summary table of benchmarks/device_check.sh: the seed paper's 1-GPU point eager against
captured (training.cuda_graphs), from the two JSON files benchmarks/paper_point.py --json wrote,
with the targets for the captured run (a step of at most 0.5 ms, 40 epochs in at most 2 s of
training, the eager run's held-out loss).

    python benchmarks/paper_summary.py EAGER.json CAPTURED.json

The two runs share the seed, the data and the initial weights, but they are not the same run: the
summary names each difference (the captured run drops the partial batch, uses capturable Adam, and
runs no comm-probe steps, whose flat all-reduce the eager run's training clock includes) and compares
training time per step, like with like, beside the totals. A relative difference of the held-out
losses above SAME_LOSS means the captured step trains differently. A missing or failed run is a row
that says so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SAME_LOSS = 0.02  # relative; float-order differences over 7,840 steps are far below this
STEP_MS, TRAIN_S = 0.5, 2.0  # the targets for the captured paper point (40 epochs)


def load(path: str) -> dict:
    p = Path(path)
    if not p.is_file():
        return {"status": "missing", "reason": f"{p} was not written (not run here, or stopped before it ended)"}
    return json.loads(p.read_text())


def row(name: str, r: dict) -> str:
    if r.get("status") != "ok":
        return f"| {name} | {r.get('status')}: {r.get('reason')} | | | | | | |"
    an = r.get("anatomy") or {}
    kernels = f"{an.get('ops_per_step')} {an.get('ops_kind', '')}".strip()
    if r.get("cuda_graphs"):  # counted on the eager step (eager_ops_per_step); a replay launches one graph
        kernels = (f"one graph launch (the eager step it replays: {an.get('eager_ops_per_step')} "
                   f"{an.get('ops_kind', '')})").replace(" )", ")")
    return (f"| {name} | {r['step_ms']:.3f} | {kernels} | {an.get('bound')} | {r['train_time_s']:.2f} "
            f"| {r['test_loss']:.4g} | {r['epochs']} | {(r.get('kernels') or {}).get('path')} |")


def verdicts(eager: dict, captured: dict) -> list[str]:
    if captured.get("status") != "ok":
        return [f"captured: no verdict ({captured.get('status')}: {captured.get('reason')})"]
    out = [f"captured step {captured['step_ms']:.3f} ms {'<=' if captured['step_ms'] <= STEP_MS else '>'} "
           f"{STEP_MS} ms: {'met' if captured['step_ms'] <= STEP_MS else 'NOT met'}"]
    if captured["epochs"] == 40:
        ok = captured["train_time_s"] <= TRAIN_S
        out.append(f"captured training {captured['train_time_s']:.2f} s {'<=' if ok else '>'} {TRAIN_S} s: "
                   f"{'met' if ok else 'NOT met'}")
    if eager.get("status") == "ok":
        rel = abs(captured["test_loss"] - eager["test_loss"]) / max(abs(eager["test_loss"]), 1e-12)
        out.append(f"held-out loss captured {captured['test_loss']:.4g} vs eager {eager['test_loss']:.4g}: "
                   f"{100 * rel:.2f}% apart, {'same' if rel <= SAME_LOSS else 'DIFFERENT'} (limit {100 * SAME_LOSS:.0f}%)")
        out.append(f"captured / eager: step {eager['step_ms'] / captured['step_ms']:.1f}x shorter, training "
                   f"{eager['train_time_s'] / captured['train_time_s']:.1f}x shorter")
        out += differences(eager, captured)
    return out


def differences(eager: dict, captured: dict) -> list[str]:
    """What differs between the two runs besides capture, and the training time per step (like with like)."""
    out = []
    se, sc = eager.get("steps_per_epoch"), captured.get("steps_per_epoch")
    if se and sc and se != sc:
        out.append(f"not the same run: the captured run drops the partial batch ({sc} steps an epoch against {se})")
    if eager.get("optimizer") and eager.get("optimizer") != captured.get("optimizer"):
        out.append(f"not the same run: optimizer {captured.get('optimizer')} captured, {eager.get('optimizer')} eager")
    if eager.get("probe_every"):
        out.append(f"not the same run: one eager step in {eager['probe_every']} is a comm probe (no_sync, then an "
                   "untimed flat all-reduce inside the training clock); the captured run has none")
    if eager.get("steps") and captured.get("steps"):
        pe, pc = 1e3 * eager["train_time_s"] / eager["steps"], 1e3 * captured["train_time_s"] / captured["steps"]
        out.append(f"training time per step (like with like): eager {pe:.3f} ms, captured {pc:.3f} ms ({pe / pc:.1f}x)")
    return out


def main(argv: list[str]) -> int:
    eager, captured = load(argv[0]), load(argv[1])
    print("| run | median step (ms) | operators or kernels per step | bound | training (s) | held-out loss | epochs "
          "| B-spline kernels |")
    print("|---|---:|---|---|---:|---:|---:|---|")
    print(row("eager", eager))
    print(row("captured (training.cuda_graphs)", captured))
    print()
    for line in verdicts(eager, captured):
        print(f"- {line}")
    for name, r in (("eager", eager), ("captured", captured)):
        if (r.get("kernels") or {}).get("why"):
            timed_as = r["kernels"].get("timed_as")
            print(f"- {name} kernels: {r['kernels']['path']}: {r['kernels']['why']}"
                  + (f" (timed on {timed_as})" if timed_as else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
