"""Provenance of a study, read from its point records (which are never modified): the distinct
hosts, devices, software versions, commits and Slurm jobs that produced the measurements."""

from __future__ import annotations

FIELDS = ("hostnames", "device_names", "device_types", "backends", "torch", "cuda", "nccl", "python", "platform",
          "git", "slurm_job_ids", "launchers")


def provenance(records: list[dict | None]) -> dict:
    """{field: sorted distinct values} over the records that exist (any status)."""
    seen: dict[str, set] = {f: set() for f in FIELDS}
    num = 0
    for rec in records:
        if not isinstance(rec, dict):
            continue
        num += 1
        prov = rec.get("provenance") or {}
        for r in rec.get("ranks") or []:
            if r.get("hostname"):
                seen["hostnames"].add(str(r["hostname"]))
            if r.get("device_name"):
                seen["device_names"].add(str(r["device_name"]))
        for field, value in (("device_types", rec.get("device_type")), ("backends", rec.get("backend")),
                             ("launchers", rec.get("launcher")), ("torch", prov.get("torch")),
                             ("cuda", prov.get("cuda")), ("nccl", prov.get("nccl")), ("python", prov.get("python")),
                             ("platform", prov.get("platform"))):
            if value not in (None, ""):
                seen[field].add(str(value))
        if prov.get("git_sha"):
            seen["git"].add(f"{prov['git_sha'][:12]}{' (dirty)' if prov.get('git_dirty') else ''}")
        job = (prov.get("slurm") or {}).get("slurm_job_id")
        if job:
            seen["slurm_job_ids"].add(str(job))
    out = {f: sorted(v) for f, v in seen.items()}
    out["num_records"] = num
    return out
