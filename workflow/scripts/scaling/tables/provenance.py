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
    out["imported"] = imported(records)
    return out


def imported(records: list[dict | None]) -> dict | None:
    """What the records measured elsewhere say of themselves (plan/imports.py imported_record): how many,
    from where, measured on what, and what they lack; None when every record was measured here."""
    sources = [r["source"] for r in records if isinstance(r, dict) and (r.get("source") or {}).get("kind") == "imported"]
    if not sources:
        return None
    pick = lambda key: sorted({str(s.get(key)) for s in sources if s.get(key)})  # noqa: E731
    lacks = []
    for s in sources:
        lacks += [x for x in s.get("lacks") or [] if x not in lacks]
    return {"num_records": len(sources), "paths": pick("path"), "citations": pick("cited"),
            "hardware": pick("hardware"), "lacks": lacks}
