"""Launching one measurement point: each piece once. What the planner shares with it (a point's
Slurm request, atomic writes) is in kan/contract/, never imported from the analysis package.

    commands   the command lines: python -m kan.train directly (one rank), torchrun (standalone, or
               one agent per node with c10d rendezvous), srun; the fault-injection hook
    claims     a per-point claim, so a live earlier attempt is waited for, never duplicated
    procs      the point's process tree: own sessions, parent-death signal, signals, deadline, watchdog
    failure    what a point that did not measure died of (error files first, then the log)
    isolation  what else ran on the point's machine when it started
    slurm      scontrol/squeue helpers (job facts, live jobs of a study, packed allocations)
    allocation a point's turn inside its Slurm job (a pack runs several), the job's queue facts
    tuned      a tuned point's rate: the sweep's choice for its implementation (lr_tuning.json)
    warm       a local CPU trainer forked by the warm-start server, else None (the client)
    warm_server  the warm-start server: imports once, forks a trainer per request, this user only
    warm_fork  the server's side of a fork: the preload, the one-thread check, the child
    netemu     the emulated cluster as callers use it: each node's link (tbf), its probe, one point's
               session; re-exports what they use of netns
    netns      the emulated cluster's namespaces, bridge, addresses, CPU sets and state file
    main       the launcher: claim, run, classify, commit exactly one record

No torch import anywhere here: the launcher starts in well under a second.
"""
