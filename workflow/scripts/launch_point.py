"""Launch one measurement point and make sure it leaves a record.

    python workflow/scripts/launch_point.py --point '<json>' --out results/<study>/points/<id>.json

Builds the torchrun (or srun) command(s) for the point, runs them with a deadline, and if the
training did not write its record (a crash, an OOM kill, a rendezvous that never completed, the
deadline), writes one itself with status failed|oom|timeout and the reason taken from the log.
A failed point is data, not a crash of the study: this script exits 0 whenever a record exists.
Locally (no SLURM_JOB_ID) a point with several nodes runs one torchrun agent per "node" on
127.0.0.1 with c10d rendezvous, so the inter-node code path runs on one machine too.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# seconds kept back from the job's time limit to write a timeout record before the scheduler kills us
DEADLINE_MARGIN_S = 45


def train_argv(point: dict, out: str | Path) -> list[str]:
    """`python -m kan.train` arguments for a point (kan never reads config/)."""
    lo, hi = point["grid_range"]
    echo = {k: point[k] for k in ("id", "study", "experiment", "rep", "nodes", "gpus_per_node", "retry_token",
                                  "runtime_min", "mem_mb", "cpus_per_task", "launcher", "request_gpus", "gpu_type")
            if k in point}
    return [
        "-m", "kan.train",
        "--impl", point["impl"],
        "--basis", point["basis"],
        "--widths", ",".join(map(str, point["widths"])),
        "--grid-size", str(point["grid_size"]),
        "--spline-order", str(point["spline_order"]),
        f"--grid-range={lo},{hi}",
        "--samples", str(point["samples"]),
        "--epochs", str(point["epochs"]),
        "--batch-per-rank", str(point["batch_per_rank"]),
        "--lr", str(point["lr"]),
        "--noise", str(point["noise"]),
        "--seed", str(point["seed"]),
        "--warmup-steps", str(point["warmup_steps"]),
        "--comm-probe-every", str(point["comm_probe_every"]),
        "--max-steps", str(point["max_steps"]),
        "--device", point["device"],
        "--threads", str(point["threads_per_rank"]),
        "--pg-timeout-s", str(point["pg_timeout_s"]),
        "--out", str(out),
        "--point", json.dumps(echo, separators=(",", ":")),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_commands(point: dict, out: str | Path, port: int | None = None) -> list[list[str]]:
    """One torchrun per node on this machine: --standalone for one node, else c10d on 127.0.0.1."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={point['gpus_per_node']}",
                "--max-restarts=0"]
    if point["nodes"] == 1:
        return [torchrun + ["--standalone", "--nnodes=1"] + train_argv(point, out)]
    port = port or free_port()
    agent = torchrun + [
        f"--nnodes={point['nodes']}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        f"--rdzv-id={point['id']}-{os.getpid()}",
        f"--rdzv-conf=join_timeout={point['rdzv_join_s']},read_timeout={point['rdzv_read_s']}",
    ]
    return [agent + train_argv(point, out) for _ in range(point["nodes"])]


# torchrun's rendezvous errors carry no message of their own; say what they mean
FAILURE_HINTS = {
    "RendezvousTimeoutError": "not every node's torchrun agent joined the rendezvous within timeouts.rdzv_join_s "
                              "(an agent did not start, or cannot reach the rendezvous endpoint on the first node)",
    "RendezvousConnectionError": "the rendezvous store on the first node could not be reached within "
                                 "timeouts.rdzv_read_s",
}


def classify_failure(log_tail: list[str], timed_out: bool) -> tuple[str, str]:
    """(status, reason) of a point that left no record, from the last lines of its log."""
    text = "\n".join(log_tail)
    if timed_out:
        return "timeout", "the point exceeded its time limit (resources.runtime_min) and was stopped"
    low = text.lower()
    if "outofmemoryerror" in low or "out of memory" in low:
        status = "oom"
    elif "exitcode  : -9" in text or "exitcode: -9" in text or "signal 9" in low or "sigkill" in low:
        status = "oom"  # the kernel's OOM killer is the usual sender of SIGKILL to a trainer
    else:
        status = "failed"
    for marker in ("RendezvousTimeoutError", "RendezvousConnectionError", "DistNetworkError",
                   "connectFullMesh", "Connection reset by peer", "OutOfMemoryError", "Error", "error"):
        hits = [ln.strip() for ln in log_tail if marker in ln]
        if hits:
            hint = FAILURE_HINTS.get(marker)
            return status, (hits[-1][:1000] + (f" -- {hint}" if hint else ""))
    return status, (log_tail[-1].strip()[:1000] if log_tail else "no output")


