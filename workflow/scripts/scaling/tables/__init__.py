"""Records -> tidy measurements -> the scaling tables (the first stage; it reads only common/).

    tidy         point records -> measurements.csv, loss_curves.csv, allreduce.csv, val_curves.csv (every planned point)
    provenance   the hosts, devices, versions, commits and jobs the records came from
    queue        the Slurm jobs' queue wait apart from run time, and the study's makespan
    target       time to a target training loss, per repeat
    fits         Amdahl, Gustafson and USL fitted to the speedups, bootstrap CIs
    aggregate    configurations and their repeats: counts by status, mean and CIs per metric
    experiments  the strong, weak, comm, model-size and all-reduce tables (speedup, efficiency, ...)
    ddp_table    the ddp experiment's table: each DDP setting against DDP's defaults
    heldout      time and samples to a held-out target (report.target) for the strong and weak tables
    critical     the critical batch from the batch experiment's samples to the held-out target
    lrtune       each implementation's rate from the one-rank lr sweep (training.lr: tuned)
    anatomy_table    what bounds a step, per implementation, experiment and world size
    readiness_table  the DDP-readiness verdicts of the implementations (ddp_readiness.json)
    all_tables   compute_tables: every table, the points' status and the fits in one call
"""
