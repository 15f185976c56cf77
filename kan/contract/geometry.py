"""A point's Slurm geometry, computed once: the rule's resources (common.smk) and the launcher's
srun line both come from here."""

from __future__ import annotations

from .point import LaunchSettings, Point


def tasks_per_node(point: Point) -> int:
    """One torchrun agent per node, or (launcher srun) one task per rank."""
    return 1 if point.placement.launcher == "torchrun" else point.placement.gpus_per_node


def num_tasks(point: Point) -> int:
    return tasks_per_node(point) * point.placement.nodes


def cpus_per_task(point: Point, launch: LaunchSettings) -> int:
    """CPUs of one task: a torchrun agent holds all of its node's ranks (cpus_per_rank x
    gpus_per_node), an srun task is one rank."""
    return launch.cpus_per_rank * point.placement.gpus_per_node // tasks_per_node(point)


def mem_mb_per_node(point: Point, launch: LaunchSettings) -> int:
    return launch.mem_mb_per_rank * point.placement.gpus_per_node


def gres(point: Point, launch: LaunchSettings) -> str:
    """Per-node GPU request, e.g. gpu:2 or gpu:a100:2; "" (no --gres) on CPU-only clusters."""
    if not launch.request_gpus:
        return ""
    gpu_type = f"{launch.gpu_type}:" if launch.gpu_type else ""
    return f"gpu:{gpu_type}{point.placement.gpus_per_node}"


def slurm_extra(point: Point, launch: LaunchSettings) -> str:
    """sbatch options the plugin has no resource for. --ntasks-per-node: --nodes and --ntasks alone
    let Slurm pack tasks unevenly (3 + 1). --exclusive: no other job on the point's nodes."""
    extra = f"--ntasks-per-node={tasks_per_node(point)}"
    return extra + (" --exclusive" if launch.exclusive else "")


def request(point: Point, launch: LaunchSettings) -> dict:
    """What the point's job asks for, as recorded in the record."""
    return {"nodes": point.placement.nodes, "gpus_per_node": point.placement.gpus_per_node,
            "gres_per_node": gres(point, launch) or None, "tasks": num_tasks(point),
            "tasks_per_node": tasks_per_node(point), "cpus_per_task": cpus_per_task(point, launch),
            "mem_mb_per_node": mem_mb_per_node(point, launch), "runtime_min": launch.runtime_min,
            "launcher": point.placement.launcher, "exclusive": launch.exclusive}
