"""What every stage of the analysis reads.

    columns   the typed frames of measurements.csv, loss_curves.csv, allreduce.csv; placement classes
    fmt       how a number reads in the report: significant digits, intervals, plurals, the cost's unit
    io        atomic writes of tables and JSON, reading tables back, the command line of the workflow's steps
    stats     mean, CI over repeats, ratio CI (delta method), line fit; `known` (not None, not NaN)
    settings  the report's thresholds as one object, built once from the validated config
"""
