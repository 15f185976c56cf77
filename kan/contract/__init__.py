"""What a measurement point is, and what the planner, the launcher, the trainer and the analysis
share besides: the shared layer, which imports none of them. No torch and no pandas anywhere here:
the planner and the launcher import it in processes that must start fast
(tests/unit/test_import_budget.py holds the direction: plan -> launch -> analysis,
each through this package only).

    point.py           Point and its sections (TrainConfig, AllreduceConfig, Placement), its id
    model_config.py    the `model:` section: a built-in implementation or your factory, widths, grid
    data_config.py     the `data:` section: synthetic, Feynman, a file or a sklearn table
    study_settings.py  Limits and LaunchSettings: what a study sets beside its points (not in ids)
    fields.py          a field's metadata (help, unit, flag, bounds) and the checks every section runs
    point_args.py      the trainer's command line: one flag per field, parsed back into the same Point
    record.py          a point's JSON record: the atomic writer and the validating reader
    factory.py         `model.impl` as `package.module:function` or `path/file.py:function`
    capture_hooks.py   which DDP comm hooks may run in a CUDA-graph captured step (planner and trainer)
    step_stop.py       when a step-time point stops (its mean step's interval within a tolerance), and why
    geometry.py        a point's Slurm request (tasks, CPUs, memory, --gres, --exclusive): the launcher's
                       srun line, the planner's packs and the workflow's rule resources
    repeats.py         the study's repeats (fixed or adaptive) and the deciding intervals' level
    placements.py      the link classes by name: single-rank, intra-node, inter-node, simulated
    expect_spec.py     report.expect's grammar: metrics, selectors, a config's problems (the planner
                       checks them; the analysis evaluates them)
    atomic.py          the atomic text write (temp file, fsync, rename)
"""
