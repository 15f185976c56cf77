# Tables -> figures -> the self-contained HTML report.


rule plot_figures:
    input:
        strong=rules.compute_tables.output.strong,
        weak=rules.compute_tables.output.weak,
        comm=rules.compute_tables.output.comm,
        model_size=rules.compute_tables.output.model_size,
        allreduce_sizes=rules.compute_tables.output.allreduce_sizes,
        loss_curves=rules.collect_measurements.output.loss_curves,
        model=rules.fit_model.output[0],
    output:
        directory("results/{study}/plots"),
    log:
        "results/{study}/logs/plot_figures.log",
    params:
        reference_dir=get_reference_dir,
        thresholds=get_report_thresholds,
    message:
        "figures {wildcards.study}: speedup, efficiency, loss curves, weak, comm, all-reduce, model size"
    script:
        "../scripts/plot_figures.py"


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
        template=f"{workflow.basedir}/workflow/report/templates/report.html.j2",
    output:
        "reports/{study}/report.html",
    log:
        "results/{study}/logs/render_report.log",
    params:
        config=config,
        reference_dir=get_reference_dir,
    message:
        "report {wildcards.study}: reports/{wildcards.study}/report.html"
    script:
        "../scripts/render_report.py"
