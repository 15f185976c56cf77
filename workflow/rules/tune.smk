# training.lr: tuned: each implementation's rate from the one-rank sweep (common_tune.smk says how
# the tuned points wait for it).


checkpoint tune_lr:
    input:
        records=get_sweep_records,
    output:
        lr_tuning="results/{study}/lr_tuning.json",
    log:
        "results/{study}/logs/tune_lr.log",
    localrule: True
    params:
        io=script_io(records=True),
        args=script_params(ids=get_sweep_ids, candidates=get_lr_candidates, target=get_lr_target),
    message:
        "tune {wildcards.study}: each implementation's rate from the lr sweep"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/tune_lr.py {params.io} {params.args} > {log:q} 2>&1"


# experiments.batch: each model's critical batch from the held-out curves (scaling/tables/critical.py)
rule critical_batch:
    input:
        val_curves=rules.collect_measurements.output.val_curves,
    output:
        critical_batch="results/{study}/critical_batch.json",
    log:
        "results/{study}/logs/critical_batch.log",
    localrule: True
    params:
        io=script_io(),
        args=script_params(
            target=get_lr_target,
            resamples=lambda wildcards: as_json(config["report"]["bootstrap_samples"]),
            level=lambda wildcards: as_json(REPEATS.level),
        ),
    message:
        "critical batch {wildcards.study}: samples to the held-out target against the global batch"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/critical_batch.py {params.io} {params.args} > {log:q} 2>&1"
