# Validate the config once, build the measurement points, and the get_* helpers rules use.
import json
import os
import re
import shlex
import sys

WORKFLOW_DIR = Path(workflow.current_basedir).parent  # workflow/, also when used as a module
SCRIPTS = WORKFLOW_DIR / "scripts"
# the workflow's own packages (plan, launch, scaling) are installed with kan (pyproject.toml)
import plan
from kan.contract import geometry
from launch import claims
from launch import slurm as slurm_jobs

_CONFIG_FILES = ", ".join(map(str, workflow.configfiles)) or "config"
# a job's own snakemake (remote_exec: a Slurm job step) trusts the factories the submitting run checked
plan.factories.check_builds(not workflow.remote_exec)
try:
    # read strictly: what Snakemake's loader lets through (duplicate keys)
    _RAW_CONFIGS = [(_f, plan.read_yaml(_f)) for _f in workflow.configfiles]
    plan.validate_config(
        config, source=_CONFIG_FILES, overrides=dict(workflow.config_settings.config), files=_RAW_CONFIGS
    )
except plan.ConfigError as e:
    raise WorkflowError(str(e)) from None
for _warning in plan.config_warnings(config):
    logger.warning(f"{_CONFIG_FILES}: {_warning}")

STUDY = config["study"]
# the study's records, one file per point: the folder every step that reads records is given
POINTS_DIR = f"results/{STUDY}/points"
BENCHMARKS_DIR = f"results/{STUDY}/benchmarks"
POINTS = plan.build_points(config)  # {id: kan.contract.point.Point}
# plain globals, not params: params are rerun triggers, and neither the interpreter's path, the
# checkout's location, the time limits nor snakemake's pid changes what a point measures
PYTHON = sys.executable
LAUNCHER = str(SCRIPTS / "launch_point.py")
PYKAN_ENV = str(SCRIPTS / "pykan_env.py")
SCRIPTS_DIR = str(SCRIPTS)
# the analysis's write_plan step plans the same points from this config; their digest is the rule's
# param (the plan changed -> the analysis runs again), the config text is not (a report setting
# would otherwise re-plan; the rules that read report settings have them as params)
STUDY_CONFIG_JSON = json.dumps(config, sort_keys=True, separators=(",", ":"))
POINTS_DIGEST = plan.points_digest(POINTS)
LAUNCH = plan.launch_settings(config)
LAUNCH_JSON = json.dumps(LAUNCH.to_json(), separators=(",", ":"))
LIMITS_JSON = json.dumps(plan.limits(config).to_json(), separators=(",", ":"))
SNAKEMAKE_PID = os.getpid()
# Used as a module (`module kanscale: ...; use rule * from kanscale`), this file runs in the module's
# namespace, but Snakemake formats shell commands with the main workflow's globals: hand it the
# values the shell commands use (they are not params: params would re-run points, see above)
SHELL_GLOBALS = (
    "PYTHON",
    "LAUNCHER",
    "PYKAN_ENV",
    "LAUNCH_JSON",
    "LIMITS_JSON",
    "SNAKEMAKE_PID",
    "SCRIPTS_DIR",
    "STUDY_CONFIG_JSON",
)
_main_globals = workflow.modifier_stack[0].globals
if _main_globals is not globals():
    for _name in SHELL_GLOBALS:
        if _main_globals.get(_name, globals()[_name]) != globals()[_name]:
            raise WorkflowError(f"kanscale used as a module needs the name {_name} in the main Snakefile for itself")
        _main_globals[_name] = globals()[_name]


def _running_on_slurm():
    """Points whose Slurm job (from an earlier, killed snakemake) is still pending or running: they
    are not submitted again; the report shows them as running until a later run collects them.
    Asked of squeue wherever it exists (the executor is not known yet while the Snakefile is read),
    except inside a point's own job."""
    if workflow.remote_exec:
        return {}
    jobs = slurm_jobs.point_jobs(STUDY, Path(f"results/{STUDY}/packs"))
    live = {pid: job for pid, job in jobs.items() if pid in POINTS}
    for pid, job in live.items():
        logger.warning(
            f"point {pid} is still {job['state'].lower()} as Slurm job {job['job_id']} "
            f"(submitted {job['submitted']}): not submitting it again; run the workflow again when it has ended"
        )
    return live


