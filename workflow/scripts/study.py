"""kanscale's study commands: look at a study before, while and after it runs. None of them takes
snakemake's lock or runs a point, so all are safe while the study runs.

    python workflow/scripts/study.py check  CONFIG [--config KEY=VALUE ...]   validate (one line per problem)
    python workflow/scripts/study.py plan   CONFIG [--points] [--profile P]   what it asks, cost at most -> plan.csv
    python workflow/scripts/study.py status CONFIG                            done / failed / running / pending ...
    python workflow/scripts/study.py report CONFIG                            reports/<study>/report.html now
    python workflow/scripts/study.py where  CONFIG                            the path of that report

(`make check|plan|status|report CONFIG=...` call these; `make demo` calls `where` after its run.)
`report` renders from the records that exist now: it runs the workflow's own analysis and report
rules with Snakemake in a scratch folder whose results/<study>/points is the study's, with
`partial=true` (points without a record are shown as missing, running or pending and are not
measured), then copies the page into place atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import plan
from plan import plan_summary
from kan.contract import geometry
from launch import claims
from launch import slurm as slurm_jobs
import yaml
from kan.contract import factory
from scaling.common.io import write_csv, write_text
from scaling.tables import queue

ROOT = Path(__file__).resolve().parents[2]


def parse_overrides(items: list[str]) -> dict:
    """--config KEY=VALUE (dotted keys, YAML values), as snakemake's --config but nested."""
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise plan.ConfigError(f"--config: {item!r} is not KEY=VALUE")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(value)
    return out


def load(args) -> dict:
    return plan.load_config(args.configfile, parse_overrides(args.config or []))


def point_states(cfg: dict, points: dict, results: Path) -> dict[str, dict]:
    """{point id: {state, reason, job_id, waited_s, pending_reason}} from the records, the claims of
    running local attempts and (where squeue exists) the study's Slurm jobs."""
    jobs = slurm_jobs.point_jobs(cfg["study"], results / "packs")
    now = time.time()
    out = {}
    for pid in points:
        state, rec = plan.record_state(results / "points" / f"{pid}.json")
        reason = rec if state == "corrupt" else (rec or {}).get("reason") if isinstance(rec, dict) else None
        entry = {"state": state, "reason": reason or "", "job_id": "", "waited_s": None, "pending_reason": ""}
        if isinstance(rec, dict) and (rec.get("launch") or {}).get("slurm"):
            # the Slurm job's queue facts (launch/allocation.py) and the point's own run time
            entry.update(slurm=rec["launch"]["slurm"], wall_s=rec["launch"].get("wall_s"),
                         finished_utc=rec.get("finished_utc"))
        claim_path = results / "attempts" / pid / "claim.json"
        claim = claims.read(claim_path)
        if claim is not None and claims.is_live(claim, claim_path):
            entry.update(state="running", reason=claim.describe(), job_id=claim.slurm_job_id or "")
        job = jobs.get(pid)  # a live pack's points it has recorded already are not among them
        if job is not None:
            state = "pending" if job["state"] == "PENDING" else "running"
            waited = None
            try:
                waited = now - datetime.fromisoformat(job["submitted"]).timestamp()
            except ValueError:
                pass
            entry.update(state=state, job_id=job["job_id"], waited_s=waited,
                         pending_reason=job["reason"] if state == "pending" else "")
        if entry["state"] == "missing":
            entry["state"] = "not submitted"
        out[pid] = entry
    for pid, (state, why) in adaptive_states(cfg, points, results).items():
        if out[pid]["state"] == "not submitted":
            out[pid].update(state=state, reason=why)
    return out


def latest_look(results: Path) -> tuple[int, dict | None]:
    """(k, the file of the newest look that exists) of an adaptive study; (0, None) before any look."""
    looks = sorted(results.glob("looks/look*.json"), key=lambda f: int(f.stem[4:]) if f.stem[4:].isdigit() else 0)
    for f in reversed(looks):
        try:
            return int(f.stem[4:]), json.loads(f.read_text())
        except (OSError, ValueError):
            continue
    return 0, None


