# The get_* helpers of the analysis and report rules (common.smk holds those of the measurement):
# thresholds, compared studies, expectations, and the outputs `snakemake --report` carries.
# Every param a script reads is JSON text (its --param NAME=JSON; scaling/common/io.py step_args).
import hashlib

from scaling.report.compare import compare_files

REPORT_DIR = Path(workflow.current_basedir).parent / "report"


def get_thresholds(wildcards):
    """The config's report section without what is no threshold of the analysis (the reference
    choice, the compared studies, the expectations): it is a param of these rules, so editing
    report.expect or report.compare re-runs only the rules that read them."""
    section = {k: v for k, v in config["report"].items() if k not in ("reference", "compare", "expect")}
    # the deciding intervals' level: 1 - alpha / looks (scaling/decide/sequential.py)
    return as_json({**section, "decision_level": REPEATS.level, "looks": REPEATS.num_looks})


def get_config_json(wildcards):
    """The whole study config (the report's Method and provenance show it)."""
    return as_json(config)


def get_study_name(wildcards):
    return as_json(wildcards.study)


def report_table(path, name):
    """A table output that `snakemake --report` carries (category Tables, labelled by its name)."""
    return report(
        path,
        caption="../report/table.rst",
        category="Tables",
        labels={"study": "{study}", "table": name},
    )


def compare_folders():
    """report.compare: other studies' results folders, relative to the working directory."""
    return config["report"]["compare"]


def get_compare_folders(wildcards):
    return as_json(compare_folders())


def get_compare_inputs(wildcards):
    """Every file of the compared folders the report reads, so a change there re-renders it; a
    missing or foreign folder stops the run with the key and the folder."""
    try:
        return compare_files(compare_folders())
    except ValueError as e:
        raise WorkflowError(str(e)) from None


def get_expectations(wildcards):
    return as_json(config["report"]["expect"])


def get_reference_name(wildcards):
    """The config's report.reference: 'seed-paper-a100' or 'none' (the scripts resolve the folder)."""
    return as_json(config["report"]["reference"])


def get_template_digest(wildcards):
    text = (REPORT_DIR / "templates" / "report.html.j2").read_bytes()
    return hashlib.sha256(text).hexdigest()[:16]