RUNNING = _running_on_slurm()
# partial (make report): only the points that have a record file now; nothing is measured
PARTIAL = config["partial"]
# import: every point's record comes from a run measured elsewhere (plan/imports.py matched them when
# the config was validated; measure.smk's import_records writes them): nothing is measured
IMPORT = config["import"]
# repeats: fixed, or adaptive (looks.smk adds repeats between the looks; POINTS has every repeat up to max)
REPEATS = plan.repeat_plan(config)
RUNTIMES = plan.point_runtimes(config, POINTS)


wildcard_constraints:
    study=STUDY,
    point="|".join(map(re.escape, POINTS)) if POINTS else "^$",


# Adaptive repeats (looks.smk has the checkpoint; common_looks.smk its get_* helpers). Config
# `repeats: {min, max, looks, budget_rank_hours}`, scaling/decide/sequential.py: a chain of
# checkpoints look1 .. look<K-1>. Look k reads the records the study has asked for so far (repeats
# below `min`, plus what looks 1 .. k-1 added), computes every guideline and adds repeats only where
# one is undecided; Snakemake re-plans the DAG after each look, so one `snakemake` command runs the
# whole study, locally and on Slurm. The report is look K. With fixed repeats (or looks: 1) there is
# no look: LAST_LOOK = 0.
LAST_LOOK = REPEATS.num_looks - 1


def requested_ids(after_look):
    """Point ids the study asks for once look `after_look` has run (0: the first `min` repeats)."""
    if after_look == 0:
        return plan.initial_points(config, POINTS)
    path = checkpoints.look.get(study=STUDY, k=after_look).output.look
    requested = json.loads(Path(path).read_text())["requested"]
    return [pid for pid, p in POINTS.items() if p.rep < requested.get(p.family, REPEATS.min)]


# A tuned point (training.lr: tuned) trains at the rate the sweep chose (common_tune.smk).
def sweep_running():
    return any(POINTS[pid].experiment == "lr_tune" for pid in RUNNING)


def tuned_point(point):
    """The point with the rate the sweep chose for its implementation (launch/tuned.py; its id does
    not change: a tuned point's id hashes its candidates); an untuned point as it is, and a tuned
    one with its rate unset when there is no choice (the launcher then records why it cannot run)."""
    from launch import tuned

    try:
        return tuned.resolve(point, Path(f"results/{STUDY}/lr_tuning.json"))
    except tuned.TuningError:
        return point


def measured_ids(after_look):
    """The points whose records the analysis reads once look `after_look` (looks.smk; 0 = none) has
    added its repeats, without those still running as Slurm jobs of an earlier run; in a partial
    report, the points with a record now."""
    if PARTIAL:
        return [pid for pid in POINTS if pid not in RUNNING and Path(f"{POINTS_DIR}/{pid}.json").exists()]
    # a sweep point still running elsewhere: the tuned points wait for a later run's complete sweep
    wait = sweep_running()
    return [pid for pid in requested_ids(after_look) if pid not in RUNNING and not (wait and POINTS[pid].train.tuned)]


def records_of(ids):
    return [f"{POINTS_DIR}/{pid}.json" for pid in ids]


def get_final_output(wildcards):
    # The records are targets themselves: Snakemake does not regenerate a deleted input whose
    # downstream outputs still exist, but a deleted point record must run again.
    records = [] if PARTIAL else records_of(measured_ids(LAST_LOOK))
    # the critical batch (tune.smk), where the batch experiment is measured
    extra = [f"results/{STUDY}/critical_batch.json"] if plan.points.enabled(config["experiments"], "batch") else []
    return records + extra + [f"reports/{STUDY}/report.html"]


