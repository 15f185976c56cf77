"""Launch one measurement point and commit exactly one record for it.

    python workflow/scripts/launch_point.py --point '<Point JSON>' --launch '<LaunchSettings JSON>' \
        --out results/<study>/points/<id>.json [--retry-token T] [--watch-pid PID]

1. Claim the point (launch/claims.py): a live earlier attempt is waited for, never duplicated.
2. Start its processes (launch/commands.py, launch/procs.py) in a fresh attempt folder
   results/<study>/attempts/<id>/<attempt>/; the trainer writes its record there, torchrun its
   per-rank error files.
3. Commit: a valid ok record from the trainer becomes results/<study>/points/<id>.json (atomic
   rename of a checked record); anything else becomes a failed|oom|timeout|cancelled|killed record
   with the first real cause (launch/failure.py). The committed record is never deleted by a later
   attempt: it is replaced by that attempt's own result, or not at all.
If the process that started the launcher dies (kill -9 of snakemake), the point's processes are
stopped within seconds and nothing is committed. Exit code 0 whenever a record was committed: a
failed point is data, not a crash of the study.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from kan import env as kan_env
from kan.contract import record as records
from kan.contract.point import LaunchSettings, Point, PointError

from . import allocation, claims, commands, failure, isolation, netemu, slurm, tuned
from .procs import ProcessTree, alive

# seconds kept back from the job's time limit to write a timeout record before the scheduler kills us
DEADLINE_MARGIN_S = 45
# an all-reduce sweep that may run on NCCL asks it to say which algorithm and protocol it picks
# (a user's own NCCL_DEBUG settings win); the lines are kept in the record
NCCL_TUNING_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING"}
NCCL_TUNING_WORDS = ("Algo", "algorithm", "Proto", "protocol", "Tuner", "tuner", "TUNING")


def nccl_tuning_lines(lines: list[str], limit: int = 40) -> list[str]:
    """What NCCL said about its algorithm/protocol choice (NCCL_DEBUG_SUBSYS=TUNING), in order, once each."""
    out: list[str] = []
    for line in lines:
        text = line.strip()
        if "NCCL INFO" in text and any(w in text for w in NCCL_TUNING_WORDS) and text not in out:
            out.append(text)
    return out[:limit]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--point", required=True, help="the point as JSON (kan.contract.point.Point.to_json)")
    ap.add_argument("--launch", default="{}", help="launch settings as JSON (kan.contract.point.LaunchSettings)")
    ap.add_argument("--limits", default="{}", help="the study's limits as JSON (kan.contract.point.Limits)")
    ap.add_argument("--out", required=True, help="results/<study>/points/<id>.json")
    ap.add_argument("--runtime-min", type=int, default=None, help="this point's time limit (overrides --launch's)")
    ap.add_argument("--retry-token", default="")
    ap.add_argument("--watch-pid", type=int, default=None,
                    help="stop the point when this process (the snakemake that started us) dies")
    return ap.parse_args(argv)


def oom_kills() -> int:
    """The kernel's OOM-kill counter (/proc/vmstat), plus cgroup v2's when present."""
    total = 0
    for path in (Path("/proc/vmstat"), Path("/sys/fs/cgroup/memory.events")):
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    total += int(value)
        except (OSError, ValueError):
            pass
    return total


def _say(msg: str) -> None:
    print(f"[launch] {msg}", flush=True)


class Launch:
    def __init__(self, point: Point, launch: LaunchSettings, out: Path, retry_token: str, environ: dict,
                 watch_pid: int | None = None) -> None:
        self.point, self.launch, self.out, self.retry_token = point, launch, out, retry_token
        self.environ = environ
        self.job_id = environ.get("SLURM_JOB_ID")
        self.fault = environ.get("KANSCALE_FAULT") or None
        if self.fault not in (None, *commands.FAULTS):
            raise ValueError(f"KANSCALE_FAULT={self.fault!r} is not one of {', '.join(commands.FAULTS)}")
        # KANSCALE_FAULT_POINTS (comma-separated ids): only these points get the fault (a failed
        # point inside a packed allocation, its pack-mates untouched)
        only = environ.get("KANSCALE_FAULT_POINTS")
        if only and point.id not in only.split(","):
            self.fault = None
        self.watch_pid = watch_pid
        self.watch_start = claims.process_start(watch_pid) if watch_pid else None
        self.folder = out.parent.parent / "attempts" / point.id
        self.claim_path = self.folder / "claim.json"
        self.claim = claims.new_claim(self.job_id, records.now_utc(), watch_pid)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self.attempt_dir = self.folder / f"{stamp}-{self.claim.token}"
        self.t0 = time.monotonic()
        self.cluster = None  # the emulated cluster of a point with an emulated link (launch/netemu.py)
        self.network: dict | None = None  # what the record keeps of it
        self.slurm_facts: dict | None = None  # the Slurm job's queue facts and the point's turn in it

    def deadline_s(self) -> float:
        return max(self.launch.runtime_min * 60 - DEADLINE_MARGIN_S - (time.monotonic() - self.t0), 30)

    def warm_in_pack(self) -> bool:
        """A one-node CPU point of kan.train inside a packed allocation: its ranks are forked by the
        allocation's warm-start server (the pack's first point starts it and pays the imports; the
        later points fork in milliseconds). A lone job would pay the same imports either way, a GPU
        point must not fork after CUDA, and a multi-node point's ranks are on other nodes."""
        p = self.point.placement
        return bool(self.launch.warm_start and self.slurm_facts and self.slurm_facts.get("pack")
                    and p.device == "cpu" and p.nodes == 1 and p.launcher == "torchrun"
                    and self.point.model.impl != "pykan")

    def watched_alive(self) -> bool:
        return self.watch_pid is None or alive(self.watch_pid, self.watch_start)

    def run(self) -> int:
        if not self.job_id:
            return self._run()
        # inside a Slurm job: wait for the allocation's turn (a packed job runs several points), then
        # start the point's clock; the job's queue facts go into the record
        results = self.out.parent.parent
        with allocation.Allocation(self.job_id, results / "attempts", results / "packs", self.point.id,
                                   stop=lambda: not self.watched_alive()) as alloc:
            self.t0 = time.monotonic()
            self.slurm_facts = alloc.facts()
            if self.slurm_facts.get("pack") and self._measured_by_this_job():
                return 0
            return self._run()

    def _measured_by_this_job(self) -> bool:
        """A requeued packed allocation runs its points again (the job step forces every target of the
        group): a point this very job recorded ok before the requeue keeps its record."""
        try:
            rec = records.read(self.out, self.point.id)
        except records.InvalidRecord:
            return False
        if rec["status"] == "ok" and ((rec.get("launch") or {}).get("slurm") or {}).get("job_id") == self.job_id:
            _say(f"point {self.point.id}: already recorded ok by this allocation (job {self.job_id}) before it was "
                 f"requeued; kept, not measured again")
            return True
        return False

    def _run(self) -> int:
        p = self.point
        waited: list[claims.Claim] = []
        holder = claims.acquire(self.claim_path, self.claim, wait_s=self.deadline_s(), say=print,
                                stop=lambda: not self.watched_alive(), waited=waited)
        if not self.watched_alive():
            _say(f"pid {self.watch_pid} (snakemake) is gone while waiting for the point's claim: not starting it")
            if holder is None:
                claims.release(self.claim_path, self.claim)
            return 1
        if holder is not None:
            _say(f"point {p.id} is still being measured by {holder.describe()}; not starting a duplicate. "
                 f"Run the workflow again when it has ended.")
            return 3
        try:
            adopted = self._adopt_finished_duplicate(waited)
            if adopted:
                return 0
            return self._measure()
        finally:
            claims.release(self.claim_path, self.claim)

    def _adopt_finished_duplicate(self, waited: list[claims.Claim]) -> bool:
        """A live earlier attempt we waited for may have committed an ok record of this point while we
        waited: keep it (stamped with our retry token) instead of measuring again. Only that attempt's
        record counts (by its claim token), not one that merely finished in the second we started."""
        if not waited:
            return False
        try:
            rec = records.read(self.out, self.point.id)
        except records.InvalidRecord:
            return False
        attempt = str(rec.get("launch", {}).get("attempt", ""))
        if rec["status"] != "ok" or not any(attempt.endswith(f"-{h.token}") for h in waited):
            return False
        rec.setdefault("launch", {})["retry_token"] = self.retry_token
        records.write(self.out, rec)
        _say(f"point {self.point.id}: an earlier attempt finished it while we waited; kept its record")
        return True

    def _commands(self, trainer_out: Path) -> tuple[list[tuple[list[str], dict]], dict]:
        place = self.point.placement
        if self.cluster is not None and not self.job_id:
            cmds = commands.emulated_commands(self.point, self.launch, trainer_out, self.attempt_dir, self.cluster,
                                              self.fault)
            # each node has its own cores: contention is judged per node, as on a real cluster
            return cmds, isolation.local_snapshot(os.getpid(), place.gpus_per_node, place.threads_per_rank,
                                                  cores=len(self.cluster.nodes[0].cpus))
        if self.job_id:
            job = slurm.job_info(self.job_id)
            hosts = slurm.hostnames(job["NodeList"])
            make = commands.packed_local_commands if self.warm_in_pack() else commands.slurm_commands
            cmds = make(self.point, self.launch, trainer_out, self.attempt_dir, self.job_id, hosts, self.fault, job)
            return cmds, isolation.slurm_snapshot(self.job_id, job, hosts)
        cmds = commands.local_commands(self.point, self.launch, trainer_out, self.attempt_dir, self.fault)
        return cmds, isolation.local_snapshot(os.getpid(), place.world_size, place.threads_per_rank)

    def _measure(self) -> int:
        """Measure on this host, or inside the point's Slurm job; a point with an emulated link gets
        a fresh emulated cluster (launch/netemu.py) for the length of the attempt."""
        place = self.point.placement
        if not place.emulated:
            return self._measure_on()
        self.attempt_dir.mkdir(parents=True, exist_ok=True)
        why = netemu.why_not()
        if why:
            return self._commit(records.failure(self.point.to_json(), "failed", f"emulated link: {why}"), None, {})
        link = netemu.Link(place.link_mbit, place.link_burst_kb, place.link_latency_us)
        with contextlib.ExitStack() as stack:
            try:
                session = (self._slurm_link(link) if self.job_id else
                           netemu.session("local", place.nodes, link, owner_pid=os.getpid()))
                self.cluster, self.network = stack.enter_context(session)
            except netemu.EmulationError as e:
                return self._commit(records.failure(self.point.to_json(), "failed", f"emulated link: {e}"), None, {})
            _say(f"emulated cluster: {len(self.cluster.nodes)} nodes, {link.describe()}; probe: "
                 f"{self.network['measured'].get('tcp_rate_mbit', float('nan')):.1f} Mbit/s TCP, "
                 f"RTT {self.network['measured'].get('rtt_us', float('nan')):.0f} us")
            return self._measure_on()

    @contextlib.contextmanager
    def _slurm_link(self, link):
        """Inside a Slurm job on the emulated cluster `slurm` (slurm-local.sh SLURM_LOCAL_EMULATE=1):
        the job's nodes get the point's link for the length of the attempt, then none again."""
        cluster = netemu.from_state("slurm")
        if cluster is None:
            raise netemu.EmulationError("no emulated cluster 'slurm' is up: start the local Slurm with "
                                        "SLURM_LOCAL_EMULATE=1 (tests/slurm/slurm-local.sh)")
        hosts = slurm.hostnames(slurm.job_info(self.job_id)["NodeList"])
        mine = netemu.nodes_at(cluster, [socket.gethostbyname(h) for h in hosts])
        t0 = time.monotonic()
        try:
            netemu.set_link(mine, link)
            measured = netemu.probe(mine, link) if len(mine.nodes) > 1 else {}
            yield mine, netemu.facts(mine, link, measured, time.monotonic() - t0)
        finally:
            try:
                netemu.set_link(mine, None)
            except netemu.EmulationError as e:
                _say(f"could not take the link off the job's nodes: {e}")

    def _measure_on(self) -> int:
        p, launch = self.point, self.launch
        self.attempt_dir.mkdir(parents=True, exist_ok=True)
        trainer_out = self.attempt_dir / "trainer.json"
        if p.allreduce is None and p.train.lr is None:  # training.lr: tuned, and the sweep chose no rate
            return self._commit(records.failure(p.to_json(), "failed", tuned.why_unset(p, tuned.tuning_path(self.out))),
                                None, {})
        try:
            cmds, isolated = self._commands(trainer_out)
        except (OSError, RuntimeError, KeyError, ValueError, subprocess.SubprocessError) as e:
            # scontrol failed, or the job has the wrong node count
            return self._commit(records.failure(p.to_json(), "failed", f"could not build the launch command: "
                                                f"{type(e).__name__}: {e} (log: {self._log_path()})"), None, {})
        if self.fault:
            _say(f"KANSCALE_FAULT={self.fault}: fault injection for tests")
        threads = str(p.placement.threads_per_rank)
        env = {**self.environ, "OMP_NUM_THREADS": threads, "NUMBA_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1"}
        if p.experiment == "allreduce" and p.placement.device != "cpu":
            env = {**NCCL_TUNING_ENV, **env}
        launch_cmd = " & ".join(shlex.join(c) for c, _ in cmds)
        env[kan_env.LAUNCH_CMD] = launch_cmd
        deadline = self.deadline_s()
        _say(f"point {p.id}: {len(cmds)} command(s), deadline {deadline:.0f} s, attempt {self.attempt_dir.name}")
        for c, extra in cmds:
            _say(" ".join(f"{k}={v}" for k, v in extra.items() if k != kan_env.SLURM_REQUEST) + " " + shlex.join(c))
        if isolated["contended"]:
            _say("contended: " + "; ".join(isolated["reasons"]))
        oom_before = oom_kills()
        with claims.Heartbeat(self.claim_path, self.claim):
            # locally, CPU trainers are forked by the warm-start server (launch/warm.py): no import time
            # on Slurm, inside a packed allocation (warm_in_pack)
            warm_device = p.placement.device if launch.warm_start and (not self.job_id or self.warm_in_pack()) else None
            outcome = ProcessTree(cmds, env, warm_device=warm_device).run(deadline, self.watch_pid, self.watch_start)
        oom_killed = oom_kills() > oom_before
        if outcome.stop_signal and self.slurm_facts and self.slurm_facts.get("pack"):
            # a packed allocation cancelled, requeued or at its time limit: not the point's doing, so
            # no record; it stays missing and the next run packs it again (the attempt keeps a note)
            why = (f"the packed allocation (job {self.job_id}) was stopped by "
                   f"{failure.signal_text(outcome.stop_signal)} while this point ran")
            self._note_attempt("cancelled", why + "; no record: the next run packs the point again")
            _say(why + ": committed nothing, the point stays missing")
            return 1
        if outcome.watched_died:
            self._note_attempt("cancelled", f"the process that started this point (pid {self.watch_pid}) died; "
                                            f"stopped the point, nothing committed")
            _say(f"pid {self.watch_pid} (snakemake) is gone: stopped the point's processes, committed nothing")
            return 1
        rec = None
        if not (outcome.timed_out or outcome.stop_signal):
            try:
                rec = records.read(trainer_out, p.id)
            except records.InvalidRecord as e:
                _say(f"no usable trainer record ({e})")
        if rec is not None and rec["status"] == "ok" and "allreduce" in rec and rec.get("backend") == "nccl":
            rec["allreduce"]["nccl_tuning"] = nccl_tuning_lines(outcome.tail)
        if rec is None or rec["status"] != "ok":
            status, reason = failure.classify(
                timed_out=outcome.timed_out, stop_signal=outcome.stop_signal, trainer=rec,
                errors=failure.read_error_files(self.attempt_dir), exit_codes=outcome.exit_codes,
                log_lines=outcome.tail, oom_killed=oom_killed, log_path=self._log_path(),
                runtime_min=launch.runtime_min, first_error_code=outcome.first_error_code)
            rec = records.failure(p.to_json(), status, self._with_link_state(reason),
                                  world_size=p.placement.world_size, num_nodes=p.placement.nodes,
                                  provenance={"launch_command": launch_cmd, "slurm": {"slurm_job_id": self.job_id}})
        if self.network is not None:
            rec["network"] = self.network
        return self._commit(rec, outcome, isolated)

    def _with_link_state(self, reason: str) -> str:
        """A failed point on the emulated cluster: which nodes had lost their link when it ended."""
        if self.cluster is None:
            return reason
        try:
            states = netemu.link_states(self.cluster)
        except (netemu.EmulationError, OSError, subprocess.SubprocessError):
            return reason
        lost = [n for n in self.cluster.nodes if states.get(n.index) != "up"]
        if not lost:
            return reason
        return (reason + "; emulated link down at the end: "
                + ", ".join(f"node {n.index} ({n.address}, {n.namespace}: eth0 {states.get(n.index)})" for n in lost))

    def _commit(self, rec: dict, outcome, isolated: dict) -> int:
        rec["launch"] = {"retry_token": self.retry_token, "attempt": self.attempt_dir.name,
                         "claim": self.claim.describe(), "exit_codes": outcome.exit_codes if outcome else [],
                         "wall_s": outcome.wall_s if outcome else 0.0, "settings": self.launch.to_json(),
                         "started": outcome.started if outcome else [],
                         "isolation": isolated}
        if self.slurm_facts is not None:
            rec["launch"]["slurm"] = self.slurm_facts
        if not claims.holds(self.claim_path, self.claim):  # cannot happen unless someone removed our claim
            _say("lost the point's claim while it ran: committing nothing")
            return 1
        records.write(self.out, rec)
        self._note_attempt(rec["status"], rec.get("reason") or "")
        wall = f" (wall {outcome.wall_s:.1f} s)" if outcome else ""
        _say(f"point {self.point.id} recorded as {rec['status']}"
             + (f": {rec['reason']}" if rec.get("reason") else "") + wall)
        return 0

    def _log_path(self) -> str:
        """The point's log, as the workflow names it (results/<study>/logs/<id>.log)."""
        return str(self.out.parent.parent / "logs" / f"{self.point.id}.log")

    def _note_attempt(self, status: str, reason: str) -> None:
        """A line of history next to the attempt's files (the committed record is in points/)."""
        self.attempt_dir.mkdir(parents=True, exist_ok=True)
        records.write(self.attempt_dir / "outcome.json", {"status": status, "reason": reason,
                                                          "finished_utc": records.now_utc()})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        point = Point.from_json({**json.loads(args.point), "limits": json.loads(args.limits)})
        launch = LaunchSettings.from_json(json.loads(args.launch))
        if args.runtime_min is not None:
            launch = dataclasses.replace(launch, runtime_min=args.runtime_min)
    except (ValueError, PointError) as e:
        print(f"[launch] bad --point/--launch: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.stem != point.id:
        print(f"[launch] --out {out} does not name point {point.id}", file=sys.stderr)
        return 2
    return Launch(point, launch, out, args.retry_token, dict(os.environ), args.watch_pid).run()