def adaptive_states(cfg: dict, points: dict, results: Path) -> dict[str, tuple[str, str]]:
    """For the points without a record of an adaptive study: 'waiting for a look' (a repeat beyond
    min that the next look may or may not ask for), or why a look added it."""
    rp = plan.repeat_plan(cfg)
    if not rp.adaptive:
        return {}
    k, look = latest_look(results)
    requested = (look or {}).get("requested", {})
    added = {}
    for entry in (look or {}).get("history", []):
        for fam, a in entry["added"].items():
            for rep in a["reps"]:
                added[(fam, rep)] = (entry["look"], a["why"])
    out = {}
    for pid, p in points.items():
        if (p.family, p.rep) in added:
            j, why = added[(p.family, p.rep)]
            out[pid] = ("not submitted", f"waiting for more repeats: look {j} added it for {', '.join(why)}")
        elif p.rep >= requested.get(p.family, rp.min):
            nxt = k + 1
            out[pid] = ("not requested", f"repeat {p.rep + 1} of at most {rp.max}: added only if look {nxt} of "
                        f"{rp.num_looks} finds a guideline it decides undecided" if nxt < rp.num_looks else
                        f"repeat {p.rep + 1}: the looks did not ask for it")
    return out


# ---- plan ---------------------------------------------------------------------------------------

def plan_rows(cfg: dict, states: dict) -> list[dict]:
    points, launch = plan.build_points(cfg), plan.launch_settings(cfg)
    runtimes = plan.point_runtimes(cfg, points)
    rows = []
    for pid, p in points.items():
        gpus = p.placement.gpus_per_node if launch.request_gpus else 0
        minutes = runtimes[pid]["runtime_min"]
        rows.append({
            "point": pid, "experiment": p.experiment, "nodes": p.placement.nodes, "gpus_per_node": gpus,
            "world_size": p.placement.world_size,
            "tasks": geometry.num_tasks(p), "cpus_per_task": geometry.cpus_per_task(p, launch),
            "mem_mb_per_node": geometry.mem_mb_per_node(p, launch), "runtime_min": minutes,
            "runtime_from": runtimes[pid]["source"], "estimated_min": runtimes[pid]["estimated_min"],
            "gpu_hours": p.placement.nodes * gpus * minutes / 60, "node_hours": p.placement.nodes * minutes / 60,
            "state": states[pid]["state"],
        })
    return rows


def allocation_lines(cfg: dict, points: dict, todo: list[str], source: str) -> list[str]:
    """How many Slurm allocations the points still to run take, and their shapes (resources.pack)."""
    pack = cfg["resources"]["pack"]
    if not pack:
        return [f"allocations: one Slurm job (one queue wait) per point: {len(todo)} for the jobs still to run "
                f"(resources.pack runs points of one geometry in one allocation)"]
    packs = plan.packs.form_packs(cfg["study"], points, todo, plan.point_runtimes(cfg, points),
                                  plan.launch_settings(cfg), pack, source=source)
    shapes: dict[str, list[dict]] = {}
    for p in packs.values():
        # the plan's one placement notation ('2 nodes x 4 GPUs'), with the jobs that wait on the rate sweep
        g, first = p["geometry"], points[p["points"][0]].placement  # one geometry: one placement per pack
        words = plan_summary.placement_words(first.nodes, first.gpus_per_node, bool(g["gres"]))
        shapes.setdefault(words + (", after the rate sweep" if g["after_sweep"] else ""), []).append(p)
    out = [f"allocations (resources.pack: at most {pack['max_points']} points and {pack['max_runtime_min']} min "
           f"each): {len(packs)} for the {len(todo)} jobs still to run, against {len(todo)} with one job per point"]
    for name, ps in sorted(shapes.items()):
        out.append(f"  {name}: {len(ps)} allocation{'s' if len(ps) != 1 else ''}, {sum(len(p['points']) for p in ps)} points, "
                   f"time limit up to {max(p['runtime_min'] for p in ps)} min")
    return out


def profile_retries(profile: Path) -> int:
    try:
        return int((yaml.safe_load((profile / "config.yaml").read_text()) or {}).get("retries", 0))
    except (OSError, ValueError):
        return 0