def get_point_records(wildcards):
    return records_of(measured_ids(LAST_LOOK))


def get_point_benchmarks(wildcards):
    if IMPORT:  # no job measured them: no benchmark file
        return []
    return [f"{BENCHMARKS_DIR}/{pid}.tsv" for pid in measured_ids(LAST_LOOK)]


def as_json(value):
    """A param as the JSON text its script's --param reads (sorted keys: the same value gives the
    same text, and Snakemake re-runs a job whose params changed)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def script_io(records=False):
    """A params function: the rule's files as its script's arguments (scaling/common/io.py step_args),
    every named input that is one path as --in NAME=PATH (lists of records are the DAG's edges: the
    scripts find records in their folder), with `records` the points and benchmarks folders as --in
    points_dir / benchmarks_dir, and every named output as --out NAME=PATH, each shell-quoted. Derived
    from the files, so Snakemake leaves it out of its params trigger; a changed input re-runs the rule
    on its own."""

    def io(wildcards, input, output):
        parts = [f"--in {k}={shlex.quote(str(v))}" for k, v in input.items() if isinstance(v, str)]
        if records:
            parts += [
                f"--in points_dir={shlex.quote(POINTS_DIR)}",
                f"--in benchmarks_dir={shlex.quote(BENCHMARKS_DIR)}",
            ]
        parts += [f"--out {k}={shlex.quote(str(v))}" for k, v in output.items()]
        return " ".join(parts)

    return io


def script_params(**params):
    """A params function: each of `params` (wildcards -> JSON text) as --param NAME=JSON, shell-quoted;
    a param of the rule, so a changed value re-runs it."""
    return lambda wildcards: " ".join(f"--param {k}={shlex.quote(fn(wildcards))}" for k, fn in params.items())


def get_running_points(wildcards):
    """{id: what runs it}: Slurm jobs of an earlier run, and (partial report) live local attempts."""
    running = {pid: f"Slurm job {job['job_id']} ({job['state'].lower()})" for pid, job in RUNNING.items()}
    if PARTIAL:
        for pid in POINTS:
            claim_path = Path(f"results/{STUDY}/attempts/{pid}/claim.json")
            claim = claims.read(claim_path)
            if pid not in running and claim is not None and claims.is_live(claim, claim_path):
                running[pid] = claim.describe()
    return as_json(running)


def get_runtime(wildcards):
    """The point's time limit in minutes (explicit, default, or derived from measured throughput)."""
    return RUNTIMES[wildcards.point]["runtime_min"]


def get_point_env(wildcards):
    """pykan points need pykan's own environment; made once (ancient: a re-made environment does not
    re-run the points measured in it)."""
    if POINTS[wildcards.point].model.impl == "pykan":
        return [ancient(".venv-pykan/.installed")]
    return []


def get_point_json(wildcards):
    """The point for the launcher; limits are left out: they bound the plan, not the measurement,
    and a param change would re-run the point."""
    point = POINTS[wildcards.point]
    point = tuned_point(point).to_json()  # lr: tuned: the sweep's choice
    point.pop("limits")
    return json.dumps(point, separators=(",", ":"))


def get_retry_token(wildcards):
    path = f"{POINTS_DIR}/{wildcards.point}.json"
    return plan.retry_token(path, config["rerun_failed"])


# Slurm geometry of a point's job (used by profiles/slurm through the executor plugin; ignored
# locally), from kan/contract/geometry.py, which the launcher's srun line uses too. The
# rule has an `mpi` resource, so the plugin runs it in the job's batch step and the launcher starts
# the srun tasks: one torchrun agent per node, or (launcher srun) one task per rank.
def get_point_resource(name):
    """A resource function: geometry.<name>(point, launch settings) of the wildcard's point."""
    fn = getattr(geometry, name)

    def get(wildcards):
        return fn(POINTS[wildcards.point], LAUNCH)

    return get


