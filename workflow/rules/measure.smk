# One job = one measurement point, asking the scheduler for exactly what the point needs.


rule make_pykan_env:
    output:
        ".venv-pykan/.installed",
    log:
        "results/pykan-env.log",
    # where snakemake runs: it installs into this checkout (.venv-pykan), which every node sees
    localrule: True
    message:
        "pykan 0.2.8 in its own environment .venv-pykan (the study lists impl: pykan)"
    shell:
        "{PYTHON:q} {PYKAN_ENV:q} .venv-pykan > {log:q} 2>&1"


rule measure_point:
    input:
        get_point_env,
        get_point_tuning,
    output:
        "results/{study}/points/{point}.json",
    log:
        "results/{study}/logs/{point}.log",
    benchmark:
        "results/{study}/benchmarks/{point}.tsv"
    # packed, no retry of the allocation: Snakemake would run every point of the pack again (the
    # job step forces its targets), re-measuring recorded ones; the next run packs only what is
    # missing instead. None: the profile's retries (one job per point)
    retries: 0 if PACK else None
    # resources.pack: the point's allocation, shared with points of its geometry (common.smk)
    group:
        get_pack
    resources:
        nodes=get_nodes,
        gpus_per_node=get_gpus_per_node,
        runtime=get_runtime,
        mem_mb=get_point_resource("mem_mb_per_node"),
        cpus_per_task=get_point_resource("cpus_per_task"),
        # Slurm (profiles/slurm): one job per point with exactly its nodes and GPUs per node;
        # `mpi` makes the plugin run this rule in the batch step, not in a one-task srun step,
        # and the launcher starts the tasks with its own srun. tasks_per_gpu=0: no
        # --ntasks-per-gpu (torchrun spawns its own workers).
        mpi="srun",
        tasks=get_slurm_tasks,
        tasks_per_gpu=0,
        gres=get_point_resource("gres"),
        slurm_extra=get_point_resource("slurm_extra"),
        # local runs: at most one point at a time (profiles/local sets measure_slots=1), so points
        # never share cores with each other and their timings stay comparable
        measure_slots=1,
    params:
        point=get_point_json,
        retry_token=get_retry_token,
    message:
        "measure {wildcards.point}: {resources.nodes} node(s) x {resources.gpus_per_node} rank(s) per node, "
        "time limit {resources.runtime} min"
    # every path quoted (:q): a checkout path with a space or a `$(...)` must stay one argument
    shell:
        "{PYTHON:q} {LAUNCHER:q} --point {params.point:q} --launch {LAUNCH_JSON:q}"
        " --limits {LIMITS_JSON:q} --runtime-min {resources.runtime} --retry-token={params.retry_token:q}"
        " --watch-pid {SNAKEMAKE_PID}"
        " --out {output:q} > {log:q} 2>&1"


# import: the records of runs measured elsewhere, one per point, written at once (seconds, no job)
if IMPORT:

    ruleorder: import_records > measure_point

    rule import_records:
        input:
            plan.imports.source_files(IMPORT),
        output:
            records_of(POINTS),
        log:
            f"results/{STUDY}/logs/import_records.log",
        localrule: True
        params:
            points_dir=POINTS_DIR,
        message:
            f"import {STUDY}: one record per point from {IMPORT['path']}"
        shell:
            "{PYTHON:q} {SCRIPTS_DIR:q}/import_records.py --param config={STUDY_CONFIG_JSON:q}"
            " --out points_dir={params.points_dir:q} > {log:q} 2>&1"
