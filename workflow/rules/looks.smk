# The looks of an adaptive study: checkpoint look<k> reads what the study has measured so far and
# adds repeats only where a guideline is undecided (common_looks.smk, scaling/decide/sequential.py).


wildcard_constraints:
    k="[1-9][0-9]*",


checkpoint look:
    input:
        planned=rules.write_plan.output.points,
        previous=get_previous_look,
        # the DAG's edges; the script finds the records and benchmark files in their folders
        records=get_look_records,
        benchmarks=get_look_benchmarks,
    output:
        look="results/{study}/looks/look{k}.json",
    log:
        "results/{study}/logs/look{k}.log",
    localrule: True
    params:
        io=script_io(records=True),
        args=script_params(
            look=lambda wildcards: wildcards.k,
            thresholds=get_thresholds,
            repeats=get_repeats,
            running=get_running_points,
        ),
    message:
        "look {wildcards.k} of {wildcards.study}: the guidelines so far; repeats only where one is undecided"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/look.py {params.io} {params.args} > {log:q} 2>&1"