def _tee(stream, sink, tail: collections.deque, prefix: str) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        tail.append(line.rstrip("\n"))
        sink.write(prefix + line)
        sink.flush()


def run_commands(cmds: list[list[str]], env: dict, deadline_s: float) -> tuple[list[int], bool, list[str]]:
    """Start every command (own process group), stream their output with a prefix, stop them all
    at the deadline. Returns (exit codes, timed_out, last log lines)."""
    tail: collections.deque = collections.deque(maxlen=60)
    procs, threads = [], []
    for i, cmd in enumerate(cmds):
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        t = threading.Thread(target=_tee, args=(p.stdout, sys.stdout, tail, f"[node{i}] " if len(cmds) > 1 else ""))
        t.start()
        procs.append(p)
        threads.append(t)
    timed_out = False
    end = time.monotonic() + deadline_s
    for p in procs:
        try:
            p.wait(timeout=max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    if timed_out:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        time.sleep(3)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for t in threads:
        t.join(timeout=10)
    return [p.returncode for p in procs], timed_out, list(tail)


def failure_record(point: dict, status: str, reason: str, rcs: list[int], cmds: list[list[str]]) -> dict:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {
        "record_version": 1,
        "point": {**point},
        "status": status,
        "reason": reason,
        "world_size": point["world_size"],
        "num_nodes": point["nodes"],
        "exit_codes": rcs,
        "finished_utc": now,
        "provenance": {"launch_command": " && ".join(shlex.join(c) for c in cmds),
                       "slurm": {"slurm_job_id": os.environ.get("SLURM_JOB_ID")}},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--point", required=True, help="the point as a JSON object (from plan.build_points)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--retry-token", default="")
    args = ap.parse_args(argv)
    point = json.loads(args.point)
    point["retry_token"] = args.retry_token
    out = Path(args.out)
    out.unlink(missing_ok=True)  # a stale record must never pass for this attempt's result

    on_slurm = "SLURM_JOB_ID" in os.environ
    if on_slurm:
        import launch_slurm  # only needed inside a Slurm job

        cmds, env_extra = launch_slurm.commands(point, out, train_argv)
    else:
        cmds, env_extra = local_commands(point, out), {}
    if os.environ.get("KANSCALE_FAULT") == "drop-last-agent" and len(cmds) > 1:
        # fault injection for tests: one node's agent never starts, so the rendezvous cannot complete
        print("[launch] KANSCALE_FAULT=drop-last-agent: not starting the last agent", flush=True)
        cmds = cmds[:-1]
    threads = str(point["threads_per_rank"])
    env = {**os.environ, "OMP_NUM_THREADS": threads, "NUMBA_NUM_THREADS": threads, **env_extra}
    env["KANSCALE_LAUNCH_CMD"] = " && ".join(shlex.join(c) for c in cmds)
    env["PYTHONUNBUFFERED"] = "1"
    deadline = max(point["runtime_min"] * 60 - DEADLINE_MARGIN_S, 30)
    print(f"[launch] point {point['id']}: {len(cmds)} agent(s), deadline {deadline:.0f} s", flush=True)
    for c in cmds:
        print("[launch] " + shlex.join(c), flush=True)
    t0 = time.monotonic()
    rcs, timed_out, tail = run_commands(cmds, env, deadline)
    wall = time.monotonic() - t0
    if out.exists() and not timed_out:
        status = json.loads(out.read_text()).get("status")
        print(f"[launch] point {point['id']} finished: status {status}, exit codes {rcs}, wall {wall:.1f} s")
        return 0
    out.unlink(missing_ok=True)  # a record from an attempt that ran past its deadline is not trusted
    status, reason = classify_failure(tail, timed_out)
    rec = failure_record(point, status, reason, rcs, cmds)
    rec["wall_s"] = wall
    from kan.metrics import write_json_atomic

    write_json_atomic(out, rec)
    print(f"[launch] point {point['id']} recorded as {status}: {reason} (wall {wall:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