def cmd_plan(args) -> int:
    cfg = load(args)
    points = plan.build_points(cfg)
    results = Path("results") / cfg["study"]
    rows = plan_rows(cfg, point_states(cfg, points, results))
    import pandas as pd

    df = pd.DataFrame(rows)
    # before anything is printed or written: a pack limit no point fits is an error naming the file
    allocations = allocation_lines(cfg, points, [r["point"] for r in rows
                                                 if r["state"] not in ("ok", "running", "pending")],
                                   source=args.configfile)
    write_csv(df, results / "plan.csv")
    gpus = plan.launch_settings(cfg).request_gpus
    todo = [r for r in rows if r["state"] != "ok"]
    num_records = sum((results / "points" / f"{r['point']}.json").exists() for r in rows)
    rp = plan.repeat_plan(cfg)
    # the summary first, its cost within a screen's first lines: a study may have hundreds of points
    print(f"study {cfg['study']} ({args.configfile}): {len(rows)} points, one job each; {num_records} records "
          f"present ({len(rows) - len(todo)} ok), {len(todo)} still to run")
    for line in plan_summary.cost_lines(rows, todo, profile_retries(Path(args.profile)), args.profile, gpus):
        print(line)
    if rp.adaptive:
        first = [r for r in rows if points[r["point"]].rep < rp.min]
        print(f"adaptive repeats: the figures above count every point at repeats.max = {rp.max}; the {len(first)} jobs "
              f"at repeats.min = {rp.min} run for sure, at most {plan_summary.hours_words(first, gpus)}; "
              f"{rp.num_looks - 1} look{'s' if rp.num_looks != 2 else ''} add only what an undecided guideline needs"
              + (f", within {rp.budget_rank_hours:g} rank-hours" if rp.budget_rank_hours else ""))
    folders = [str(results), *cfg["plan"]["estimate_from"]]
    with_records = [f for f in folders if any((Path(f) / "points").glob("*.json"))]
    for line in plan_summary.estimate_lines(rows, plan.ESTIMATE_RULE, with_records,
                                            [f for f in cfg["plan"]["estimate_from"] if f not in with_records], gpus):
        print(line)
    print(plan_summary.largest_line(rows, points, gpus))
    for line in plan_summary.left_out_lines(plan.ddp_left_out(cfg)):
        print(line)
    for line in allocations:
        print(line)
    print()
    for line in plan_summary.group_lines(rows, points, gpus):
        print(line)
    if args.points:
        print()
        print(df[["point", "nodes", "gpus_per_node", "tasks", "cpus_per_task", "mem_mb_per_node", "runtime_min",
                  "runtime_from", "state"]].to_string(index=False))
    print()
    print(f"written: {results / 'plan.csv'}" + ("" if args.points else
                                                 " (one row per point; `make plan POINTS=1` or --points prints them)"))
    return 0


# ---- status -------------------------------------------------------------------------------------

def _waited(s: float | None) -> str:
    if s is None:
        return ""
    return f"{s / 60:.0f} min" if s >= 60 else f"{s:.0f} s"


