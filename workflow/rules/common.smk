# Validate the config once, build the measurement points, and the get_* helpers rules use.
import json
import re
import sys

sys.path.insert(0, str(Path(workflow.basedir) / "workflow" / "scripts"))
import plan  # noqa: E402

_config_source = ", ".join(map(str, workflow.configfiles)) or "config"
try:
    plan.validate_config(config, source=_config_source)
except plan.ConfigError as e:
    raise WorkflowError(str(e)) from None

STUDY = config["study"]
# plain globals, not params: params are rerun triggers, and neither the interpreter's path nor the
# checkout's location changes what a point measures
PYTHON = sys.executable
LAUNCHER = f"{workflow.basedir}/workflow/scripts/launch_point.py"
POINTS = plan.build_points(config)


wildcard_constraints:
    study=STUDY,
    point="|".join(map(re.escape, POINTS)) if POINTS else "^$",


def get_final_output():
    # The records are targets themselves: Snakemake does not regenerate a deleted input whose
    # downstream outputs still exist, but a deleted point record must run again.
    records = [f"results/{STUDY}/points/{pid}.json" for pid in POINTS]
    return records + [f"reports/{STUDY}/report.html"]


def get_point_records(wildcards):
    return [f"results/{wildcards.study}/points/{pid}.json" for pid in POINTS]


def get_point_benchmarks(wildcards):
    return [f"results/{wildcards.study}/benchmarks/{pid}.tsv" for pid in POINTS]


def get_points(wildcards):
    return list(POINTS.values())


def get_point_value(key):
    """A resource/param function returning one field of the wildcard's point."""

    def get(wildcards):
        return POINTS[wildcards.point][key]

    return get


def get_point_json(wildcards):
    return json.dumps(POINTS[wildcards.point], separators=(",", ":"))


def get_retry_token(wildcards):
    path = f"results/{wildcards.study}/points/{wildcards.point}.json"
    return plan.retry_token(path, config["rerun_failed"])


# analysis and report (workflow/rules/analyze.smk, report.smk)
def get_report_thresholds(wildcards):
    """The config's report section minus the reference choice: the guideline thresholds."""
    return {k: v for k, v in config["report"].items() if k != "reference"}


def get_reference_dir(wildcards):
    """Folder of the seed paper's per-point CSVs when the config asks for the overlay, else None."""
    if config["report"]["reference"] == "seed-paper-a100":
        return f"{workflow.basedir}/workflow/report/reference"
    return None


# Slurm geometry of a point's job (used by profiles/slurm through the executor plugin; ignored
# locally). The rule has an `mpi` resource, so the plugin runs it in the job's batch step and
# workflow/scripts/launch_slurm.py starts the srun tasks: one torchrun agent per node, or (launcher
# srun) one task per rank.
def _tasks_per_node(point):
    return 1 if point["launcher"] == "torchrun" else point["gpus_per_node"]


def get_slurm_tasks(wildcards):
    point = POINTS[wildcards.point]
    num_tasks = _tasks_per_node(point) * point["nodes"]
    # The plugin rejects an mpi job with tasks == 1 ("For MPI jobs, 'tasks' must be greater
    # than 1"), although one task (a 1-node torchrun agent) is a valid mpi-style job; the
    # string "1" passes its check and still becomes --ntasks=1.
    return str(num_tasks) if num_tasks == 1 else num_tasks


def get_slurm_cpus_per_task(wildcards):
    point = POINTS[wildcards.point]
    # the point's cpus_per_task is per node (cpus_per_rank x gpus_per_node): one torchrun agent
    # per node needs all of it, one srun task per rank needs one rank's share
    return point["cpus_per_task"] // _tasks_per_node(point)


def get_slurm_gres(wildcards):
    """Per-node GPU request, e.g. gpu:2 or gpu:a100:2; "" (no --gres) on CPU-only clusters."""
    point = POINTS[wildcards.point]
    if not point["request_gpus"]:
        return ""
    gpu_type = f"{point['gpu_type']}:" if point["gpu_type"] else ""
    return f"gpu:{gpu_type}{point['gpus_per_node']}"


def get_slurm_extra(wildcards):
    # --nodes and --ntasks alone let Slurm pack tasks unevenly (3 + 1); pin them per node
    return f"--ntasks-per-node={_tasks_per_node(POINTS[wildcards.point])}"
