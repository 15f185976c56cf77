# One job = one measurement point, asking the scheduler for exactly what the point needs.


rule measure_point:
    output:
        "results/{study}/points/{point}.json",
    log:
        "results/{study}/logs/{point}.log",
    benchmark:
        "results/{study}/benchmarks/{point}.tsv"
    message:
        "measure {wildcards.point}"
    params:
        point=get_point_json,
        retry_token=get_retry_token,
        python=sys.executable,
        launcher=f"{workflow.basedir}/workflow/scripts/launch_point.py",
    resources:
        nodes=get_point_value("nodes"),
        gpus_per_node=get_point_value("gpus_per_node"),
        runtime=get_point_value("runtime_min"),
        mem_mb=get_point_value("mem_mb"),
        cpus_per_task=get_point_value("cpus_per_task"),
        # local runs: at most one point at a time (profiles/local sets measure_slots=1), so points
        # never share cores with each other and their timings stay comparable
        measure_slots=1,
    shell:
        "{params.python} {params.launcher} --point {params.point:q} --retry-token={params.retry_token:q}"
        " --out {output} > {log} 2>&1"
