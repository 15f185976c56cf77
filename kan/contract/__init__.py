"""What a measurement point is, shared by the planner, the launcher and the trainer. No torch import
anywhere here: the planner and the launcher import it in processes that must start fast.

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
"""
