# Tables -> figures -> expectations -> the self-contained HTML report. Figures, tables and the page
# are registered with report(), so `snakemake --report report.zip` carries them with captions
# (workflow/report/*.rst). The steps run as quoted shell commands (analyze.smk says why).
#
# No absolute path goes into a rule's input or params: Snakemake re-runs a job whose recorded
# inputs or params changed, and an absolute path changes when the checkout moves. The scripts find
# the template and the seed-paper reference next to themselves; the template's content (not its
# path) is a param, so editing it re-renders the report (workflow/rules/common_report.smk).
rule plot_figures:
    input:
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        ddp=rules.compute_tables.output.ddp,
        allreduce_sizes=rules.compute_tables.output.allreduce_sizes,
        anatomy=rules.compute_tables.output.anatomy,
        loss_curves=rules.collect_measurements.output.loss_curves,
        val_curves=rules.collect_measurements.output.val_curves,
        model=rules.fit_model.output.model,
        guidelines=rules.compute_guidelines.output.guidelines,
        compare=get_compare_inputs,
        critical=get_critical_input,
    output:
        plots=report(
            directory("results/{study}/plots"),
            patterns=["{name}.png"],
            caption="../report/figure.rst",
            category="Figures",
            labels={"study": "{study}", "figure": "{name}"},
        ),
    log:
        "results/{study}/logs/plot_figures.log",
    localrule: True
    params:
        io=script_io(),
        args=script_params(
            reference=get_reference_name,
            thresholds=get_thresholds,
            study=get_study_name,
            compare=get_compare_folders,
            critical=get_critical_path,
        ),
    message:
        "figures {wildcards.study}: speedup, efficiency, loss curves, held-out curves, weak, comm, all-reduce, model size"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/plot_figures.py {params.io} {params.args} > {log:q} 2>&1"


rule evaluate_expectations:
    input:
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        allreduce_sizes=rules.compute_tables.output.allreduce_sizes,
        model=rules.fit_model.output.model,
    output:
        expectations=report(
            "results/{study}/expectations.json",
            caption="../report/expectations.rst",
            category="Tables",
            labels={"study": "{study}", "table": "expectations"},
        ),
    log:
        "results/{study}/logs/evaluate_expectations.log",
    localrule: True
    params:
        io=script_io(),
        args=script_params(expect=get_expectations),
    message:
        "expectations {wildcards.study}: report.expect -> pass / fail / inconclusive / not measured"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/evaluate_expectations.py {params.io} {params.args} > {log:q} 2>&1"


rule render_report:
    input:
        points=rules.compute_tables.output.points,
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        ddp=rules.compute_tables.output.ddp,
        allreduce_sizes=rules.compute_tables.output.allreduce_sizes,
        anatomy=rules.compute_tables.output.anatomy,
        fits=rules.compute_tables.output.fits,
        model=rules.fit_model.output.model,
        provenance=rules.compute_tables.output.provenance,
        figures=rules.plot_figures.output.plots,
        guidelines=rules.compute_guidelines.output.guidelines,
        expectations=rules.evaluate_expectations.output.expectations,
        looks=get_last_look,
        compare=get_compare_inputs,
        critical=get_critical_input,
        readiness=get_readiness_input,
    output:
        report=report(
            "reports/{study}/report.html",
            caption="../report/report_html.rst",
            category="Report",
            labels={"study": "{study}", "page": "kanscale report"},
        ),
    log:
        "results/{study}/logs/render_report.log",
    localrule: True
    params:
        io=script_io(),
        args=script_params(
            config=get_config_json,
            reference=get_reference_name,
            compare=get_compare_folders,
            looks=get_last_look_path,
            tuning=get_tuning_path,
            critical=get_critical_path,
            readiness=get_readiness_path,
        ),
        # not the script's: the template's content, so editing it re-renders the report
        template=get_template_digest,
    message:
        "report {wildcards.study}: reports/{wildcards.study}/report.html"
    shell:
        "{PYTHON:q} {SCRIPTS_DIR:q}/render_report.py {params.io} {params.args} > {log:q} 2>&1"