def get_nodes(wildcards):
    return POINTS[wildcards.point].placement.nodes


def get_gpus_per_node(wildcards):
    return POINTS[wildcards.point].placement.gpus_per_node


def get_slurm_tasks(wildcards):
    num_tasks = geometry.num_tasks(POINTS[wildcards.point])
    # The plugin rejects an mpi job with tasks == 1 ("For MPI jobs, 'tasks' must be greater
    # than 1"), although one task (a 1-node torchrun agent) is a valid mpi-style job; the
    # string "1" passes its check and still becomes --ntasks=1.
    return str(num_tasks) if num_tasks == 1 else num_tasks


# resources.pack: points of one geometry run one after another in one Slurm allocation, each still
# its own job (plan/packs.py). A pack is a Snakemake group: the executor plugin submits a group as one
# sbatch whose resources are the group's; with measure_slots scoped "local" and limited to 1 per
# submission, Snakemake stacks the points in series (runtime summed, nodes and tasks not). Snakemake's
# own means (no second scheduler): docs/slurm.md "Few allocations" says why.
PACK = config["resources"]["pack"]
_PACKS = {}  # {group id: manifest}; formed on first use (after every rule file is read)
_PACK_OF = {}  # {point id: group id}


resource_scopes:
    measure_slots="local",


def _needs_run(pid):
    state, _ = plan.record_state(f"{POINTS_DIR}/{pid}.json")
    return state in ("missing", "corrupt") or (state != "ok" and config["rerun_failed"])


def form_packs():
    """The packs of the points still to run: those the study asks for now first, then later looks'
    repeats (a later look's points then share packs with each other, not with these)."""
    if _PACKS or not PACK or workflow.remote_exec:
        return _PACKS
    first = [pid for pid in measured_ids(LAST_LOOK) if _needs_run(pid)]
    later = [pid for pid in POINTS if pid not in first and pid not in RUNNING and _needs_run(pid)]
    try:
        packs = plan.packs.form_packs(STUDY, POINTS, first + later, RUNTIMES, LAUNCH, PACK, _CONFIG_FILES)
    except plan.ConfigError as e:
        raise WorkflowError(str(e)) from None
    plan.packs.write_manifests(Path(f"results/{STUDY}/packs"), packs)
    _PACKS.update(packs)
    _PACK_OF.update({pid: gid for gid, pack in packs.items() for pid in pack["points"]})
    # one component per point: a pack's points are unconnected jobs, which a group spans only up to
    # its --group-components count (Snakemake's GroupSettings; set here, from the config, so the
    # profile needs no per-study flag)
    workflow.group_settings.group_components = {
        **workflow.group_settings.group_components,
        **{gid: len(pack["points"]) for gid, pack in packs.items()},
    }
    # at most one point of a submission at a time (measure_slots is scoped local): the group is
    # stacked in series, and asks for one point's nodes, not the sum
    workflow.register_resource("measure_slots", 1)
    return _PACKS


def get_pack(wildcards):
    """The point's pack (its Snakemake group), or None: not packing, or the point is not to run."""
    return _PACK_OF.get(wildcards.point) if form_packs() else None


# What snakemake's own handlers leave undone (Snakefile: onstart, onsuccess, onerror); the logic is
# in launch/claims.py and study.py, where it is tested.
def forward_sigterm_to_points():
    if not workflow.remote_exec:
        claims.forward_sigterm(Path(f"results/{STUDY}/attempts"), SNAKEMAKE_PID)


def refresh_report_if_stale():
    if workflow.remote_exec or PARTIAL:
        return
    import study

    try:
        out = study.refresh_if_stale(config)
    except Exception as e:  # the run's own error is the one to report
        logger.warning(f"could not render the partial report: {e}")
        return
    if out is not None:
        logger.warning(f"the study did not finish: {out} now shows the records that exist (make status: what is left)")
