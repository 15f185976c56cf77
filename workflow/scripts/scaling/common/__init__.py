"""What every stage of the analysis reads.

    columns   the typed frames of measurements.csv, loss_curves.csv, allreduce.csv; placement classes
    placements the placement classes by name (standard library only: the planner validates with them)
    fmt       how a number reads in the report: significant digits, intervals, plurals, the cost's unit
    atomic    the atomic text write (standard library only: the launcher uses it too)
    io        atomic writes of tables and JSON, reading tables back, the command line of the workflow's steps
    stats     mean, CI over repeats, ratio CI (delta method), line fit; `known` (not None, not NaN)
    repeats   the study's repeats (fixed or adaptive) and the deciding intervals' level
    settings  the report's thresholds as one object, built once from the validated config
"""
