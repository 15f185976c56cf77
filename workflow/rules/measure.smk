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
    resources:
        nodes=get_point_value("nodes"),
        gpus_per_node=get_point_value("gpus_per_node"),
        runtime=get_point_value("runtime_min"),
        mem_mb=get_point_value("mem_mb"),
        cpus_per_task=get_slurm_cpus_per_task,
        # Slurm (profiles/slurm): one job per point with exactly its nodes and GPUs per node;
        # `mpi` makes the plugin run this rule in the batch step, not in a one-task srun step,
        # and launch_slurm.py starts the tasks with its own srun. tasks_per_gpu=0: no
        # --ntasks-per-gpu (torchrun spawns its own workers).
        mpi="srun",
        tasks=get_slurm_tasks,
        tasks_per_gpu=0,
        gres=get_slurm_gres,
        slurm_extra=get_slurm_extra,
        # local runs: at most one point at a time (profiles/local sets measure_slots=1), so points
        # never share cores with each other and their timings stay comparable
        measure_slots=1,
    shell:
        "{PYTHON} {LAUNCHER} --point {params.point:q} --retry-token={params.retry_token:q}"
        " --out {output} > {log} 2>&1"
