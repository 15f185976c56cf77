# Records -> tidy measurements -> the four scaling tables and the computed guidelines.


rule collect_measurements:
    input:
        records=get_point_records,
        benchmarks=get_point_benchmarks,
    output:
        "results/{study}/measurements.csv",
    log:
        "results/{study}/logs/collect_measurements.log",
    message:
        "collect {wildcards.study}: one row per point x repeat"
    params:
        points=get_points,
    script:
        "../scripts/collect.py"
