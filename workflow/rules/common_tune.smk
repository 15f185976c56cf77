# The get_* helpers of tuned rates (training.lr: tuned; tune.smk has the checkpoint). The sweep's
# points (experiment lr_tune) are ordinary points; the checkpoint tune_lr chooses each
# implementation's rate from their records (scaling/tables/lrtune.py), and only then are the tuned
# points' jobs made: their input function waits for the checkpoint, and their point JSON, the
# launcher's only source of the rate (a param, so also the rerun trigger), carries the chosen rate.
# A point already measured at the rate the sweep still chooses is not measured again; one whose
# implementation's choice changed (a sweep point measured again) is.


def sweep_ids():
    """The sweep's points the choice reads: its first `min` repeats (no look adds to a sweep family:
    no guideline rests on one), without those still running as Slurm jobs of an earlier run."""
    return [pid for pid in plan.initial_points(config, POINTS) if POINTS[pid].experiment == "lr_tune"]


def get_sweep_records(wildcards):
    return records_of([pid for pid in sweep_ids() if pid not in RUNNING])


def get_sweep_ids(wildcards):
    return as_json([pid for pid in sweep_ids() if pid not in RUNNING])


def get_lr_candidates(wildcards):
    return as_json(list(plan.lr_candidates(config)))


def get_lr_target(wildcards):
    return as_json(config["report"]["target"])


def get_point_tuning(wildcards):
    """A tuned point's job waits for the sweep's choice (the checkpoint's output). Ancient: a choice
    made again is no reason to measure again by itself; the point's JSON param carries the chosen
    rate, so only a point whose rate changed runs again."""
    if not POINTS[wildcards.point].train.tuned:
        return []
    return [ancient(checkpoints.tune_lr.get(study=STUDY).output.lr_tuning)]


def get_tuning_path(wildcards):
    """JSON: lr_tuning.json for the report (null: the rate was given). A full run has made it before
    any tuned point ran; a partial report shows it where it exists."""
    path = f"results/{STUDY}/lr_tuning.json"
    if not plan.lr_candidates(config) or (PARTIAL and not Path(path).exists()):
        return as_json(None)
    return as_json(path)


def get_critical_path(wildcards):
    """JSON: critical_batch.json for the report (null: no batch experiment). A full run makes it
    before the report (an input there); a partial report shows it where it exists."""
    path = f"results/{STUDY}/critical_batch.json"
    if not plan.points.enabled(config["experiments"], "batch") or (PARTIAL and not Path(path).exists()):
        return as_json(None)
    return as_json(path)


def get_critical_input(wildcards):
    return (
        []
        if PARTIAL or not plan.points.enabled(config["experiments"], "batch")
        else [f"results/{STUDY}/critical_batch.json"]
    )


def readiness_ids():
    """The readiness check points the analysis reads (experiments.readiness, kan/probes/readiness.py)."""
    return [pid for pid in measured_ids(LAST_LOOK) if POINTS[pid].experiment == "readiness"]


def get_readiness_records(wildcards):
    return records_of(readiness_ids())


def get_readiness_path(wildcards):
    """JSON: ddp_readiness.json for the report (null: no check planned). A full run makes it before the
    report (an input there); a partial report shows it where it exists."""
    path = f"results/{STUDY}/ddp_readiness.json"
    if not plan.points.readiness_enabled(config) or (PARTIAL and not Path(path).exists()):
        return as_json(None)
    return as_json(path)


def get_readiness_input(wildcards):
    return [] if PARTIAL or not readiness_ids() else [f"results/{STUDY}/ddp_readiness.json"]
