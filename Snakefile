# kanscale: how KAN training scales under DDP on your machine or cluster.
#
#   snakemake --profile profiles/local     # the small CPU study (config/local.yaml)
#   snakemake --profile profiles/slurm     # your cluster (config/config.yaml)
#
# Results layout (<study> = config key `study`):
#   results/<study>/points/<point>.json       one self-describing record per measurement point
#   results/<study>/benchmarks/<point>.tsv    Snakemake's wall-clock of each point's job
#   results/<study>/measurements.csv          tidy: one row per point x repeat
#   results/<study>/{strong,weak,comm,model_size}.csv, guidelines.json, plots/
#   reports/<study>/report.html               self-contained HTML report

from snakemake.utils import min_version

min_version("9.0")


# what `snakemake --report report.zip` says about the workflow; the figures, tables and the HTML
# report it carries are registered in workflow/rules/{analyze,report}.smk
report: "workflow/report/workflow.rst"


# config/config.yaml unless --configfile names another study: Snakemake would otherwise merge
# the two files key by key, mixing two studies into one
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/common_report.smk"
include: "workflow/rules/common_looks.smk"
include: "workflow/rules/common_tune.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/looks.smk"
include: "workflow/rules/report.smk"


onstart:
    forward_sigterm_to_points()


onsuccess:
    refresh_report_if_stale()


onerror:
    refresh_report_if_stale()


# A rule that is seconds of work (the analysis, the report, this one) says `localrule: True` itself:
# it runs where snakemake runs, never as a Slurm job; only measure_point is submitted.
rule all:
    default_target: True
    input:
        get_final_output,
    localrule: True
