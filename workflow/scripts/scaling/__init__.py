"""The analysis: the workflow's thin scripts call these pure functions (pandas, scipy, matplotlib);
nothing here touches the `snakemake` object. One package per stage; a stage imports only the
stages above it in this list, and inside a stage an extension imports the stage's lower module,
never its entry point.

    common   what every stage reads: typed columns, files, statistics, the repeats, the settings
    tables   records -> tidy measurements -> the scaling tables, time to target, the law fits
    model    the performance model of a step: fitted, validated on held-out world sizes, predicting
    decide   the guidelines (threshold rules over tables and model), the looks, the expectations
    report   the figures and the self-contained HTML report
"""
