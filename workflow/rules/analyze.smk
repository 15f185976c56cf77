# Records -> tidy measurements -> the scaling tables, the law fits, the performance model and the
# computed guidelines.


rule collect_measurements:
    input:
        records=get_point_records,
        benchmarks=get_point_benchmarks,
    output:
        measurements="results/{study}/measurements.csv",
        loss_curves="results/{study}/loss_curves.csv",
        allreduce="results/{study}/allreduce.csv",
    log:
        "results/{study}/logs/collect_measurements.log",
    params:
        points=get_planned_points,
        running=get_running_points,
    message:
        "collect {wildcards.study}: one row per point x repeat, loss curves, all-reduce sweeps"
    script:
        "../scripts/collect.py"


rule compute_tables:
    input:
        measurements=rules.collect_measurements.output.measurements,
        loss_curves=rules.collect_measurements.output.loss_curves,
        allreduce=rules.collect_measurements.output.allreduce,
        records=get_point_records,
    output:
        points=report_table("results/{study}/points.csv", "points"),
        strong=report_table("results/{study}/strong.csv", "strong"),
        weak=report_table("results/{study}/weak.csv", "weak"),
        comm=report_table("results/{study}/comm.csv", "comm"),
        model_size=report_table("results/{study}/model_size.csv", "model_size"),
        allreduce_sizes="results/{study}/allreduce_sizes.csv",
        fits="results/{study}/fits.json",
        provenance="results/{study}/provenance.json",
    log:
        "results/{study}/logs/compute_tables.log",
    params:
        thresholds=get_thresholds,
    message:
        "tables {wildcards.study}: repeats -> mean, 95% CI; speedup, efficiency, time to target, law fits"
    script:
        "../scripts/compute_tables.py"


rule fit_model:
    input:
        measurements=rules.collect_measurements.output.measurements,
        allreduce=rules.collect_measurements.output.allreduce,
    output:
        "results/{study}/model.json",
    log:
        "results/{study}/logs/fit_model.log",
    params:
        thresholds=get_thresholds,
    message:
        "model {wildcards.study}: compute + alpha-beta comm, leave-one-world-size-out validation, predictions"
    script:
        "../scripts/fit_model.py"


rule compute_guidelines:
    input:
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        model=rules.fit_model.output[0],
    output:
        "results/{study}/guidelines.json",
    log:
        "results/{study}/logs/compute_guidelines.log",
    params:
        thresholds=get_thresholds,
    message:
        "guidelines {wildcards.study}: threshold rules over the tables and the model"
    script:
        "../scripts/compute_guidelines.py"
