# training.lr: tuned: each implementation's rate from the one-rank sweep (common_tune.smk says how
# the tuned points wait for it).


checkpoint tune_lr:
    input:
        records=get_sweep_records,
    output:
        tuning="results/{study}/lr_tuning.json",
    log:
        "results/{study}/logs/tune_lr.log",
    localrule: True
    params:
        ids=get_sweep_ids,
        candidates=get_lr_candidates,
        target=get_lr_target,
    message:
        "tune {wildcards.study}: each implementation's rate from the lr sweep"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/tune_lr.py --in points_dir=results/{wildcards.study}/points"
        " --param ids={params.ids:q} --param candidates={params.candidates:q} --param target={params.target:q}"
        " --out lr_tuning={output.tuning:q} > {log:q} 2>&1"