def cmd_status(args) -> int:
    cfg = load(args)
    points = plan.build_points(cfg)
    states = point_states(cfg, points, Path("results") / cfg["study"])
    counts: dict = {}
    for pid, st in states.items():
        counts[st["state"]] = counts.get(st["state"], 0) + 1
        detail = st["reason"]
        if st["state"] == "pending":
            detail = f"job {st['job_id']}, waiting {_waited(st['waited_s'])}: {st['pending_reason']}"
        elif st["state"] == "running" and st["job_id"]:
            detail = f"job {st['job_id']}" + (f", {detail}" if detail else "")
        q = st.get("slurm")
        if q:  # queue wait apart from run time, per point
            waited = queue.duration(q.get("queue_wait_s"))
            if q.get("pack") and q.get("pack_index"):  # only a pack's first point waited in the queue
                waited = f"0 s (point {q['pack_index'] + 1} of {q['pack_points']} of an allocation that queued {waited})"
            elif q.get("pack"):
                waited += f" (point 1 of {q['pack_points']} of its allocation)"
            detail = (f"job {q['job_id']}: queued {waited}, ran {queue.duration(st.get('wall_s'))}"
                      + (f"; {detail}" if detail else ""))
        print(f"{st['state']:>13}  {pid}" + (f"  {detail}" if detail else ""))
    print("  ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + f"  (of {len(points)} points)")
    rows = [{"slurm_job_id": st["slurm"].get("job_id"), "queue_wait_s": st["slurm"].get("queue_wait_s"),
             "slurm_submit_unix": st["slurm"].get("submit_unix"), "pack": st["slurm"].get("pack"),
             "job_wall_s": st.get("wall_s"), "finished_utc": st.get("finished_utc")}
            for st in states.values() if st.get("slurm")]
    if rows:
        import pandas as pd

        print(queue.text(queue.summary(pd.DataFrame(rows))))
    return 0


# ---- report -------------------------------------------------------------------------------------

def refresh_if_stale(cfg: dict, workdir: Path = Path(".")) -> Path | None:
    """After a run that did not finish the report (a failed or cancelled point, a stopped run), the
    old report would show the old state: the report rendered from the records that exist now (its
    path), or None when it is newer than every record and attempt outcome."""
    study = cfg["study"]
    html = workdir / "reports" / study / "report.html"
    results = workdir / "results" / study
    newest = max((p.stat().st_mtime for p in (results / "points").glob("*.json")), default=0)
    attempts = max((p.stat().st_mtime for p in (results / "attempts").glob("*/*/outcome.json")), default=0)
    if html.exists() and html.stat().st_mtime >= max(newest, attempts):
        return None
    return render_partial(cfg, workdir)


def factory_roots(cfg: dict) -> list[str]:
    """The first path part of each relative file factory in model.impl ("examples" of
    "examples/tiny_kan.py:build"): what a scratch folder must link to plan the same points."""
    out = set()
    for impl in filter(factory.is_factory, cfg["model"]["impl"]):
        target, _, is_file = factory.parse(impl)  # the loaded config's factories are valid
        if is_file and not Path(target).is_absolute():
            out.add(Path(target).parts[0])
    return sorted(out)


# results a partial report reads where they exist (workflow/rules/common_tune.smk's get_*_path)
PARTIAL_INPUTS = ("lr_tuning.json", "critical_batch.json", "ddp_readiness.json")


def render_partial(cfg: dict, workdir: Path = Path("."), quiet: bool = True) -> Path:
    """reports/<study>/report.html from the records that exist now (see the module docstring)."""
    study = cfg["study"]
    results = (workdir / "results" / study).resolve()
    with tempfile.TemporaryDirectory(prefix=f"kanscale-report-{study}-") as tmp:
        scratch = Path(tmp)
        (scratch / "results" / study).mkdir(parents=True)
        for name in ("points", "benchmarks", "attempts", "looks"):
            (results / name).mkdir(parents=True, exist_ok=True)
            (scratch / "results" / study / name).symlink_to(results / name)
        # what steps outside the analysis made (the tuned rate, the critical batch, the readiness check): a
        # partial report shows each where it exists, so it must exist in the scratch folder too
        for name in PARTIAL_INPUTS:
            if (results / name).exists():
                (scratch / "results" / study / name).symlink_to(results / name)
        imported = cfg["import"]["path"] if cfg["import"] else None
        # compared studies, imported runs and file factories: relative to the working directory, as in a
        # run; linked at the same relative path, so the report cites the path the config gives and each
        # point keeps its id (a factory's path is part of it)
        for folder in list(cfg["report"]["compare"]) + ([imported] if imported else []) + factory_roots(cfg):
            link = scratch / folder
            if not link.exists() and (workdir / folder).exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to((workdir / folder).resolve())
        cfg_file = scratch / "study.yaml"
        data = cfg["data"]
        if data.get("path") and not Path(data["path"]).expanduser().is_absolute():
            # a table's path is relative to the working directory (plan/data_section.py); snakemake runs in
            # the scratch folder here, so give it the same file by its absolute path
            cfg = {**cfg, "data": {**data, "path": str((workdir / Path(data["path"]).expanduser()).resolve())}}
        write_text(cfg_file, yaml.safe_dump({**cfg, "partial": True}, sort_keys=False))
        target = f"reports/{study}/report.html"
        cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(scratch),
               "--configfile", str(cfg_file), "--cores", "2", "--allowed-rules", *plan.ANALYSIS_RULES, "--", target]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch)
        if res.returncode != 0:
            raise RuntimeError(f"the partial report failed:\n{(res.stdout + res.stderr)[-4000:]}")
        out = workdir / "reports" / study / "report.html"
        write_text(out, (scratch / target).read_text(encoding="utf-8"))
    return out


def cmd_report(args) -> int:
    cfg = load(args)
    out = render_partial(cfg)
    print(f"Report: {out.resolve()}")
    return 0


def cmd_where(args) -> int:
    """Where the study's report is (make demo prints it after the run)."""
    cfg = load(args)
    print(f"Report: {(Path('reports') / cfg['study'] / 'report.html').resolve()}")
    return 0


def cmd_check(args) -> int:
    cfg = load(args)
    for warning in plan.config_warnings(cfg):
        print(f"{args.configfile}: warning: {warning}", file=sys.stderr)
    print(f"{args.configfile}: ok, study {cfg['study']}, {len(plan.build_points(cfg))} points")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("check", "plan", "status", "report", "where"):
        p = sub.add_parser(name)
        p.add_argument("configfile", help="the study config (YAML)")
        p.add_argument("--config", nargs="*", metavar="KEY=VALUE", help="overrides, as snakemake --config")
        if name == "plan":
            p.add_argument("--profile", default=str(ROOT / "profiles" / "slurm"),
                           help="the profile whose retries count for the worst case")
            p.add_argument("--points", action="store_true",
                           help="print every point's row too (results/<study>/plan.csv always has them)")
    args = ap.parse_args(argv)
    try:
        commands = {"check": cmd_check, "plan": cmd_plan, "status": cmd_status, "report": cmd_report,
                    "where": cmd_where}
        return commands[args.command](args)
    except plan.ConfigError as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()  # now, not at exit, so that a closed pipe is caught below
    except BrokenPipeError:
        # `make plan | head`: the reader has what it wanted, which is no error of the command (make
        # would say "Error"); the flush at exit then writes to /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
