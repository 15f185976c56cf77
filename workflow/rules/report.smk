# Tables -> figures -> expectations -> the self-contained HTML report. Figures, tables and the page
# are registered with report(), so `snakemake --report report.zip` carries them with captions
# (workflow/report/*.rst).
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
        allreduce_sizes=rules.compute_tables.output.allreduce_sizes,
        loss_curves=rules.collect_measurements.output.loss_curves,
        model=rules.fit_model.output[0],
        compare=get_compare_inputs,
    output:
        report(
            directory("results/{study}/plots"),
            patterns=["{name}.png"],
            caption="../report/figure.rst",
            category="Figures",
            labels={"study": "{study}", "figure": "{name}"},
        ),
    log:
        "results/{study}/logs/plot_figures.log",
    params:
        reference=get_reference_name,
        thresholds=get_thresholds,
        compare=get_compare_folders,
    message:
        "figures {wildcards.study}: speedup, efficiency, loss curves, weak, comm, all-reduce, model size"
    script:
        "../scripts/plot_figures.py"


rule evaluate_expectations:
    input:
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        allreduce_sizes=rules.compute_tables.output.allreduce_sizes,
        model=rules.fit_model.output[0],
    output:
        report(
            "results/{study}/expectations.json",
            caption="../report/expectations.rst",
            category="Tables",
            labels={"study": "{study}", "table": "expectations"},
        ),
    log:
        "results/{study}/logs/evaluate_expectations.log",
    params:
        expect=get_expectations,
    message:
        "expectations {wildcards.study}: report.expect -> pass / fail / inconclusive / not measured"
    script:
        "../scripts/evaluate_expectations.py"


rule render_report:
    input:
        points=rules.compute_tables.output.points,
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        allreduce_sizes=rules.compute_tables.output.allreduce_sizes,
        fits=rules.compute_tables.output.fits,
        model=rules.fit_model.output[0],
        provenance=rules.compute_tables.output.provenance,
        figures=rules.plot_figures.output[0],
        guidelines=rules.compute_guidelines.output[0],
        expectations=rules.evaluate_expectations.output[0],
        compare=get_compare_inputs,
    output:
        report(
            "reports/{study}/report.html",
            caption="../report/report_html.rst",
            category="Report",
            labels={"study": "{study}", "page": "kanscale report"},
        ),
    log:
        "results/{study}/logs/render_report.log",
    params:
        config=config,
        reference=get_reference_name,
        compare=get_compare_folders,
        template=get_template_digest,
    message:
        "report {wildcards.study}: reports/{wildcards.study}/report.html"
    script:
        "../scripts/render_report.py"
