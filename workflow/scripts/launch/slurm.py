"""Small wrappers around scontrol and squeue (each call bounded by a timeout)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

from kan.contract import record as records

TIMEOUT_S = 60
# the executor plugin's job comment: rule_<rule>_wildcards_<wildcard values joined by _>
COMMENT_PREFIX = "rule_measure_point_wildcards_"
# a packed allocation (a Snakemake group, plan/packs.py) is named after its group: rule_<group>_<rules>
PACK_COMMENT = re.compile(r"rule_(kanpack-[A-Za-z0-9-]+)_")


def _run(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout


def job_info(job_id: str) -> dict:
    """The job's fields from `scontrol show job -o` (NodeList, NumNodes, OverSubscribe, ...)."""
    out = _run("scontrol", "show", "job", "-o", job_id)
    # one line of Key=Value pairs; values have no spaces except Command=/WorkDir= paths at the end
    return dict(m.groups() for m in re.finditer(r"(\S+?)=(\S*)", out))


def hostnames(nodelist: str) -> list[str]:
    return _run("scontrol", "show", "hostnames", nodelist).split()


def jobs_on_nodes(hosts: list[str]) -> list[dict]:
    try:
        out = _run("squeue", "-h", "-w", ",".join(hosts), "-o", "%i|%u|%T|%j")
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [ln.split("|", 3) for ln in out.splitlines() if ln.count("|") == 3]
    return [{"job_id": r[0], "user": r[1], "state": r[2], "name": r[3]} for r in rows]


def available() -> bool:
    return shutil.which("squeue") is not None


def controller_refuses(conf: Path | None = None) -> bool:
    """True when slurm.conf names the controller(s) and each refuses a TCP connection: nothing listens
    there, and squeue would fail after ~10 s of retries (measured 9.0 s) with the same answer, no
    jobs known. Anything else (no slurm.conf, configless Slurm, a timeout, DNS) is left to squeue."""
    conf = conf or Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    try:
        text = conf.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    hosts = re.findall(r"^[ \t]*(?:SlurmctldHost|ControlMachine)[ \t]*=[ \t]*([^\s(#]+)(?:\(([^)\s]+)\))?", text,
                       re.M | re.I)
    port = re.search(r"^[ \t]*SlurmctldPort[ \t]*=[ \t]*(\d+)", text, re.M | re.I)
    if not hosts:
        return False
    for name, addr in hosts:
        try:
            socket.create_connection((addr or name, int(port.group(1)) if port else 6817), timeout=1.0).close()
            return False
        except ConnectionRefusedError:
            continue
        except OSError:
            return False
    return True


def pack_of_comment(comment: str) -> str | None:
    """The pack's group id in a packed allocation's job comment, else None."""
    m = PACK_COMMENT.match(comment)
    return m.group(1) if m else None


def point_jobs(study: str, packs: Path | None = None) -> dict[str, dict]:
    """{point id: {job_id, state, reason, submitted[, pack]}} of this user's pending or running
    measure_point jobs of `study`, from squeue (the plugin's job comment names the rule and the
    wildcards; a packed allocation's names its group, whose points are in `packs`/<group>.json).
    {} without squeue, without a listening controller, or when squeue fails: then nothing is known
    to be running."""
    if not available() or controller_refuses():
        return {}
    try:
        out = _run("squeue", "--me", "-h", "-t", "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED",
                   "-o", "%i|%T|%k|%r|%V")
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_point_jobs(out, study, packs)


def read_manifest(packs: Path, gid: str) -> dict | None:
    """results/<study>/packs/<group id>.json (plan/packs.py), or None: another study's pack (its
    manifest is in its own results folder), or an unreadable file."""
    try:
        manifest = json.loads((packs / f"{gid}.json").read_text())
        return manifest if isinstance(manifest.get("points"), list) else None
    except (OSError, ValueError, AttributeError):
        return None


def recorded_by(record_path: Path, job_id: str) -> bool:
    """The point's record was written inside Slurm job `job_id` (launch/allocation.py facts)."""
    try:
        rec = records.read(record_path, record_path.stem)
    except records.InvalidRecord:
        return False
    return ((rec.get("launch") or {}).get("slurm") or {}).get("job_id") == job_id


def parse_point_jobs(squeue_out: str, study: str, packs: Path | None) -> dict[str, dict]:
    """A live pack's points, less those it has already recorded (its records are in packs/../points)."""
    prefix = f"{COMMENT_PREFIX}{study}_"
    jobs = {}
    for ln in squeue_out.splitlines():
        parts = ln.split("|", 4)
        if len(parts) != 5:
            continue
        job = {"job_id": parts[0], "state": parts[1], "reason": parts[3], "submitted": parts[4]}
        if parts[2].startswith(prefix):
            jobs[parts[2][len(prefix):]] = job
        gid = pack_of_comment(parts[2])
        manifest = read_manifest(packs, gid) if gid and packs is not None else None
        for pid in (manifest or {}).get("points", []):
            if not recorded_by(packs.parent / "points" / f"{pid}.json", job["job_id"]):
                jobs[pid] = {**job, "pack": gid}
    return jobs
