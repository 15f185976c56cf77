# Records -> tidy measurements -> the scaling tables, the law fits, the performance model and the
# computed guidelines.
#
# Every step runs its script through a quoted shell command (python script.py --in NAME=PATH
# --param NAME=JSON --out NAME=PATH, scaling/common/io.py step_args), not through `script:`: Snakemake
# starts a script's interpreter by its unquoted path (snakemake issue 2645), which breaks in a
# checkout whose path has a space, and .venv lives in the checkout. The arguments come from two
# params functions (common.smk): script_io, the rule's named files, and script_params, its values;
# no rule lists its files a second time in its command.


rule write_plan:
    output:
        points="results/{study}/plan/points.json",
    log:
        "results/{study}/logs/write_plan.log",
    localrule: True
    params:
        io=script_io(),
        args=script_params(digest=lambda wildcards: as_json(POINTS_DIGEST)),
    message:
        "plan {wildcards.study}: every planned point as JSON"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/write_plan.py --param config={STUDY_CONFIG_JSON:q} {params.io} {params.args} > {log:q} 2>&1"


rule collect_measurements:
    input:
        planned=rules.write_plan.output.points,
        looks=get_last_look,
        # the DAG's edges; the script finds the records and benchmark files in their folders
        records=get_point_records,
        benchmarks=get_point_benchmarks,
    output:
        measurements="results/{study}/measurements.csv",
        loss_curves="results/{study}/loss_curves.csv",
        allreduce="results/{study}/allreduce.csv",
        val_curves="results/{study}/val_curves.csv",
    log:
        "results/{study}/logs/collect_measurements.log",
    localrule: True
    params:
        io=script_io(records=True),
        args=script_params(running=get_running_points, repeats=get_repeats, requested=get_last_look_path),
    message:
        "collect {wildcards.study}: one row per point x repeat, loss and held-out curves, all-reduce sweeps"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/collect.py {params.io} {params.args} > {log:q} 2>&1"


# experiments.readiness: each implementation's DDP-readiness verdict from its check point (kan/probes/readiness.py)
rule ddp_readiness:
    input:
        planned=rules.write_plan.output.points,
        records=get_readiness_records,
    output:
        readiness="results/{study}/ddp_readiness.json",
    log:
        "results/{study}/logs/ddp_readiness.log",
    localrule: True
    params:
        io=script_io(records=True),
        args=script_params(),
    message:
        "DDP readiness {wildcards.study}: unused parameters, buffers in sync, identical replicas, device placement"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/ddp_readiness.py {params.io} {params.args} > {log:q} 2>&1"


rule compute_tables:
    input:
        measurements=rules.collect_measurements.output.measurements,
        loss_curves=rules.collect_measurements.output.loss_curves,
        allreduce=rules.collect_measurements.output.allreduce,
        val_curves=rules.collect_measurements.output.val_curves,
        records=get_point_records,
    output:
        points=report_table("results/{study}/points.csv", "points"),
        strong=report_table("results/{study}/strong.csv", "strong"),
        weak=report_table("results/{study}/weak.csv", "weak"),
        comm=report_table("results/{study}/comm.csv", "comm"),
        model_size=report_table("results/{study}/model_size.csv", "model_size"),
        ddp=report_table("results/{study}/ddp.csv", "ddp"),
        allreduce_sizes="results/{study}/allreduce_sizes.csv",
        anatomy="results/{study}/anatomy.csv",
        fits="results/{study}/fits.json",
        provenance="results/{study}/provenance.json",
    log:
        "results/{study}/logs/compute_tables.log",
    localrule: True
    params:
        io=script_io(records=True),
        args=script_params(thresholds=get_thresholds),
    message:
        "tables {wildcards.study}: repeats -> mean, 95% CI; speedup, efficiency, time to target, law fits"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/compute_tables.py {params.io} {params.args} > {log:q} 2>&1"


rule fit_model:
    input:
        measurements=rules.collect_measurements.output.measurements,
        allreduce=rules.collect_measurements.output.allreduce,
    output:
        model="results/{study}/model.json",
        holdout="results/{study}/holdout.json",
    log:
        "results/{study}/logs/fit_model.log",
    localrule: True
    params:
        io=script_io(),
        args=script_params(thresholds=get_thresholds),
    message:
        "model {wildcards.study}: compute + alpha-beta comm, leave-one-world-size-out validation, predictions"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/fit_model.py {params.io} {params.args} > {log:q} 2>&1"


rule compute_guidelines:
    input:
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        ddp=rules.compute_tables.output.ddp,
        anatomy=rules.compute_tables.output.anatomy,
        model=rules.fit_model.output.model,
        holdout=rules.fit_model.output.holdout,
        critical=get_critical_input,
    output:
        guidelines="results/{study}/guidelines.json",
    log:
        "results/{study}/logs/compute_guidelines.log",
    localrule: True
    params:
        io=script_io(),
        args=script_params(thresholds=get_thresholds, critical=get_critical_path),
    message:
        "guidelines {wildcards.study}: threshold rules over the tables and the model"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/compute_guidelines.py {params.io} {params.args} > {log:q} 2>&1"
